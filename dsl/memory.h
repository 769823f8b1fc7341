// Storage a kernel reads and writes: buffers (bindings), workgroup-shared arrays and mutable
// variables. Indexing gives an element reference that reads as Expr<T> and can be assigned.
#pragma once
#include <string>

#include "dsl/expr.h"

namespace bdsl::dsl {

template <class X>
concept IndexValue = (DslValue<X> && (std::same_as<value_t<X>, u32> || std::same_as<value_t<X>, i32>)) ||
                     std::same_as<std::remove_cvref_t<X>, uint32_t> || std::same_as<std::remove_cvref_t<X>, int32_t>;

template <class X>
const Node* index_node(const X& i) {
  if constexpr (DslValue<X>)
    return i.node();
  else if constexpr (std::same_as<std::remove_cvref_t<X>, uint32_t>)
    return literal_node<u32>(i);
  else
    return literal_node<i32>(i);
}

namespace hint {
// The fallback of an index of another type; it returns what the right index would, so that the
// message is the first error.
template <class I, class Result>
Result index() {
  static_assert(dependent_false<I>,
                "an index is a u32 or i32 value (or a uint32_t / int32_t constant): convert it, e.g. cast<u32>(x)");
  return result<Result>();
}

// The hint for a value of another type stored into an element, variable or matrix of type T.
template <class T, class X>
void store() {
  if constexpr (!DslValue<X> && std::same_as<host_t<T>, no_host_type>)
    static_assert(dependent_false<X>, "f16, i8 and vectors have no C++ literal: store a DSL value, e.g. cast<f16>(x) or make_vec<f32>(...)");
  else if constexpr (!DslValue<X>)
    static_assert(dependent_false<X>,
                  "a stored literal must have the exact type of the element or variable: 1u for u32, 1 for i32, 1.0f for f32, 1ul for u64, 1l for i64");
  else if constexpr (Bool<T>)
    static_assert(dependent_false<X>, "store into a boolean: store a condition, e.g. x != 0u");
  else if constexpr (Bool<value_t<X>>)
    static_assert(dependent_false<X>, "store of a condition into a number: use select(c, 1u, 0u) to turn a condition into a number");
  else if constexpr (lanes_v<T> != lanes_v<value_t<X>>)
    static_assert(dependent_false<X>, "store of a value of another width: the element or variable has as many lanes as its type");
  else if constexpr (std::same_as<T, u32>)
    static_assert(dependent_false<X>, "store into a u32 element or variable: store a value of the element's type, e.g. cast<u32>(v)");
  else if constexpr (std::same_as<T, i32>)
    static_assert(dependent_false<X>, "store into an i32 element or variable: store a value of the element's type, e.g. cast<i32>(v)");
  else if constexpr (std::same_as<T, f32>)
    static_assert(dependent_false<X>, "store into an f32 element or variable: store a value of the element's type, e.g. cast<f32>(v)");
  else if constexpr (std::same_as<T, f16>)
    static_assert(dependent_false<X>, "store into an f16 element or variable: store a value of the element's type, e.g. cast<f16>(v)");
  else if constexpr (std::same_as<T, i8>)
    static_assert(dependent_false<X>, "store into an i8 element or variable: store a value of the element's type, e.g. cast<i8>(v)");
  else if constexpr (std::same_as<T, u64>)
    static_assert(dependent_false<X>, "store into a u64 element or variable: store a value of the element's type, e.g. cast<u64>(v)");
  else if constexpr (std::same_as<T, i64>)
    static_assert(dependent_false<X>, "store into an i64 element or variable: store a value of the element's type, e.g. cast<i64>(v)");
  else
    static_assert(dependent_false<X>, "store of a vector of another type: store a value of the element's type, e.g. cast<vec4>(v)");
}
}  // namespace hint

// One element of a buffer (LoadOp = Load, StoreKind = Store) or of a shared array; `owner` is the
// builder that declared the array (BuilderCore::check_handle).
template <class T, Op LoadOp, StmtKind StoreKind>
class ElementRef {
 public:
  using value_type = T;
  ElementRef(uint32_t array, const Node* index, uint64_t owner) : array_(array), index_(index), owner_(owner) {}

  const Node* node() const {
    BuilderCore& b = owned();
    return b.make(LoadOp, type_of<T>(), {index_}, 0, array_);
  }
  operator Expr<T>() const { return Expr<T>(node()); }  // NOLINT: reads as a value

  template <class X>
    requires OperandOf<X, T>
  const ElementRef& operator=(const X& value) const {
    BuilderCore& b = owned();
    b.append(Stmt{StoreKind, array_, index_, as_node<T>(value)});
    return *this;
  }
  const ElementRef& operator=(const ElementRef& other) const { return *this = Expr<T>(other.node()); }

  template <class X>
    requires OperandOf<X, T>
  const ElementRef& operator+=(const X& v) const { return *this = Expr<T>(node()) + v; }
  template <class X>
    requires OperandOf<X, T>
  const ElementRef& operator-=(const X& v) const { return *this = Expr<T>(node()) - v; }
  template <class X>
    requires OperandOf<X, T>
  const ElementRef& operator*=(const X& v) const { return *this = Expr<T>(node()) * v; }

  // Their fallbacks (see hint:: in dsl/expr.h): a value of another type.
  template <class X>
    requires hint::Operand<X> && (!OperandOf<X, T>)
  const ElementRef& operator=(const X&) const {
    hint::store<T, X>();
    return *this;
  }
  template <class X>
    requires hint::Operand<X> && (!OperandOf<X, T>)
  const ElementRef& operator+=(const X& v) const { return *this = v; }
  template <class X>
    requires hint::Operand<X> && (!OperandOf<X, T>)
  const ElementRef& operator-=(const X& v) const { return *this = v; }
  template <class X>
    requires hint::Operand<X> && (!OperandOf<X, T>)
  const ElementRef& operator*=(const X& v) const { return *this = v; }

  uint32_t array() const { return owned(), array_; }
  const Node* index() const { return index_; }

 private:
  // The current builder, once it is the one that declared the array.
  BuilderCore& owned() const {
    BuilderCore& b = BuilderCore::current();
    b.check_handle(owner_, LoadOp == Op::SharedLoad ? "shared array" : "buffer binding", array_);
    return b;
  }
  uint32_t array_;
  const Node* index_;
  uint64_t owner_;
};

template <class T>
using BufferRef = ElementRef<T, Op::Load, StmtKind::Store>;
template <class T>
using SharedRef = ElementRef<T, Op::SharedLoad, StmtKind::SharedStore>;

// A storage buffer binding: a runtime-sized array of T.
template <class T>
class Buffer {
 public:
  using element_type = T;
  explicit Buffer(uint32_t binding, uint64_t owner = BuilderCore::current().builder_id()) : binding_(binding), owner_(owner) {}
  template <class I>
    requires(!IndexValue<I>)
  BufferRef<T> operator[](const I&) const { return hint::index<I, BufferRef<T>>(); }
  template <class I>
    requires IndexValue<I>
  BufferRef<T> operator[](const I& i) const {
    return BufferRef<T>(binding_, index_node(i), owner_);
  }
  // Its binding in the current builder: throws unless that builder declared it.
  uint32_t binding() const {
    BuilderCore::current().check_handle(owner_, "buffer binding", binding_);
    return binding_;
  }

 private:
  uint32_t binding_;
  uint64_t owner_;
};

// A workgroup-shared array of T with a fixed element count.
template <class T>
class Shared {
 public:
  using element_type = T;
  Shared(uint32_t id, uint32_t count, uint64_t owner = BuilderCore::current().builder_id()) : id_(id), count_(count), owner_(owner) {}
  template <class I>
    requires(!IndexValue<I>)
  SharedRef<T> operator[](const I&) const { return hint::index<I, SharedRef<T>>(); }
  template <class I>
    requires IndexValue<I>
  SharedRef<T> operator[](const I& i) const {
    return SharedRef<T>(id_, index_node(i), owner_);
  }
  uint32_t size() const { return count_; }
  // Its id in the current builder: throws unless that builder declared it.
  uint32_t id() const {
    BuilderCore::current().check_handle(owner_, "shared array", id_);
    return id_;
  }

 private:
  uint32_t id_;
  uint32_t count_;
  uint64_t owner_;
};

// A workgroup-shared array of rows x cols elements of T, row-major: tile[r][c] (or tile.at(r, c))
// is element r * cols + c of one shared array. Indices are u32 or i32 (i32 converted); a constant
// index past its dimension is refused when the kernel is built.
template <class T>
class Shared2D {
 public:
  using element_type = T;
  Shared2D(Shared<T> flat, uint32_t rows, uint32_t cols) : flat_(flat), rows_(rows), cols_(cols) {}

  class Row {
   public:
    Row(Shared2D array, Expr<u32> start) : array_(array), start_(start) {}
    template <class I>
      requires(!IndexValue<I>)
    SharedRef<T> operator[](const I&) const { return hint::index<I, SharedRef<T>>(); }
    template <class I>
      requires IndexValue<I>
    SharedRef<T> operator[](const I& col) const {
      return array_.flat_[start_ + array_.checked(col, array_.cols_, "column")];
    }

   private:
    Shared2D array_;
    Expr<u32> start_;
  };
  template <class I>
    requires(!IndexValue<I>)
  Row operator[](const I&) const { return hint::index<I, Row>(); }
  template <class I>
    requires IndexValue<I>
  Row operator[](const I& row) const {
    return Row(*this, checked(row, rows_, "row") * cols_);
  }
  template <class I, class J>
    requires IndexValue<I> && IndexValue<J>
  SharedRef<T> at(const I& row, const J& col) const {
    return (*this)[row][col];
  }
  uint32_t rows() const { return rows_; }
  uint32_t cols() const { return cols_; }
  const Shared<T>& flat() const { return flat_; }  // the same elements as one array

 private:
  // An index as u32; a C++ constant is checked against the dimension.
  template <class I>
  static Expr<u32> checked(const I& i, uint32_t size, const char* what) {
    if constexpr (DslValue<I>) {
      if constexpr (std::same_as<value_t<I>, u32>)
        return Expr<u32>(i.node());
      else
        return Expr<u32>(BuilderCore::current().make(Op::Convert, type_of<u32>(), {i.node()}));
    } else {
      const bool negative = [&] {
        if constexpr (std::is_signed_v<std::remove_cvref_t<I>>) return i < 0;
        return false;
      }();
      if (negative || static_cast<uint32_t>(i) >= size)
        BuilderCore::current().fail(std::string("2-D shared array: ") + what + " " + std::to_string(i) +
                                    " is outside 0.." + std::to_string(size - 1));
      return Expr<u32>(literal_node<u32>(static_cast<uint32_t>(i)));
    }
  }
  Shared<T> flat_;
  uint32_t rows_, cols_;
};

// A mutable local variable. Reading it gives its value at that point of the program.
template <class T>
class Var {
 public:
  using value_type = T;
  explicit Var(uint32_t id, uint64_t owner = BuilderCore::current().builder_id()) : id_(id), owner_(owner) {}
  Var(const Var&) = default;

  const Node* node() const { return owned().make(Op::VarRead, type_of<T>(), {}, 0, id_); }
  operator Expr<T>() const { return Expr<T>(node()); }  // NOLINT: reads as a value

  template <class X>
    requires OperandOf<X, T>
  Var& operator=(const X& value) {
    BuilderCore& b = owned();
    b.append(Stmt{StmtKind::Assign, id_, nullptr, as_node<T>(value)});
    return *this;
  }
  Var& operator=(const Var& other) { return *this = Expr<T>(other.node()); }
  template <class X>
    requires OperandOf<X, T>
  Var& operator+=(const X& v) { return *this = Expr<T>(node()) + v; }
  template <class X>
    requires OperandOf<X, T>
  Var& operator-=(const X& v) { return *this = Expr<T>(node()) - v; }
  template <class X>
    requires OperandOf<X, T>
  Var& operator*=(const X& v) { return *this = Expr<T>(node()) * v; }

  // Their fallbacks (see hint:: in dsl/expr.h): a value of another type.
  template <class X>
    requires hint::Operand<X> && (!OperandOf<X, T>)
  Var& operator=(const X&) {
    hint::store<T, X>();
    return *this;
  }
  template <class X>
    requires hint::Operand<X> && (!OperandOf<X, T>)
  Var& operator+=(const X& v) { return *this = v; }
  template <class X>
    requires hint::Operand<X> && (!OperandOf<X, T>)
  Var& operator-=(const X& v) { return *this = v; }
  template <class X>
    requires hint::Operand<X> && (!OperandOf<X, T>)
  Var& operator*=(const X& v) { return *this = v; }

  auto x() const requires(lanes_v<T> >= 2) { return Expr<T>(node()).x(); }
  auto y() const requires(lanes_v<T> >= 2) { return Expr<T>(node()).y(); }
  uint32_t id() const { return owned(), id_; }

 private:
  BuilderCore& owned() const {
    BuilderCore& b = BuilderCore::current();
    b.check_handle(owner_, "variable", id_);
    return b;
  }
  uint32_t id_;
  uint64_t owner_;
};

}  // namespace bdsl::dsl
