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

// Arithmetic: same numeric type on both sides.
#define BDSL_ARITH(sym, op, Constraint)                                              \
  template <class A, class B>                                                        \
    requires SameOperands<A, B> && Constraint<operand_t<A, B>>                      \
  Expr<operand_t<A, B>> operator sym(const A& a, const B& b) {                       \
    return binary<operand_t<A, B>>(Op::op, a, b);                                    \
  }
BDSL_ARITH(+, Add, Numeric)
BDSL_ARITH(-, Sub, Numeric)
BDSL_ARITH(*, Mul, Numeric)
BDSL_ARITH(/, Div, Numeric)
BDSL_ARITH(%, Mod, Integer)
BDSL_ARITH(&, BitAnd, Integer)
BDSL_ARITH(|, BitOr, Integer)
BDSL_ARITH(^, BitXor, Integer)
BDSL_ARITH(<<, Shl, Integer)
BDSL_ARITH(>>, Shr, Integer)
#undef BDSL_ARITH

// A vector and its scalar type in + - * / (GLSL applies the scalar to every lane).
#define BDSL_VEC_SCALAR(sym, op)                                                           \
  template <class V, class S>                                                              \
    requires DslValue<V> && (lanes_v<value_t<V>> > 1) && Numeric<value_t<V>> &&           \
             OperandOf<S, scalar_t<value_t<V>>> && (!DslValue<S> || lanes_v<value_t<S>> == 1) \
  Expr<value_t<V>> operator sym(const V& v, const S& s) {                                  \
    return make_expr<value_t<V>>(Op::op, type_of<value_t<V>>(),                            \
                                 {v.node(), as_node<scalar_t<value_t<V>>>(s)});            \
  }
BDSL_VEC_SCALAR(+, Add)
BDSL_VEC_SCALAR(-, Sub)
BDSL_VEC_SCALAR(*, Mul)
BDSL_VEC_SCALAR(/, Div)
#undef BDSL_VEC_SCALAR

// Comparisons of scalars give Expr<boolean>.
#define BDSL_COMPARE(sym, op, Constraint)                                                  \
  template <class A, class B>                                                              \
    requires SameOperands<A, B> && Scalar<operand_t<A, B>> && Constraint<operand_t<A, B>> \
  Expr<boolean> operator sym(const A& a, const B& b) {                                     \
    return binary<boolean>(Op::op, a, b);                                                  \
  }
BDSL_COMPARE(<, Lt, Numeric)
BDSL_COMPARE(<=, Le, Numeric)
BDSL_COMPARE(>, Gt, Numeric)
BDSL_COMPARE(>=, Ge, Numeric)
#undef BDSL_COMPARE

template <class T>
concept Equatable = Scalar<T>;
template <class A, class B>
  requires SameOperands<A, B> && Equatable<operand_t<A, B>>
Expr<boolean> operator==(const A& a, const B& b) {
  return binary<boolean>(Op::Eq, a, b);
}
template <class A, class B>
  requires SameOperands<A, B> && Equatable<operand_t<A, B>>
Expr<boolean> operator!=(const A& a, const B& b) {
  return binary<boolean>(Op::Ne, a, b);
}

template <class A, class B>
  requires SameOperands<A, B> && std::same_as<operand_t<A, B>, boolean>
Expr<boolean> operator&&(const A& a, const B& b) {
  return binary<boolean>(Op::And, a, b);
}
template <class A, class B>
  requires SameOperands<A, B> && std::same_as<operand_t<A, B>, boolean>
Expr<boolean> operator||(const A& a, const B& b) {
  return binary<boolean>(Op::Or, a, b);
}

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

// Explicit value conversion: cast<f32>(an_u32), cast<uvec4>(an_ivec4), ...
template <class To, class X>
  requires DslValue<X> && (lanes_v<To> == lanes_v<value_t<X>>)
Expr<To> cast(const X& x) {
  if constexpr (std::same_as<To, value_t<X>>)
    return Expr<To>(x.node());
  else
    return make_expr<To>(Op::Convert, type_of<To>(), {x.node()});
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

// The DSL type of a C++ literal: float -> f32, int32_t -> i32, uint32_t -> u32.
template <class L>
struct dsl_type_of_literal {};
template <>
struct dsl_type_of_literal<float> {
  using type = f32;
};
template <>
struct dsl_type_of_literal<int32_t> {
  using type = i32;
};
template <>
struct dsl_type_of_literal<uint32_t> {
  using type = u32;
};

template <class C, class L>
  requires OperandOf<C, boolean> && requires { typename dsl_type_of_literal<L>::type; }
Expr<typename dsl_type_of_literal<L>::type> select(const C& cond, L a, L b) {
  using T = typename dsl_type_of_literal<L>::type;
  return select(cond, constant<T>(a), b);
}

// Vectors from scalars: make_vec<f32>(a, b, c, d) -> Expr<vec4>.
template <class S, class... Xs>
  requires(sizeof...(Xs) >= 2 && sizeof...(Xs) <= 4 && (OperandOf<Xs, S> && ...))
Expr<vec<S, sizeof...(Xs)>> make_vec(const Xs&... xs) {
  using V = vec<S, sizeof...(Xs)>;
  return make_expr<V>(Op::Construct, type_of<V>(), {as_node<S>(xs)...});
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
