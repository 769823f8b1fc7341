// Expr<T>: a typed handle to an IR node. Operators are defined only where GLSL defines them for T,
// and both operands must have the same type (a vector may meet its own scalar type in + - * /).
// C++ literals mix only when their type is T's exact host type: Expr<u32> + 1u, not Expr<u32> + 1.
#pragma once
#include <bit>
#include <concepts>
#include <type_traits>

#include "dsl/builder.h"
#include "dsl/scalar_types.h"

namespace bdsl::dsl {

template <class T>
class Expr;

// Anything that reads as a value of DSL type T (Expr, Var, buffer element) declares `value_type`.
template <class X>
concept DslValue = requires { typename std::remove_cvref_t<X>::value_type; } &&
                   requires(const std::remove_cvref_t<X>& x) { x.node(); };
template <class X>
using value_t = typename std::remove_cvref_t<X>::value_type;

template <class T>
const Node* literal_node(host_t<T> v) {
  uint64_t bits = 0;
  if constexpr (std::is_same_v<host_t<T>, float>)
    bits = std::bit_cast<uint32_t>(v);
  else if constexpr (std::is_same_v<host_t<T>, double>)
    bits = std::bit_cast<uint64_t>(v);
  else if constexpr (std::is_same_v<host_t<T>, int32_t>)
    bits = static_cast<uint32_t>(v);
  else
    bits = static_cast<uint64_t>(v);
  return BuilderCore::current().make(Op::Const, type_of<T>(), {}, bits);
}

template <class T>
class Expr {
 public:
  using value_type = T;
  explicit Expr(const Node* n) : node_(n), owner_(n->owner) {}
  // A C++ literal of exactly T's host type becomes a constant.
  template <class L>
    requires(std::same_as<L, host_t<T>> && !std::same_as<L, no_host_type>)
  Expr(L literal) : Expr(literal_node<T>(literal)) {}  // NOLINT: implicit by design
  template <class X>
    requires(DslValue<X> && std::same_as<value_t<X>, T> && !std::same_as<std::remove_cvref_t<X>, Expr>)
  Expr(const X& x) : Expr(x.node()) {}  // NOLINT: Var<T> and buffer elements read as Expr<T>

  // Its node, once the current builder is the one that made it (and it is not built yet): the
  // owner is checked before the node is touched, which may belong to a builder that is gone.
  const Node* node() const {
    BuilderCore::current().check_handle(owner_, "an expression");
    return node_;
  }

  // Vector lanes.
  auto x() const requires(lanes_v<T> >= 2) { return lane(0); }
  auto y() const requires(lanes_v<T> >= 2) { return lane(1); }
  auto z() const requires(lanes_v<T> >= 3) { return lane(2); }
  auto w() const requires(lanes_v<T> >= 4) { return lane(3); }
  Expr<scalar_t<T>> lane(uint32_t i) const requires(lanes_v<T> >= 2) {
    if (i >= static_cast<uint32_t>(lanes_v<T>)) BuilderCore::current().fail("vector lane out of range");
    return Expr<scalar_t<T>>(
        BuilderCore::current().make(Op::Component, type_of<scalar_t<T>>(), {node()}, 0, i));
  }

 private:
  const Node* node_;
  uint64_t owner_;
};

// Turns an operand (Expr, Var, element ref or host literal) into a node of DSL type T.
template <class T, class X>
const Node* as_node(const X& x) {
  if constexpr (DslValue<X>)
    return x.node();
  else
    return literal_node<T>(x);
}

template <class X, class T>
concept OperandOf = (DslValue<X> && std::same_as<value_t<X>, T>) || std::same_as<std::remove_cvref_t<X>, host_t<T>>;

// The DSL type of a binary operation's operands: taken from whichever side is a DSL value.
template <class A, class B>
struct operand_type {};
template <class A, class B>
  requires DslValue<A>
struct operand_type<A, B> {
  using type = value_t<A>;
};
template <class A, class B>
  requires(!DslValue<A> && DslValue<B>)
struct operand_type<A, B> {
  using type = value_t<B>;
};
template <class A, class B>
using operand_t = typename operand_type<A, B>::type;

template <class A, class B>
concept SameOperands = requires { typename operand_t<A, B>; } && OperandOf<A, operand_t<A, B>> &&
                       OperandOf<B, operand_t<A, B>>;

template <class T>
Expr<T> make_expr(Op op, Type type, std::vector<const Node*> args) {
  return Expr<T>(BuilderCore::current().make(op, type, std::move(args)));
}

template <class R, class A, class B>
Expr<R> binary(Op op, const A& a, const B& b) {
  using T = operand_t<A, B>;
  return make_expr<R>(op, type_of<R>(), {as_node<T>(a), as_node<T>(b)});
}

// The DSL type of a C++ literal: float -> f32, int32_t -> i32, uint32_t -> u32, int64_t -> i64,
// uint64_t -> u64.
template <class L>
struct dsl_type_of_literal {};
template <class T>
struct literal_of {
  using type = T;
};
template <>
struct dsl_type_of_literal<float> : literal_of<f32> {};
template <>
struct dsl_type_of_literal<int32_t> : literal_of<i32> {};
template <>
struct dsl_type_of_literal<uint32_t> : literal_of<u32> {};
template <>
struct dsl_type_of_literal<int64_t> : literal_of<i64> {};
template <>
struct dsl_type_of_literal<uint64_t> : literal_of<u64> {};

// Type hints. A DSL type error would otherwise print pages of concept notes. So each family of
// operations also has a fallback overload, viable exactly when none of the real ones is, whose
// static_assert says which rule the operands break and how to fix it (one case per hint in
// tests/compile_fail). A fallback needs a DSL value among its operands and only DSL values or C++
// arithmetic literals beside it, so other code (int + int, iterators, streams) never sees one.
namespace hint {

// GCC 12 rejects static_assert(false) even in a template that is never instantiated.
template <class...>
inline constexpr bool dependent_false = false;

template <class X>
concept Operand = DslValue<X> || std::is_arithmetic_v<std::remove_cvref_t<X>>;
template <class A, class B>
concept Operands = (DslValue<A> || DslValue<B>) && Operand<A> && Operand<B>;

// The DSL type of an operand, or of the constant a literal would make (void for 1.0, 1u8, ...).
template <class X>
struct type_of_operand {
  using type = void;
};
template <class X>
  requires DslValue<X>
struct type_of_operand<X> {
  using type = value_t<X>;
};
template <>
struct type_of_operand<bool> {
  using type = boolean;
};
template <class X>
  requires requires { typename dsl_type_of_literal<X>::type; }
struct type_of_operand<X> {
  using type = typename dsl_type_of_literal<X>::type;
};
template <class X>
using type_t = typename type_of_operand<std::remove_cvref_t<X>>::type;
// The DSL type a fallback's result claims, the DSL side's, so that later uses add no errors.
template <class A, class B>
struct result_of {
  using type = std::conditional_t<DslValue<A> || !DslValue<B>, std::conditional_t<std::is_void_v<type_t<A>>, u32, type_t<A>>,
                                  type_t<B>>;
};
template <class A, class B>
struct condition_of {
  using type = boolean;
};

// A fallback's return value, after its static_assert (it never runs).
template <class R>
[[noreturn]] R result() {
  std::abort();
}

// Why two operands have no one DSL type; None: they do, and the operation is not defined for it.
enum class Mismatch { Boolean, Int8, Literal, FloatInt, SignedUnsigned, FloatWidths, Lanes, None };
template <class A, class B>
constexpr Mismatch mismatch() {
  using TA = type_t<A>;
  using TB = type_t<B>;
  using SA = scalar_t<TA>;
  using SB = scalar_t<TB>;
  if (std::is_void_v<TA> || std::is_void_v<TB>) return Mismatch::Literal;
  if (Bool<TA> || Bool<TB>) return Mismatch::Boolean;
  if (std::same_as<SA, i8> || std::same_as<SB, i8>) return Mismatch::Int8;
  if (std::same_as<SA, SB>) return lanes_v<TA> == lanes_v<TB> ? Mismatch::None : Mismatch::Lanes;
  if (!DslValue<A> || !DslValue<B>) return Mismatch::Literal;
  if (Float<SA> != Float<SB>) return Mismatch::FloatInt;
  return Integer<SA> ? Mismatch::SignedUnsigned : Mismatch::FloatWidths;
}

// The hint for two operands of a two-operand operation of family f that no overload takes.
enum class Family { Arith, Mod, Bits, Order, Equal, Logic, Function, FloatFunction, Select };
template <Family f, class A, class B>
void operands() {
  using TA = type_t<A>;
  using TB = type_t<B>;
  constexpr Mismatch m = mismatch<A, B>();
  if constexpr (f == Family::Logic)
    static_assert(dependent_false<A>, "&& and || take conditions, not numbers: compare first, e.g. x != 0u");
  else if constexpr (f == Family::Order && (lanes_v<TA> > 1 || lanes_v<TB> > 1))
    static_assert(dependent_false<A>, "< <= > >= take scalars, not vectors: compare lanes, e.g. v.x() < w.x()");
  else if constexpr (f == Family::Equal && (lanes_v<TA> > 1 || lanes_v<TB> > 1))
    static_assert(dependent_false<A>, "== and != take scalars, not vectors: compare lanes, e.g. v.x() == w.x()");
  else if constexpr (m == Mismatch::Boolean && f == Family::Bits)
    static_assert(dependent_false<A>, "& | ^ take integers, not conditions: use && and || (!= for ^), or select(c, 1u, 0u)");
  else if constexpr (m == Mismatch::Boolean && (f == Family::Equal || f == Family::Select))
    static_assert(dependent_false<A>,
                  "a condition and a number do not mix: use select(c, 1u, 0u) to turn a condition into a number");
  else if constexpr (m == Mismatch::Boolean)
    static_assert(dependent_false<A>,
                  "booleans have no arithmetic: use select(c, 1u, 0u) to turn a condition into a number");
  else if constexpr (m == Mismatch::Int8)
    static_assert(dependent_false<A>, "i8 has no arithmetic: cast<i32>(x) first");
  else if constexpr (m == Mismatch::Literal)
    static_assert(dependent_false<A>,
                  "a literal must have the operand's exact type: 1u for u32, 1 for i32, 1.0f for f32, 1ul for u64, 1l for i64");
  else if constexpr (m == Mismatch::FloatInt && std::same_as<TA, f32> && std::same_as<TB, u32>)
    static_assert(dependent_false<A>, "f32 and u32 do not mix: convert one side, e.g. cast<f32>(x)");
  else if constexpr (m == Mismatch::FloatInt && std::same_as<TA, u32> && std::same_as<TB, f32>)
    static_assert(dependent_false<A>, "u32 and f32 do not mix: convert one side, e.g. cast<f32>(x)");
  else if constexpr (m == Mismatch::FloatInt && std::same_as<TA, f32> && std::same_as<TB, i32>)
    static_assert(dependent_false<A>, "f32 and i32 do not mix: convert one side, e.g. cast<f32>(x)");
  else if constexpr (m == Mismatch::FloatInt && std::same_as<TA, i32> && std::same_as<TB, f32>)
    static_assert(dependent_false<A>, "i32 and f32 do not mix: convert one side, e.g. cast<f32>(x)");
  else if constexpr (m == Mismatch::FloatInt)
    static_assert(dependent_false<A>, "floats and integers do not mix: convert one side, e.g. cast<f32>(x) or cast<vec4>(v)");
  else if constexpr (m == Mismatch::SignedUnsigned && Integer32<TA> && Integer32<TB>)
    static_assert(dependent_false<A>, "i32 and u32 do not mix: convert one side, e.g. cast<u32>(x)");
  else if constexpr (m == Mismatch::SignedUnsigned)
    static_assert(dependent_false<A>, "integers of different types or widths (i32, u32, i64, u64) do not mix: convert one side, e.g. cast<u64>(x)");
  else if constexpr (m == Mismatch::FloatWidths)
    static_assert(dependent_false<A>, "floats of different widths (f16, f32, f64) do not mix: convert one side, e.g. cast<f32>(x)");
  else if constexpr (m == Mismatch::Lanes && lanes_v<TA> > 1 && lanes_v<TB> > 1)
    static_assert(dependent_false<A>,
                  "vectors of different widths do not mix: make the widths equal, e.g. make_vec<f32>(v.x(), v.y(), 0.0f, 0.0f)");
  else if constexpr (m == Mismatch::Lanes)
    static_assert(dependent_false<A>,
                  "a vector and a scalar mix only as vector + - * / scalar (the vector first): else make a vector, e.g. make_vec<f32>(s, s, s, s)");
  else if constexpr (f == Family::Mod)
    static_assert(dependent_false<A>, "% is defined for integers only: for floats write x - y * floor(x / y)");
  else if constexpr (f == Family::Bits)
    static_assert(dependent_false<A>,
                  "& | ^ << >> are defined for integers only: for a float's bits use bitcast<u32>(x)");
  else if constexpr (f == Family::FloatFunction)
    static_assert(dependent_false<A>, "pow is defined for floats only: convert first, e.g. pow(cast<f32>(x), cast<f32>(y))");
  else
    static_assert(dependent_false<A>, "these operands do not fit the operation: see its declaration in dsl/");
}

}  // namespace hint

// The operands each operator takes.
template <class A, class B>
concept NumericOperands = SameOperands<A, B> && Numeric<operand_t<A, B>>;
template <class A, class B>
concept IntegerOperands = SameOperands<A, B> && Integer<operand_t<A, B>>;
// A vector and its scalar type (or a literal of it), the vector first.
template <class V, class S>
concept VectorScalarOperands = DslValue<V> && (lanes_v<value_t<V>> > 1) && Numeric<value_t<V>> &&
                               OperandOf<S, scalar_t<value_t<V>>> && (!DslValue<S> || lanes_v<value_t<S>> == 1);
template <class A, class B>
concept ArithOperands = NumericOperands<A, B> || VectorScalarOperands<A, B>;
template <class A, class B>
concept OrderedOperands = SameOperands<A, B> && Scalar<operand_t<A, B>> && Numeric<operand_t<A, B>>;
template <class T>
concept Equatable = Scalar<T>;
template <class A, class B>
concept EquatableOperands = SameOperands<A, B> && Equatable<operand_t<A, B>>;
template <class A, class B>
concept ConditionOperands = SameOperands<A, B> && std::same_as<operand_t<A, B>, boolean>;

// The fallback of an operator (see hint::): viable exactly when Valid<A, B> is not.
#define BDSL_OPERATOR_HINT(sym, family, Valid, Result)                   \
  template <class A, class B>                                            \
    requires hint::Operands<A, B> && (!Valid<A, B>)                      \
  Expr<typename Result<A, B>::type> operator sym(const A&, const B&) {   \
    hint::operands<hint::Family::family, A, B>();                        \
    return hint::result<Expr<typename Result<A, B>::type>>();            \
  }

// Arithmetic: same numeric type on both sides.
#define BDSL_ARITH(sym, op, Operands)                                                \
  template <class A, class B>                                                        \
    requires Operands<A, B>                                                          \
  Expr<operand_t<A, B>> operator sym(const A& a, const B& b) {                       \
    return binary<operand_t<A, B>>(Op::op, a, b);                                    \
  }
BDSL_ARITH(+, Add, NumericOperands)
BDSL_ARITH(-, Sub, NumericOperands)
BDSL_ARITH(*, Mul, NumericOperands)
BDSL_ARITH(/, Div, NumericOperands)
BDSL_ARITH(%, Mod, IntegerOperands)
BDSL_ARITH(&, BitAnd, IntegerOperands)
BDSL_ARITH(|, BitOr, IntegerOperands)
BDSL_ARITH(^, BitXor, IntegerOperands)
BDSL_ARITH(<<, Shl, IntegerOperands)
BDSL_ARITH(>>, Shr, IntegerOperands)
#undef BDSL_ARITH

// A vector and its scalar type in + - * / (GLSL applies the scalar to every lane).
#define BDSL_VEC_SCALAR(sym, op)                                                           \
  template <class V, class S>                                                              \
    requires VectorScalarOperands<V, S>                                                    \
  Expr<value_t<V>> operator sym(const V& v, const S& s) {                                  \
    return make_expr<value_t<V>>(Op::op, type_of<value_t<V>>(),                            \
                                 {v.node(), as_node<scalar_t<value_t<V>>>(s)});            \
  }
BDSL_VEC_SCALAR(+, Add)
BDSL_VEC_SCALAR(-, Sub)
BDSL_VEC_SCALAR(*, Mul)
BDSL_VEC_SCALAR(/, Div)
#undef BDSL_VEC_SCALAR

BDSL_OPERATOR_HINT(+, Arith, ArithOperands, hint::result_of)
BDSL_OPERATOR_HINT(-, Arith, ArithOperands, hint::result_of)
BDSL_OPERATOR_HINT(*, Arith, ArithOperands, hint::result_of)
BDSL_OPERATOR_HINT(/, Arith, ArithOperands, hint::result_of)
BDSL_OPERATOR_HINT(%, Mod, IntegerOperands, hint::result_of)
BDSL_OPERATOR_HINT(&, Bits, IntegerOperands, hint::result_of)
BDSL_OPERATOR_HINT(|, Bits, IntegerOperands, hint::result_of)
BDSL_OPERATOR_HINT(^, Bits, IntegerOperands, hint::result_of)
BDSL_OPERATOR_HINT(<<, Bits, IntegerOperands, hint::result_of)
BDSL_OPERATOR_HINT(>>, Bits, IntegerOperands, hint::result_of)

// Comparisons of scalars give Expr<boolean>.
#define BDSL_COMPARE(sym, op)                                                              \
  template <class A, class B>                                                              \
    requires OrderedOperands<A, B>                                                         \
  Expr<boolean> operator sym(const A& a, const B& b) {                                     \
    return binary<boolean>(Op::op, a, b);                                                  \
  }
BDSL_COMPARE(<, Lt)
BDSL_COMPARE(<=, Le)
BDSL_COMPARE(>, Gt)
BDSL_COMPARE(>=, Ge)
#undef BDSL_COMPARE
BDSL_OPERATOR_HINT(<, Order, OrderedOperands, hint::condition_of)
BDSL_OPERATOR_HINT(<=, Order, OrderedOperands, hint::condition_of)
BDSL_OPERATOR_HINT(>, Order, OrderedOperands, hint::condition_of)
BDSL_OPERATOR_HINT(>=, Order, OrderedOperands, hint::condition_of)

template <class A, class B>
  requires EquatableOperands<A, B>
Expr<boolean> operator==(const A& a, const B& b) {
  return binary<boolean>(Op::Eq, a, b);
}
template <class A, class B>
  requires EquatableOperands<A, B>
Expr<boolean> operator!=(const A& a, const B& b) {
  return binary<boolean>(Op::Ne, a, b);
}
BDSL_OPERATOR_HINT(==, Equal, EquatableOperands, hint::condition_of)
BDSL_OPERATOR_HINT(!=, Equal, EquatableOperands, hint::condition_of)

template <class A, class B>
  requires ConditionOperands<A, B>
Expr<boolean> operator&&(const A& a, const B& b) {
  return binary<boolean>(Op::And, a, b);
}
template <class A, class B>
  requires ConditionOperands<A, B>
Expr<boolean> operator||(const A& a, const B& b) {
  return binary<boolean>(Op::Or, a, b);
}
BDSL_OPERATOR_HINT(&&, Logic, ConditionOperands, hint::condition_of)
BDSL_OPERATOR_HINT(||, Logic, ConditionOperands, hint::condition_of)
#undef BDSL_OPERATOR_HINT

template <class A>
  requires DslValue<A> && Signed<value_t<A>>
Expr<value_t<A>> operator-(const A& a) {
  return make_expr<value_t<A>>(Op::Neg, type_of<value_t<A>>(), {a.node()});
}
template <class A>
  requires DslValue<A> && std::same_as<value_t<A>, boolean>
Expr<boolean> operator!(const A& a) {
  return make_expr<boolean>(Op::Not, type_of<boolean>(), {a.node()});
}
template <class A>
  requires DslValue<A> && Integer<value_t<A>>
Expr<value_t<A>> operator~(const A& a) {
  return make_expr<value_t<A>>(Op::BitNot, type_of<value_t<A>>(), {a.node()});
}
// Their fallbacks (see hint::).
template <class A>
  requires DslValue<A> && (!Signed<value_t<A>>)
Expr<value_t<A>> operator-(const A&) {
  if constexpr (Bool<value_t<A>>)
    static_assert(hint::dependent_false<A>, "unary - of a condition: use !c");
  else
    static_assert(hint::dependent_false<A>, "unary - is defined for i32 and floats: convert first, e.g. -cast<i32>(u)");
  return hint::result<Expr<value_t<A>>>();
}
template <class A>
  requires DslValue<A> && (!std::same_as<value_t<A>, boolean>)
Expr<boolean> operator!(const A&) {
  static_assert(hint::dependent_false<A>, "! takes a condition, not a number: compare first, e.g. x == 0u");
  return hint::result<Expr<boolean>>();
}
template <class A>
  requires DslValue<A> && (!Integer<value_t<A>>)
Expr<value_t<A>> operator~(const A&) {
  if constexpr (Bool<value_t<A>>)
    static_assert(hint::dependent_false<A>, "~ of a condition: use !c");
  else
    static_assert(hint::dependent_false<A>, "~ is defined for integers only: for a float's bits use bitcast<u32>(x)");
  return hint::result<Expr<value_t<A>>>();
}

// Explicit value conversion: cast<f32>(an_u32), cast<uvec4>(an_ivec4), ...
template <class To, class X>
  requires DslValue<X> && (lanes_v<To> == lanes_v<value_t<X>>)
Expr<To> cast(const X& x) {
  if constexpr (std::same_as<To, value_t<X>>)
    return Expr<To>(x.node());
  else
    return make_expr<To>(Op::Convert, type_of<To>(), {x.node()});
}
template <class To, class X>
  requires DslValue<X> && (lanes_v<To> != lanes_v<value_t<X>>)
Expr<To> cast(const X&) {
  if constexpr (lanes_v<To> == 1)
    static_assert(hint::dependent_false<X>,
                  "cast<> keeps the lane count: take a lane first, e.g. cast<u32>(v.x()), or cast to as wide a vector, e.g. cast<uvec2>(v)");
  else
    static_assert(hint::dependent_false<X>,
                  "cast<> keeps the lane count: cast to a vector as wide as the value, or build one with make_vec<>() first");
  return hint::result<Expr<To>>();
}

// Constants of any DSL type, for when a literal alone cannot say the type: constant<u32>(3).
template <class T>
Expr<T> constant(host_t<T> v) {
  return Expr<T>(literal_node<T>(v));
}

// cond ? a : b. Both sides may be evaluated: never use it to guard an out-of-range read.
template <class C, class A, class B>
  requires OperandOf<C, boolean> && SameOperands<A, B>
Expr<operand_t<A, B>> select(const C& cond, const A& a, const B& b) {
  using T = operand_t<A, B>;
  return make_expr<T>(Op::Select, type_of<T>(), {as_node<boolean>(cond), as_node<T>(a), as_node<T>(b)});
}


template <class C, class L>
  requires OperandOf<C, boolean> && requires { typename dsl_type_of_literal<L>::type; }
Expr<typename dsl_type_of_literal<L>::type> select(const C& cond, L a, L b) {
  using T = typename dsl_type_of_literal<L>::type;
  return select(cond, constant<T>(a), b);
}

// The fallback of both (see hint::): a condition that is not one, or a and b of two types.
template <class C, class A, class B>
concept SelectOperands = OperandOf<C, boolean> &&
                         (SameOperands<A, B> || (std::same_as<std::decay_t<A>, std::decay_t<B>> &&
                                                 requires { typename dsl_type_of_literal<std::decay_t<A>>::type; }));
template <class C, class A, class B>
  requires hint::Operand<C> && hint::Operand<A> && hint::Operand<B> && (DslValue<C> || DslValue<A> || DslValue<B>) &&
           (!SelectOperands<C, A, B>)
Expr<typename hint::result_of<A, B>::type> select(const C&, const A&, const B&) {
  if constexpr (!OperandOf<C, boolean>)
    static_assert(hint::dependent_false<C>,
                  "select's first operand must be a condition, not a number: compare first, e.g. select(x != 0u, a, b)");
  else
    hint::operands<hint::Family::Select, A, B>();
  return hint::result<Expr<typename hint::result_of<A, B>::type>>();
}

// Vectors from scalars: make_vec<f32>(a, b, c, d) -> Expr<vec4>.
template <class S, class... Xs>
  requires(sizeof...(Xs) >= 2 && sizeof...(Xs) <= 4 && (OperandOf<Xs, S> && ...))
Expr<vec<S, sizeof...(Xs)>> make_vec(const Xs&... xs) {
  using V = vec<S, sizeof...(Xs)>;
  return make_expr<V>(Op::Construct, type_of<V>(), {as_node<S>(xs)...});
}
// Its fallback (see hint::): a lane that is not an S.
template <class S, class... Xs>
  requires(sizeof...(Xs) >= 2 && sizeof...(Xs) <= 4 && (hint::Operand<Xs> && ...) && !(OperandOf<Xs, S> && ...))
Expr<vec<S, sizeof...(Xs)>> make_vec(const Xs&...) {
  if constexpr (((!DslValue<Xs> && !OperandOf<Xs, S>) || ...))
    static_assert(hint::dependent_false<S>,
                  "make_vec<S>: a literal lane must have the exact type S: 1u for u32, 1 for i32, 1.0f for f32");
  else
    static_assert(hint::dependent_false<S>, "make_vec<S>: every lane must be an S: convert it, e.g. make_vec<f32>(cast<f32>(i), y)");
  return hint::result<Expr<vec<S, sizeof...(Xs)>>>();
}

// Names a value and evaluates it here, once: the printed GLSL gets `const T name = ...;`.
template <class X>
  requires DslValue<X>
Expr<value_t<X>> let(std::string name, const X& x) {
  return Expr<value_t<X>>(BuilderCore::current().make_let(x.node(), std::move(name)));
}

// Like let(), and the value is computed exactly as written: GLSL `precise` (SPIR-V NoContraction),
// so no a * b + c becomes an fma and nothing is reassociated. For exact-arithmetic tricks
// (two-float products, compensated sums), where contraction would silently change the result.
template <class X>
  requires DslValue<X>
Expr<value_t<X>> let_precise(std::string name, const X& x) {
  return Expr<value_t<X>>(BuilderCore::current().make_let(x.node(), std::move(name), true));
}

}  // namespace bdsl::dsl
