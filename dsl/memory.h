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

// One element of a buffer (LoadOp = Load, StoreKind = Store) or of a shared array.
template <class T, Op LoadOp, StmtKind StoreKind>
class ElementRef {
 public:
  using value_type = T;
  ElementRef(uint32_t array, const Node* index) : array_(array), index_(index) {}

  const Node* node() const {
    return BuilderCore::current().make(LoadOp, type_of<T>(), {index_}, 0, array_);
  }
  operator Expr<T>() const { return Expr<T>(node()); }  // NOLINT: reads as a value

  template <class X>
    requires OperandOf<X, T>
  const ElementRef& operator=(const X& value) const {
    BuilderCore::current().append(Stmt{StoreKind, array_, index_, as_node<T>(value)});
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

  uint32_t array() const { return array_; }
  const Node* index() const { return index_; }

 private:
  uint32_t array_;
  const Node* index_;
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
  explicit Buffer(uint32_t binding) : binding_(binding) {}
  template <class I>
    requires IndexValue<I>
  BufferRef<T> operator[](const I& i) const {
    return BufferRef<T>(binding_, index_node(i));
  }
  uint32_t binding() const { return binding_; }

 private:
  uint32_t binding_;
};

// A workgroup-shared array of T with a fixed element count.
template <class T>
class Shared {
 public:
  using element_type = T;
  Shared(uint32_t id, uint32_t count) : id_(id), count_(count) {}
  template <class I>
    requires IndexValue<I>
  SharedRef<T> operator[](const I& i) const {
    return SharedRef<T>(id_, index_node(i));
  }
  uint32_t size() const { return count_; }
  uint32_t id() const { return id_; }

 private:
  uint32_t id_;
  uint32_t count_;
};

// A mutable local variable. Reading it gives its value at that point of the program.
template <class T>
class Var {
 public:
  using value_type = T;
  explicit Var(uint32_t id) : id_(id) {}
  Var(const Var&) = default;

  const Node* node() const { return BuilderCore::current().make(Op::VarRead, type_of<T>(), {}, 0, id_); }
  operator Expr<T>() const { return Expr<T>(node()); }  // NOLINT: reads as a value

  template <class X>
    requires OperandOf<X, T>
  Var& operator=(const X& value) {
    BuilderCore::current().append(Stmt{StmtKind::Assign, id_, nullptr, as_node<T>(value)});
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

  auto x() const requires(lanes_v<T> >= 2) { return Expr<T>(node()).x(); }
  auto y() const requires(lanes_v<T> >= 2) { return Expr<T>(node()).y(); }
  uint32_t id() const { return id_; }

 private:
  uint32_t id_;
};

}  // namespace bdsl::dsl
