// Cooperative matrices (tensor cores): a subgroup holds a Rows x Cols matrix spread over its
// lanes and multiplies it as one. The shape, the element type and the role (A, B or accumulator)
// are part of the C++ type, so `acc.mul_add(a, b)` with a's columns != b's rows, or with an int8
// A and a float accumulator, does not compile. Each operation is run by the whole subgroup
// together: keep them out of control flow that differs between invocations (checked).
//
//   auto acc = k.matrix<MatrixAcc<i32, 16, 8>>("acc", 0);
//   auto a = k.matrix<MatrixA<i8, 16, 32>>("a");
//   auto b = k.matrix<MatrixB<i8, 32, 8>>("b");
//   a.load(a_tile, 0u, 32u, MatrixLayout::RowMajor);     // element offset, stride (in elements)
//   b.load(b_tile, 0u, 32u, MatrixLayout::ColumnMajor);
//   acc.mul_add(a, b);                                    // acc = a * b + acc
//   acc.store(c_tile, 0u, 16u, MatrixLayout::ColumnMajor);
//
// An integer or F16 matrix also loads from and stores to arrays of 32-bit words (u32, uvec2,
// uvec4, ...): the bytes are the matrix's elements in order, and `element` and `stride` count the
// array's elements (GLSL_KHR_cooperative_matrix issue 3). So int8 and F16 tiles can be written a
// word at a time (F16 pairs as packHalf2x16 packs them, the lower element in the low half).
//
// Each invocation also holds a share of the elements, read and written one at a time
// (element(i), set_element(i, v)). Which elements an invocation holds, and how many, is the
// device's arrangement, not the API's: a kernel that relies on one must check that the device
// uses it (ops/common/matrix_fragments.h probes NVIDIA's).
//
// Prints as GL_NV_cooperative_matrix (icoopmatNV / fcoopmatNV): the device must list the shape
// (rt::DeviceInfo::cooperative_matrix_nv_shapes); the runtime refuses it otherwise.
#pragma once
#include <concepts>
#include <cstdint>

#include "dsl/memory.h"

namespace bdsl::dsl {

template <class S>
concept MatrixComponent = std::same_as<S, i8> || std::same_as<S, i32> || std::same_as<S, f16> || std::same_as<S, f32>;

// Arrays a matrix of component S loads from and stores to: its own type, or for an integer or
// F16 matrix 32-bit words (scalars or 2- and 4-lane vectors), counted in those words.
template <class U, class S>
concept MatrixMemory = std::same_as<U, S> || ((std::same_as<S, i8> || std::same_as<S, i32> || std::same_as<S, f16>) &&
                                              Integer<U> && (lanes_v<U> == 1 || lanes_v<U> == 2 || lanes_v<U> == 4));

// Which A/B element types multiply into which accumulator type.
template <class AB, class C>
concept MatrixProduct = (std::same_as<AB, i8> && std::same_as<C, i32>) ||
                        (std::same_as<AB, f16> && (std::same_as<C, f16> || std::same_as<C, f32>));

// The arrays a matrix moves to and from: buffers and shared arrays.
template <class Arr>
inline constexpr bool is_matrix_array = false;
template <class U>
inline constexpr bool is_matrix_array<Buffer<U>> = true;
template <class U>
inline constexpr bool is_matrix_array<Shared<U>> = true;

template <class S, uint32_t Rows, uint32_t Cols, MatrixUse Use>
  requires MatrixComponent<S> && (Rows > 0) && (Cols > 0)
class Matrix;

template <class M>
concept MatrixType = requires {
  typename M::element_type;
  M::rows;
  M::cols;
  M::use;
} && std::same_as<M, Matrix<typename M::element_type, M::rows, M::cols, M::use>>;

// What mul_add takes (Matrix::mul_add): C += A * B with an A and a B of one component type that
// multiplies into C's, A Rows x K and B K x Cols for a Rows x Cols C.
template <class C, class A, class B>
concept MulAddOperands = C::use == MatrixUse::Accumulator && A::use == MatrixUse::A && B::use == MatrixUse::B &&
                         std::same_as<typename A::element_type, typename B::element_type> &&
                         MatrixProduct<typename A::element_type, typename C::element_type> && A::rows == C::rows &&
                         A::cols == B::rows && B::cols == C::cols;

template <class S, uint32_t Rows, uint32_t Cols, MatrixUse Use>
  requires MatrixComponent<S> && (Rows > 0) && (Cols > 0)
class Matrix {
 public:
  using element_type = S;
  static constexpr uint32_t rows = Rows;
  static constexpr uint32_t cols = Cols;
  static constexpr MatrixUse use = Use;

  explicit Matrix(uint32_t id, uint64_t owner = BuilderCore::current().builder_id()) : id_(id), owner_(owner) {}
  // Its id in the current builder: throws unless that builder declared it.
  uint32_t id() const {
    BuilderCore::current().check_handle(owner_, "matrix", id_);
    return id_;
  }

  // Every element = v.
  template <class X>
    requires OperandOf<X, S>
  void fill(const X& v) const {
    BuilderCore::current().append(Stmt{StmtKind::FillMatrix, id(), nullptr, as_node<S>(v)});
  }

  // Element (r, c) from memory[element + r * stride + c] (RowMajor) or [element + c * stride + r],
  // in units of the array's element (MatrixMemory).
  template <class U, class E, class St>
    requires MatrixMemory<U, S> && OperandOf<E, u32> && OperandOf<St, u32>
  void load(const Buffer<U>& from, const E& element, const St& stride, MatrixLayout layout) const {
    move(StmtKind::LoadMatrix, {from.binding(), false, layout, {}}, element, stride);
  }
  template <class U, class E, class St>
    requires MatrixMemory<U, S> && OperandOf<E, u32> && OperandOf<St, u32>
  void load(const Shared<U>& from, const E& element, const St& stride, MatrixLayout layout) const {
    move(StmtKind::LoadMatrix, {from.id(), true, layout, {}}, element, stride);
  }
  template <class U, class E, class St>
    requires MatrixMemory<U, S> && OperandOf<E, u32> && OperandOf<St, u32>
  void store(const Buffer<U>& to, const E& element, const St& stride, MatrixLayout layout) const {
    move(StmtKind::StoreMatrix, {to.binding(), false, layout, {}}, element, stride);
  }
  template <class U, class E, class St>
    requires MatrixMemory<U, S> && OperandOf<E, u32> && OperandOf<St, u32>
  void store(const Shared<U>& to, const E& element, const St& stride, MatrixLayout layout) const {
    move(StmtKind::StoreMatrix, {to.id(), true, layout, {}}, element, stride);
  }

  // this = a * b + this: a is Rows x K, b is K x Cols.
  template <class AB, uint32_t K>
    requires(Use == MatrixUse::Accumulator) && MatrixProduct<AB, S>
  void mul_add(const Matrix<AB, Rows, K, MatrixUse::A>& a, const Matrix<AB, K, Cols, MatrixUse::B>& b) const {
    Stmt s{StmtKind::MulAddMatrix, id()};
    s.matrix.operands = {a.id(), b.id()};
    BuilderCore::current().append(std::move(s));
  }

  // Element i of this invocation's share (m[i] in GLSL): per invocation, like a variable.
  Expr<S> element(uint32_t i) const {
    BuilderCore& b = BuilderCore::current();
    return Expr<S>(b.make(Op::MatrixElement, type_of<S>(), {literal_node<u32>(i)}, 0, id()));
  }
  template <class X>
    requires OperandOf<X, S>
  void set_element(uint32_t i, const X& v) const {
    BuilderCore::current().append(Stmt{StmtKind::SetMatrixElement, id(), literal_node<u32>(i), as_node<S>(v)});
  }

  // Fallbacks (see hint:: in dsl/expr.h) of fill, load, store and mul_add.
  template <class X>
    requires hint::Operand<X> && (!OperandOf<X, S>)
  void fill(const X&) const {
    hint::store<S, X>();
  }
  template <class Arr, class E, class St>
    requires is_matrix_array<Arr> && hint::Operand<E> && hint::Operand<St> &&
             (!(MatrixMemory<typename Arr::element_type, S> && OperandOf<E, u32> && OperandOf<St, u32>))
  void load(const Arr&, const E&, const St&, MatrixLayout) const {
    access_hint<typename Arr::element_type, E, St>();
  }
  template <class Arr, class E, class St>
    requires is_matrix_array<Arr> && hint::Operand<E> && hint::Operand<St> &&
             (!(MatrixMemory<typename Arr::element_type, S> && OperandOf<E, u32> && OperandOf<St, u32>))
  void store(const Arr&, const E&, const St&, MatrixLayout) const {
    access_hint<typename Arr::element_type, E, St>();
  }
  template <class MA, class MB>
    requires MatrixType<MA> && MatrixType<MB> && (!MulAddOperands<Matrix, MA, MB>)
  void mul_add(const MA&, const MB&) const {
    using A = typename MA::element_type;
    if constexpr (Use != MatrixUse::Accumulator)
      static_assert(hint::dependent_false<MA>, "mul_add is a method of the accumulator: acc.mul_add(a, b) with acc a MatrixAcc");
    else if constexpr (MA::use != MatrixUse::A || MB::use != MatrixUse::B)
      static_assert(hint::dependent_false<MA>, "mul_add(a, b) takes a MatrixA, then a MatrixB");
    else if constexpr (!std::same_as<A, typename MB::element_type>)
      static_assert(hint::dependent_false<MA>, "mul_add(a, b): a and b must have one component type, i8 or f16");
    else if constexpr (!MatrixProduct<A, S>)
      static_assert(hint::dependent_false<MA>,
                    "mul_add(a, b): i8 A and B multiply into an i32 accumulator, f16 ones into an f16 or f32 accumulator");
    else
      static_assert(hint::dependent_false<MA>,
                    "mul_add(a, b): the shapes do not fit: a must be Rows x K and b K x Cols for a Rows x Cols accumulator");
  }

 private:
  template <class U, class E, class St>
  static void access_hint() {
    if constexpr (MatrixMemory<U, S>)
      static_assert(hint::dependent_false<U>, "a matrix's element offset and stride are u32: write 0u, 16u or cast<u32>(x)");
    else if constexpr (std::same_as<S, f32>)
      static_assert(hint::dependent_false<U>,
                    "only integer and f16 matrices load from and store to arrays of 32-bit words: an f32 matrix needs an array of f32");
    else
      static_assert(hint::dependent_false<U>,
                    "an i8, i32 or f16 matrix uses an array of its own component type or of 32-bit words: u32 or i32 scalars, 2- or 4-lane vectors");
  }

  template <class E, class St>
  void move(StmtKind kind, MatrixAccess access, const E& element, const St& stride) const {
    Stmt s{kind, id(), as_node<u32>(element), as_node<u32>(stride)};
    s.matrix = access;
    BuilderCore::current().append(std::move(s));
  }

  uint32_t id_;
  uint64_t owner_;
};

template <class S, uint32_t M, uint32_t K>
using MatrixA = Matrix<S, M, K, MatrixUse::A>;
template <class S, uint32_t K, uint32_t N>
using MatrixB = Matrix<S, K, N, MatrixUse::B>;
template <class S, uint32_t M, uint32_t N>
using MatrixAcc = Matrix<S, M, N, MatrixUse::Accumulator>;

}  // namespace bdsl::dsl
