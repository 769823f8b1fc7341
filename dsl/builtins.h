// Builtin functions, typed as GLSL defines them. Each one is a single IR Call node.
#pragma once
#include "dsl/memory.h"

namespace bdsl::dsl {

template <class R, class... Args>
Expr<R> call(Fn fn, const Args&... args) {
  return Expr<R>(BuilderCore::current().make_call(fn, type_of<R>(), {args...}));
}

namespace hint {
// The hint for a math function of a value it is not defined for (see hint:: in dsl/expr.h).
template <Fn fn, class X>
void math() {
  if constexpr (Bool<value_t<X>>)
    static_assert(dependent_false<X>, "math functions take numbers, not conditions: use select(c, 1.0f, 0.0f) to turn a condition into a number");
  else if constexpr (fn == Fn::Abs)
    static_assert(dependent_false<X>, "abs is defined for i32 and floats: a u32 is its own abs, or convert first, e.g. abs(cast<i32>(u))");
  else if constexpr (fn == Fn::Sign)
    static_assert(dependent_false<X>, "sign is defined for i32 and floats: convert first, e.g. sign(cast<i32>(u))");
  else if constexpr (fn == Fn::Exp)
    static_assert(dependent_false<X>, "exp is defined for floats only: convert first, e.g. exp(cast<f32>(i))");
  else if constexpr (fn == Fn::Exp2)
    static_assert(dependent_false<X>, "exp2 is defined for floats only: convert first, e.g. exp2(cast<f32>(i))");
  else if constexpr (fn == Fn::Log)
    static_assert(dependent_false<X>, "log is defined for floats only: convert first, e.g. log(cast<f32>(i))");
  else if constexpr (fn == Fn::Sqrt)
    static_assert(dependent_false<X>, "sqrt is defined for floats only: convert first, e.g. sqrt(cast<f32>(i))");
  else if constexpr (fn == Fn::InverseSqrt)
    static_assert(dependent_false<X>, "inversesqrt is defined for floats only: convert first, e.g. inversesqrt(cast<f32>(i))");
  else if constexpr (fn == Fn::Sin)
    static_assert(dependent_false<X>, "sin is defined for floats only: convert first, e.g. sin(cast<f32>(i))");
  else if constexpr (fn == Fn::Cos)
    static_assert(dependent_false<X>, "cos is defined for floats only: convert first, e.g. cos(cast<f32>(i))");
  else if constexpr (fn == Fn::Tanh)
    static_assert(dependent_false<X>, "tanh is defined for floats only: convert first, e.g. tanh(cast<f32>(i))");
  else  // floor, round, ceil
    static_assert(dependent_false<X>, "floor, round and ceil are defined for floats only: an integer is already whole");
}
}  // namespace hint

// Each with its fallback (see hint::): a value the function is not defined for.
#define BDSL_UNARY_FN(name, fn, Constraint)                          \
  template <class X>                                                 \
    requires DslValue<X> && Constraint<value_t<X>>                   \
  Expr<value_t<X>> name(const X& x) {                                \
    return call<value_t<X>>(Fn::fn, x.node());                       \
  }                                                                  \
  template <class X>                                                 \
    requires DslValue<X> && (!Constraint<value_t<X>>)                \
  Expr<value_t<X>> name(const X&) {                                  \
    hint::math<Fn::fn, X>();                                         \
    return hint::result<Expr<value_t<X>>>();                         \
  }
BDSL_UNARY_FN(abs, Abs, Signed)
BDSL_UNARY_FN(exp, Exp, Float)
BDSL_UNARY_FN(exp2, Exp2, Float)
BDSL_UNARY_FN(log, Log, Float)
BDSL_UNARY_FN(sqrt, Sqrt, Float)
BDSL_UNARY_FN(inversesqrt, InverseSqrt, Float)
BDSL_UNARY_FN(sin, Sin, Float)
BDSL_UNARY_FN(cos, Cos, Float)
BDSL_UNARY_FN(floor, Floor, Float)
BDSL_UNARY_FN(round, RoundEven, Float)  // ties to even, as the int8 quantizer needs
BDSL_UNARY_FN(ceil, Ceil, Float)
BDSL_UNARY_FN(sign, Sign, Signed)  // -1, 0 or 1 (of the value's type)
BDSL_UNARY_FN(tanh, Tanh, Float)
#undef BDSL_UNARY_FN

// Each with its fallback (see hint::): operands of two types, or of a type the function rejects.
#define BDSL_BINARY_FN(name, fn, Constraint, family)                                        \
  template <class A, class B>                                                               \
    requires SameOperands<A, B> && Constraint<operand_t<A, B>>                              \
  Expr<operand_t<A, B>> name(const A& a, const B& b) {                                      \
    using T = operand_t<A, B>;                                                              \
    return call<T>(Fn::fn, as_node<T>(a), as_node<T>(b));                                   \
  }                                                                                         \
  template <class A, class B>                                                               \
    requires hint::Operands<A, B> && (!(SameOperands<A, B> && Constraint<operand_t<A, B>>)) \
  Expr<typename hint::result_of<A, B>::type> name(const A&, const B&) {                     \
    hint::operands<hint::Family::family, A, B>();                                           \
    return hint::result<Expr<typename hint::result_of<A, B>::type>>();                      \
  }
BDSL_BINARY_FN(min, Min, Numeric, Function)
BDSL_BINARY_FN(max, Max, Numeric, Function)
BDSL_BINARY_FN(pow, Pow, Float, FloatFunction)
#undef BDSL_BINARY_FN

template <class X, class Lo, class Hi>
  requires DslValue<X> && Numeric<value_t<X>> && OperandOf<Lo, value_t<X>> && OperandOf<Hi, value_t<X>>
Expr<value_t<X>> clamp(const X& x, const Lo& lo, const Hi& hi) {
  using T = value_t<X>;
  return call<T>(Fn::Clamp, x.node(), as_node<T>(lo), as_node<T>(hi));
}
template <class X, class Lo, class Hi>
  requires DslValue<X> && hint::Operand<Lo> && hint::Operand<Hi> &&
           (!(Numeric<value_t<X>> && OperandOf<Lo, value_t<X>> && OperandOf<Hi, value_t<X>>))
Expr<value_t<X>> clamp(const X&, const Lo&, const Hi&) {
  if constexpr (!Numeric<value_t<X>>)
    hint::operands<hint::Family::Function, X, X>();
  else if constexpr (!OperandOf<Lo, value_t<X>>)
    hint::operands<hint::Family::Function, X, Lo>();
  else
    hint::operands<hint::Family::Function, X, Hi>();
  return hint::result<Expr<value_t<X>>>();
}

// erf(x), which GLSL lacks, from exp (every device runs it): Abramowitz & Stegun 7.1.26, within
// 1.5e-7 of erf plus a few f32 roundings. Each use is a few nodes, not one call.
template <class X>
  requires OperandOf<X, f32>
Expr<f32> erf(const X& x) {
  const Expr<f32> v(as_node<f32>(x));
  const Expr<f32> a = abs(v);
  const Expr<f32> t = 1.0f / (1.0f + 0.3275911f * a);
  const Expr<f32> poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
  const Expr<f32> y = 1.0f - poly * exp(-(a * a));
  return select(v < 0.0f, -y, y);
}
template <class X>
  requires DslValue<X> && (!OperandOf<X, f32>)
Expr<f32> erf(const X&) {
  if constexpr (lanes_v<value_t<X>> > 1)
    static_assert(hint::dependent_false<X>, "erf is defined for an f32 scalar: take the lanes one by one, e.g. erf(v.x())");
  else
    static_assert(hint::dependent_false<X>, "erf is defined for f32 only: convert first, e.g. erf(cast<f32>(i))");
  return hint::result<Expr<f32>>();
}

// a (1 - t) + b t, as GLSL's mix: t a scalar or of the operands' type.
template <class A, class B, class T>
concept MixOperands = SameOperands<A, B> && Float<operand_t<A, B>> &&
                      (OperandOf<T, operand_t<A, B>> || OperandOf<T, scalar_t<operand_t<A, B>>>);
template <class A, class B, class T>
  requires MixOperands<A, B, T>
Expr<operand_t<A, B>> mix(const A& a, const B& b, const T& t) {
  using V = operand_t<A, B>;
  if constexpr (OperandOf<T, V>)
    return call<V>(Fn::Mix, as_node<V>(a), as_node<V>(b), as_node<V>(t));
  else
    return call<V>(Fn::Mix, as_node<V>(a), as_node<V>(b), as_node<scalar_t<V>>(t));
}
template <class A, class B, class T>
  requires hint::Operands<A, B> && hint::Operand<T> && (!MixOperands<A, B, T>)
Expr<typename hint::result_of<A, B>::type> mix(const A&, const B&, const T&) {
  if constexpr (SameOperands<A, B> && !Float<operand_t<A, B>>)
    static_assert(hint::dependent_false<A>, "mix blends floats only: use select(c, a, b) for integers, or cast to f32");
  else if constexpr (SameOperands<A, B>)
    static_assert(hint::dependent_false<A>, "mix's t must have the type of a and b or their scalar type, e.g. mix(a, b, 0.5f)");
  else
    hint::operands<hint::Family::Function, A, B>();
  return hint::result<Expr<typename hint::result_of<A, B>::type>>();
}

template <class A, class B, class C>
  requires DslValue<A> && Float<value_t<A>> && OperandOf<B, value_t<A>> && OperandOf<C, value_t<A>>
Expr<value_t<A>> fma(const A& a, const B& b, const C& c) {
  using T = value_t<A>;
  return call<T>(Fn::Fma, a.node(), as_node<T>(b), as_node<T>(c));
}

template <class A, class B>
  requires SameOperands<A, B> && Float<operand_t<A, B>> && (lanes_v<operand_t<A, B>> > 1)
Expr<scalar_t<operand_t<A, B>>> dot(const A& a, const B& b) {
  using T = operand_t<A, B>;
  return call<scalar_t<T>>(Fn::Dot, as_node<T>(a), as_node<T>(b));
}

// Bits.
template <class X, class O, class B>
  requires DslValue<X> && Integer32<value_t<X>> && OperandOf<O, i32> && OperandOf<B, i32>
Expr<value_t<X>> bitfield_extract(const X& x, const O& offset, const B& bits) {
  return call<value_t<X>>(Fn::BitfieldExtract, x.node(), as_node<i32>(offset), as_node<i32>(bits));
}

// Same bits, another type: bitcast<u32>(a_float), bitcast<f32>(an_u32), bitcast<i32>(an_u32).
template <class To, class X>
  requires DslValue<X> && (lanes_v<To> == lanes_v<value_t<X>>)
Expr<To> bitcast(const X& x) {
  using From = scalar_t<value_t<X>>;
  using ToS = scalar_t<To>;
  if constexpr (std::same_as<From, ToS>)
    return Expr<To>(x.node());
  else if constexpr (std::same_as<From, f32> && std::same_as<ToS, u32>)
    return call<To>(Fn::FloatBitsToUint, x.node());
  else if constexpr (std::same_as<From, f32> && std::same_as<ToS, i32>)
    return call<To>(Fn::FloatBitsToInt, x.node());
  else if constexpr (std::same_as<From, u32> && std::same_as<ToS, f32>)
    return call<To>(Fn::UintBitsToFloat, x.node());
  else if constexpr (std::same_as<From, i32> && std::same_as<ToS, f32>)
    return call<To>(Fn::IntBitsToFloat, x.node());
  else {
    static_assert((Integer32<From> && Integer32<ToS>) || (Integer64<From> && Integer64<ToS>),
                  "bitcast between these types is not defined");
    return cast<To>(x);  // int <-> uint conversion keeps the bits in GLSL
  }
}
template <class To, class X>
  requires DslValue<X> && (lanes_v<To> != lanes_v<value_t<X>>)
Expr<To> bitcast(const X&) {
  static_assert(hint::dependent_false<X>, "bitcast<> keeps the lane count: take a lane first, e.g. bitcast<u32>(v.x()), or bitcast to as wide a vector");
  return hint::result<Expr<To>>();
}

// Two f32 <-> one u32 holding two IEEE halves (low lane in the low bits).
template <class X>
  requires OperandOf<X, vec2>
Expr<u32> pack_half2x16(const X& v) {
  return call<u32>(Fn::PackHalf2x16, as_node<vec2>(v));
}
template <class X>
  requires OperandOf<X, u32>
Expr<vec2> unpack_half2x16(const X& v) {
  return call<vec2>(Fn::UnpackHalf2x16, as_node<u32>(v));
}

// Four signed bytes in one u32 (byte 0 = lane x). Written with shifts so every device runs it.
template <class X>
  requires OperandOf<X, u32>
Expr<ivec4> unpack_i8x4(const X& packed) {
  const Expr<i32> w = bitcast<i32>(Expr<u32>(as_node<u32>(packed)));
  return make_vec<i32>(bitfield_extract(w, 0, 8), bitfield_extract(w, 8, 8), bitfield_extract(w, 16, 8),
                       bitfield_extract(w, 24, 8));
}
template <class X>
  requires OperandOf<X, ivec4>
Expr<u32> pack_i8x4(const X& v) {
  const Expr<uvec4> u = cast<uvec4>(Expr<ivec4>(as_node<ivec4>(v)));
  const auto byte = [&](uint32_t lane) { return u.lane(lane) & 0xffu; };
  return byte(0) | (byte(1) << 8u) | (byte(2) << 16u) | (byte(3) << 24u);
}
template <class X>
  requires OperandOf<X, u32>
Expr<uvec4> unpack_u8x4(const X& packed) {
  const Expr<u32> w(as_node<u32>(packed));
  return make_vec<u32>(bitfield_extract(w, 0, 8), bitfield_extract(w, 8, 8), bitfield_extract(w, 16, 8),
                       bitfield_extract(w, 24, 8));
}

// Dot product of two words of four signed bytes each (SPIR-V OpSDotKHR, packed 4x8 format).
// Needs the device's integer dot product feature; ops pick a plain variant where it is missing.
template <class A, class B>
  requires OperandOf<A, u32> && OperandOf<B, u32>
Expr<i32> sdot4x8(const A& a, const B& b) {
  return call<i32>(Fn::SDot4x8, as_node<u32>(a), as_node<u32>(b));
}

// Subgroup operations, each with its fallback (see hint::): a value that is not a number.
#define BDSL_SUBGROUP_REDUCE(name, fn)                        \
  template <class X>                                          \
    requires DslValue<X> && Numeric32<value_t<X>>             \
  Expr<value_t<X>> name(const X& x) {                         \
    return call<value_t<X>>(Fn::fn, x.node());                \
  }                                                           \
  template <class X>                                          \
    requires DslValue<X> && (!Numeric<value_t<X>>)            \
  Expr<value_t<X>> name(const X&) {                           \
    hint::operands<hint::Family::Function, X, X>();           \
    return hint::result<Expr<value_t<X>>>();                  \
  }
BDSL_SUBGROUP_REDUCE(subgroup_add, SubgroupAdd)
BDSL_SUBGROUP_REDUCE(subgroup_min, SubgroupMin)
BDSL_SUBGROUP_REDUCE(subgroup_max, SubgroupMax)
// Scans over the subgroup's active invocations in lane order: lane i gets the op of lanes 0..i
// (inclusive) or 0..i-1 (exclusive: 0 in lane 0).
BDSL_SUBGROUP_REDUCE(subgroup_inclusive_add, SubgroupInclusiveAdd)
BDSL_SUBGROUP_REDUCE(subgroup_inclusive_min, SubgroupInclusiveMin)
BDSL_SUBGROUP_REDUCE(subgroup_inclusive_max, SubgroupInclusiveMax)
BDSL_SUBGROUP_REDUCE(subgroup_exclusive_add, SubgroupExclusiveAdd)
#undef BDSL_SUBGROUP_REDUCE

// Bit i of the result (bit i % 32 of word i / 32) is set where lane i is active and `pred` holds.
template <class P>
  requires OperandOf<P, boolean>
Expr<uvec4> subgroup_ballot(const P& pred) {
  return call<uvec4>(Fn::SubgroupBallot, as_node<boolean>(pred));
}
template <class P>
  requires hint::Operand<P> && (!OperandOf<P, boolean>)
Expr<uvec4> subgroup_ballot(const P&) {
  static_assert(hint::dependent_false<P>, "subgroup_ballot takes a condition, not a number: pass a condition, e.g. subgroup_ballot(x != 0u)");
  return hint::result<Expr<uvec4>>();
}
// The number of lanes set in a ballot (bits past the subgroup size are ignored).
template <class B>
  requires OperandOf<B, uvec4>
Expr<u32> subgroup_ballot_bit_count(const B& ballot) {
  return call<u32>(Fn::SubgroupBallotBitCount, as_node<uvec4>(ballot));
}
// The value of lane (this lane - delta) / (this lane + delta); undefined where that lane is
// outside the subgroup or inactive.
template <class X, class D>
  requires DslValue<X> && (!Integer64<value_t<X>>) && OperandOf<D, u32>
Expr<value_t<X>> subgroup_shuffle_up(const X& x, const D& delta) {
  return call<value_t<X>>(Fn::SubgroupShuffleUp, x.node(), as_node<u32>(delta));
}
template <class X, class D>
  requires DslValue<X> && (!Integer64<value_t<X>>) && OperandOf<D, u32>
Expr<value_t<X>> subgroup_shuffle_down(const X& x, const D& delta) {
  return call<value_t<X>>(Fn::SubgroupShuffleDown, x.node(), as_node<u32>(delta));
}

template <class X, class I>
  requires DslValue<X> && (!Integer64<value_t<X>>) && OperandOf<I, u32>
Expr<value_t<X>> subgroup_shuffle(const X& x, const I& lane) {
  return call<value_t<X>>(Fn::SubgroupShuffle, x.node(), as_node<u32>(lane));
}
template <class X, class I>
  requires DslValue<X> && (!Integer64<value_t<X>>) && OperandOf<I, u32>
Expr<value_t<X>> subgroup_shuffle_xor(const X& x, const I& mask) {
  return call<value_t<X>>(Fn::SubgroupShuffleXor, x.node(), as_node<u32>(mask));
}
// The lane must be a constant (GLSL requires it); subgroup_shuffle takes a dynamic one.
template <class X>
  requires DslValue<X> && (!Integer64<value_t<X>>)
Expr<value_t<X>> subgroup_broadcast(const X& x, uint32_t lane) {
  return call<value_t<X>>(Fn::SubgroupBroadcast, x.node(), literal_node<u32>(lane));
}
template <class X>
  requires DslValue<X> && (!Integer64<value_t<X>>)
Expr<value_t<X>> subgroup_broadcast_first(const X& x) {
  return call<value_t<X>>(Fn::SubgroupBroadcastFirst, x.node());
}
inline Expr<boolean> subgroup_elect() { return call<boolean>(Fn::SubgroupElect); }

// Atomics on a u32/i32 buffer element or shared element (atomic_add also on f32, where the device
// has shaderBufferFloat32AtomicAdd / shaderSharedFloat32AtomicAdd); each returns the previous value
// and runs exactly once, where it is written.
template <class Ref>
concept ElementTarget = requires(const Ref& r) {
  r.array();
  r.index();
};  // a buffer or shared element, not a value
template <class Ref>
concept AtomicTarget = ElementTarget<Ref> && (std::same_as<value_t<Ref>, u32> || std::same_as<value_t<Ref>, i32>);

template <class Ref, class X>
  requires AtomicTarget<Ref> && OperandOf<X, value_t<Ref>>
Expr<value_t<Ref>> atomic(Fn fn, const Ref& target, const X& value) {
  using T = value_t<Ref>;
  return call<T>(fn, target.node(), as_node<T>(value));
}
#define BDSL_ATOMIC(name, fn)                                            \
  template <class Ref, class X>                                          \
    requires AtomicTarget<Ref> && OperandOf<X, value_t<Ref>>             \
  Expr<value_t<Ref>> name(const Ref& target, const X& value) {           \
    return atomic(Fn::fn, target, value);                                \
  }
BDSL_ATOMIC(atomic_add, AtomicAdd)
template <class Ref, class X>
  requires ElementTarget<Ref> && std::same_as<value_t<Ref>, f32> && OperandOf<X, f32>
Expr<f32> atomic_add(const Ref& target, const X& value) {
  return call<f32>(Fn::AtomicAdd, target.node(), as_node<f32>(value));
}
BDSL_ATOMIC(atomic_min, AtomicMin)
BDSL_ATOMIC(atomic_max, AtomicMax)
BDSL_ATOMIC(atomic_and, AtomicAnd)
BDSL_ATOMIC(atomic_or, AtomicOr)
BDSL_ATOMIC(atomic_xor, AtomicXor)
BDSL_ATOMIC(atomic_exchange, AtomicExchange)
#undef BDSL_ATOMIC
template <class Ref, class C, class X>
  requires AtomicTarget<Ref> && OperandOf<C, value_t<Ref>> && OperandOf<X, value_t<Ref>>
Expr<value_t<Ref>> atomic_comp_swap(const Ref& target, const C& compare, const X& value) {
  using T = value_t<Ref>;
  return call<T>(Fn::AtomicCompSwap, target.node(), as_node<T>(compare), as_node<T>(value));
}

// The element's value as an atomic read at device scope, relaxed (Vulkan memory model: the kernel
// needs vulkanMemoryModel): a counter other workgroups add to, polled before a device_barrier().
template <class Ref>
  requires AtomicTarget<Ref>
Expr<value_t<Ref>> atomic_load(const Ref& target) {
  return call<value_t<Ref>>(Fn::AtomicLoad, target.node());
}

// Fallbacks (see hint::) of the atomics other than atomic_add, which is also defined for f32
// elements: a target that is not an u32/i32 element, or a value of another type.
namespace hint {
template <class Ref, class X>
void atomic() {
  if constexpr (!ElementTarget<Ref>)
    static_assert(dependent_false<Ref>, "atomics act on a buffer or shared element, not a value: e.g. atomic_max(y[i], v)");
  else if constexpr (!AtomicTarget<Ref>)
    static_assert(dependent_false<Ref>, "atomics other than atomic_add work on u32/i32 elements only");
  else if constexpr (!DslValue<X>)
    static_assert(dependent_false<Ref>, "an atomic's literal must have the element's exact type: 1u for u32, 1 for i32");
  else
    static_assert(dependent_false<Ref>, "an atomic's value must have the element's type: convert it, e.g. cast<u32>(v)");
}
}  // namespace hint
#define BDSL_ATOMIC_HINT(name)                                                                         \
  template <class Ref, class X>                                                                        \
    requires DslValue<Ref> && hint::Operand<X> && (!(AtomicTarget<Ref> && OperandOf<X, value_t<Ref>>)) \
  Expr<value_t<Ref>> name(const Ref&, const X&) {                                                      \
    hint::atomic<Ref, X>();                                                                            \
    return hint::result<Expr<value_t<Ref>>>();                                                         \
  }
BDSL_ATOMIC_HINT(atomic_min)
BDSL_ATOMIC_HINT(atomic_max)
BDSL_ATOMIC_HINT(atomic_and)
BDSL_ATOMIC_HINT(atomic_or)
BDSL_ATOMIC_HINT(atomic_xor)
BDSL_ATOMIC_HINT(atomic_exchange)
#undef BDSL_ATOMIC_HINT
template <class Ref, class C, class X>
  requires DslValue<Ref> && hint::Operand<C> && hint::Operand<X> &&
           (!(AtomicTarget<Ref> && OperandOf<C, value_t<Ref>> && OperandOf<X, value_t<Ref>>))
Expr<value_t<Ref>> atomic_comp_swap(const Ref&, const C&, const X&) {
  if constexpr (AtomicTarget<Ref> && OperandOf<C, value_t<Ref>>)
    hint::atomic<Ref, X>();
  else
    hint::atomic<Ref, C>();
  return hint::result<Expr<value_t<Ref>>>();
}

}  // namespace bdsl::dsl
