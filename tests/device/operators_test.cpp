// Every operator and builtin of the DSL, run on the device and compared with the same computation
// on the CPU, for every type it supports. Integer results and correctly rounded float operations
// must match exactly; other float builtins within the error bounds Vulkan allows them (stated per
// case, in units of relative error).
#include <bit>
#include <cmath>
#include <cstring>

#include "device_test.h"

namespace bdsl::test {
namespace {
using namespace dsl;

constexpr size_t kCount = 517;  // not a multiple of the workgroup size: the tail is guarded

uint64_t mix(uint64_t x) {  // splitmix64: the same inputs on every machine
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<float> floats(uint64_t seed, float lo, float hi) {
  std::vector<float> v(kCount);
  for (size_t i = 0; i < kCount; ++i) v[i] = lo + (hi - lo) * float(mix(seed * 7919 + i) >> 40) / float(1 << 24);
  return v;
}
std::vector<int32_t> ints(uint64_t seed, int32_t lo, int32_t hi) {
  std::vector<int32_t> v(kCount);
  for (size_t i = 0; i < kCount; ++i)
    v[i] = int32_t(int64_t(lo) + int64_t(mix(seed * 7919 + i) % uint64_t(int64_t(hi) - lo + 1)));  // in [lo, hi]: no overflow
  return v;
}
std::vector<uint32_t> uints(uint64_t seed, uint32_t lo = 0, uint32_t hi = UINT32_MAX) {
  std::vector<uint32_t> v(kCount);
  for (size_t i = 0; i < kCount; ++i) v[i] = lo + uint32_t(mix(seed * 7919 + i) % (uint64_t(hi) - lo + 1));
  return v;
}

template <class T>
void expect_equal(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << what << " at " << i;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rel, float abs_tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], abs_tol + rel * std::fabs(want[i])) << what << " at " << i;
}

template <class T, class F>
auto map(const std::vector<T>& a, F f) {
  std::vector<decltype(f(a[0]))> out;
  for (const T& x : a) out.push_back(f(x));
  return out;
}
template <class A, class B, class F>
auto map2(const std::vector<A>& a, const std::vector<B>& b, F f) {
  std::vector<decltype(f(a[0], b[0]))> out;
  for (size_t i = 0; i < a.size(); ++i) out.push_back(f(a[i], b[i]));
  return out;
}

class Operators : public DeviceTest {};

// ---- arithmetic, per type -------------------------------------------------------------------

TEST_F(Operators, FloatArithmeticIsCorrectlyRounded) {
  const auto a = floats(1, -100, 100), b = floats(2, 0.5f, 50);
  using F = std::function<Expr<f32>(Expr<f32>, Expr<f32>)>;
  expect_equal(run_map<f32, f32, f32>("f_add", F([](auto x, auto y) { return x + y; }), a, b),
               map2(a, b, [](float x, float y) { return x + y; }), "+");
  expect_equal(run_map<f32, f32, f32>("f_sub", F([](auto x, auto y) { return x - y; }), a, b),
               map2(a, b, [](float x, float y) { return x - y; }), "-");
  expect_equal(run_map<f32, f32, f32>("f_mul", F([](auto x, auto y) { return x * y; }), a, b),
               map2(a, b, [](float x, float y) { return x * y; }), "*");
  // Vulkan allows 2.5 ulp for division.
  expect_close(run_map<f32, f32, f32>("f_div", F([](auto x, auto y) { return x / y; }), a, b),
               map2(a, b, [](float x, float y) { return x / y; }), 3e-7f, 0, "/");
  expect_equal(run_map<f32, f32, f32>("f_neg", F([](auto x, auto) { return -x; }), a, b),
               map(a, [](float x) { return -x; }), "neg");
}

TEST_F(Operators, SignedIntegerArithmeticWraps) {
  const auto a = ints(3, INT32_MIN, INT32_MAX), b = ints(4, 1, 1000);
  using F = std::function<Expr<i32>(Expr<i32>, Expr<i32>)>;
  auto wrap = [](int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); };
  expect_equal(run_map<i32, i32, i32>("i_add", F([](auto x, auto y) { return x + y; }), a, b),
               map2(a, b, [&](int32_t x, int32_t y) { return wrap(int64_t(x) + y); }), "+");
  expect_equal(run_map<i32, i32, i32>("i_sub", F([](auto x, auto y) { return x - y; }), a, b),
               map2(a, b, [&](int32_t x, int32_t y) { return wrap(int64_t(x) - y); }), "-");
  expect_equal(run_map<i32, i32, i32>("i_mul", F([](auto x, auto y) { return x * y; }), a, b),
               map2(a, b, [&](int32_t x, int32_t y) { return wrap(int64_t(x) * y); }), "*");
  expect_equal(run_map<i32, i32, i32>("i_div", F([](auto x, auto y) { return x / y; }), a, b),
               map2(a, b, [](int32_t x, int32_t y) { return x / y; }), "/ (truncates)");
  const auto pos = ints(5, 0, INT32_MAX);  // GLSL leaves % undefined for negative operands
  expect_equal(run_map<i32, i32, i32>("i_mod", F([](auto x, auto y) { return x % y; }), pos, b),
               map2(pos, b, [](int32_t x, int32_t y) { return x % y; }), "%");
  expect_equal(run_map<i32, i32, i32>("i_neg", F([](auto x, auto) { return -x; }), b, b),
               map(b, [](int32_t x) { return -x; }), "neg");
}

TEST_F(Operators, UnsignedIntegerArithmeticWraps) {
  const auto a = uints(6), b = uints(7, 1, 100000);
  using F = std::function<Expr<u32>(Expr<u32>, Expr<u32>)>;
  expect_equal(run_map<u32, u32, u32>("u_add", F([](auto x, auto y) { return x + y; }), a, b),
               map2(a, b, [](uint32_t x, uint32_t y) { return x + y; }), "+");
  expect_equal(run_map<u32, u32, u32>("u_sub", F([](auto x, auto y) { return x - y; }), b, a),
               map2(b, a, [](uint32_t x, uint32_t y) { return x - y; }), "-");
  expect_equal(run_map<u32, u32, u32>("u_mul", F([](auto x, auto y) { return x * y; }), a, b),
               map2(a, b, [](uint32_t x, uint32_t y) { return x * y; }), "*");
  expect_equal(run_map<u32, u32, u32>("u_div", F([](auto x, auto y) { return x / y; }), a, b),
               map2(a, b, [](uint32_t x, uint32_t y) { return x / y; }), "/");
  expect_equal(run_map<u32, u32, u32>("u_mod", F([](auto x, auto y) { return x % y; }), a, b),
               map2(a, b, [](uint32_t x, uint32_t y) { return x % y; }), "%");
}

TEST_F(Operators, BitwiseOperatorsOnBothIntegerTypes) {
  const auto a = uints(8), b = uints(9), s = uints(10, 0, 31);
  using F = std::function<Expr<u32>(Expr<u32>, Expr<u32>)>;
  expect_equal(run_map<u32, u32, u32>("u_and", F([](auto x, auto y) { return x & y; }), a, b),
               map2(a, b, [](uint32_t x, uint32_t y) { return x & y; }), "&");
  expect_equal(run_map<u32, u32, u32>("u_or", F([](auto x, auto y) { return x | y; }), a, b),
               map2(a, b, [](uint32_t x, uint32_t y) { return x | y; }), "|");
  expect_equal(run_map<u32, u32, u32>("u_xor", F([](auto x, auto y) { return x ^ y; }), a, b),
               map2(a, b, [](uint32_t x, uint32_t y) { return x ^ y; }), "^");
  expect_equal(run_map<u32, u32, u32>("u_not", F([](auto x, auto) { return ~x; }), a, b),
               map(a, [](uint32_t x) { return ~x; }), "~");
  expect_equal(run_map<u32, u32, u32>("u_shl", F([](auto x, auto y) { return x << y; }), a, s),
               map2(a, s, [](uint32_t x, uint32_t y) { return x << y; }), "<<");
  expect_equal(run_map<u32, u32, u32>("u_shr", F([](auto x, auto y) { return x >> y; }), a, s),
               map2(a, s, [](uint32_t x, uint32_t y) { return x >> y; }), ">> (logical)");
  const auto ia = ints(11, INT32_MIN, INT32_MAX), is = ints(12, 0, 31);
  using G = std::function<Expr<i32>(Expr<i32>, Expr<i32>)>;
  expect_equal(run_map<i32, i32, i32>("i_shr", G([](auto x, auto y) { return x >> y; }), ia, is),
               map2(ia, is, [](int32_t x, int32_t y) { return x >> y; }), ">> (arithmetic)");
  expect_equal(run_map<i32, i32, i32>("i_xor", G([](auto x, auto y) { return x ^ y; }), ia, is),
               map2(ia, is, [](int32_t x, int32_t y) { return x ^ y; }), "^");
}

TEST_F(Operators, ComparisonsAndLogic) {
  const auto a = ints(13, -5, 5), b = ints(14, -5, 5);
  using F = std::function<Expr<boolean>(Expr<i32>, Expr<i32>)>;
  auto u = [](bool v) { return uint32_t(v); };
  expect_equal(run_map<boolean, i32, i32>("i_lt", F([](auto x, auto y) { return x < y; }), a, b),
               map2(a, b, [&](int x, int y) { return u(x < y); }), "<");
  expect_equal(run_map<boolean, i32, i32>("i_le", F([](auto x, auto y) { return x <= y; }), a, b),
               map2(a, b, [&](int x, int y) { return u(x <= y); }), "<=");
  expect_equal(run_map<boolean, i32, i32>("i_gt", F([](auto x, auto y) { return x > y; }), a, b),
               map2(a, b, [&](int x, int y) { return u(x > y); }), ">");
  expect_equal(run_map<boolean, i32, i32>("i_ge", F([](auto x, auto y) { return x >= y; }), a, b),
               map2(a, b, [&](int x, int y) { return u(x >= y); }), ">=");
  expect_equal(run_map<boolean, i32, i32>("i_eq", F([](auto x, auto y) { return x == y; }), a, b),
               map2(a, b, [&](int x, int y) { return u(x == y); }), "==");
  expect_equal(run_map<boolean, i32, i32>("i_ne", F([](auto x, auto y) { return x != y; }), a, b),
               map2(a, b, [&](int x, int y) { return u(x != y); }), "!=");
  expect_equal(run_map<boolean, i32, i32>("logic", F([](auto x, auto y) { return (x < y && x > -3) || !(y != 2); }), a, b),
               map2(a, b, [&](int x, int y) { return u((x < y && x > -3) || !(y != 2)); }), "&& || !");
  const auto fa = floats(15, -2, 2), fb = floats(16, -2, 2);
  using G = std::function<Expr<boolean>(Expr<f32>, Expr<f32>)>;
  expect_equal(run_map<boolean, f32, f32>("f_lt", G([](auto x, auto y) { return x < y; }), fa, fb),
               map2(fa, fb, [&](float x, float y) { return u(x < y); }), "f <");
  const auto ua = uints(17, 0, 4), ub = uints(18, 0, 4);
  using H = std::function<Expr<boolean>(Expr<u32>, Expr<u32>)>;
  expect_equal(run_map<boolean, u32, u32>("u_ge", H([](auto x, auto y) { return x >= y; }), ua, ub),
               map2(ua, ub, [&](uint32_t x, uint32_t y) { return u(x >= y); }), "u >=");
}

// ---- builtins --------------------------------------------------------------------------------

TEST_F(Operators, FloatBuiltinsWithinVulkanPrecision) {
  const auto x = floats(20, -4, 4), p = floats(21, 0.01f, 8);
  using F = std::function<Expr<f32>(Expr<f32>)>;
  auto check = [&](const char* name, F f, float (*ref)(float), const std::vector<float>& in, float rel, float abs) {
    expect_close(run_map<f32, f32>(name, f, in), map(in, ref), rel, abs, name);
  };
  check("b_exp", [](auto v) { return exp(v); }, [](float v) { return std::exp(v); }, x, 2e-6f, 0);
  check("b_exp2", [](auto v) { return exp2(v); }, [](float v) { return std::exp2(v); }, x, 2e-6f, 0);
  check("b_log", [](auto v) { return log(v); }, [](float v) { return std::log(v); }, p, 2e-6f, 2e-7f);
  check("b_sqrt", [](auto v) { return sqrt(v); }, [](float v) { return std::sqrt(v); }, p, 4e-7f, 0);
  check("b_rsqrt", [](auto v) { return inversesqrt(v); }, [](float v) { return 1.0f / std::sqrt(v); }, p, 4e-7f, 0);
  check("b_sin", [](auto v) { return sin(v); }, [](float v) { return std::sin(v); }, x, 0, 2e-6f);  // abs 2^-11 allowed
  check("b_cos", [](auto v) { return cos(v); }, [](float v) { return std::cos(v); }, x, 0, 2e-6f);
  check("b_floor", [](auto v) { return floor(v); }, [](float v) { return std::floor(v); }, x, 0, 0);
  check("b_abs", [](auto v) { return abs(v); }, [](float v) { return std::fabs(v); }, x, 0, 0);
  using G = std::function<Expr<f32>(Expr<f32>, Expr<f32>)>;
  expect_close(run_map<f32, f32, f32>("b_pow", G([](auto a, auto b) { return pow(a, b); }), p, floats(22, -2, 2)),
               map2(p, floats(22, -2, 2), [](float a, float b) { return std::pow(a, b); }), 2e-5f, 0, "pow");
  expect_equal(run_map<f32, f32, f32>("b_fmin", G([](auto a, auto b) { return min(a, b); }), x, p),
               map2(x, p, [](float a, float b) { return std::min(a, b); }), "min");
  expect_equal(run_map<f32, f32, f32>("b_fmax", G([](auto a, auto b) { return max(a, b); }), x, p),
               map2(x, p, [](float a, float b) { return std::max(a, b); }), "max");
  using H = std::function<Expr<f32>(Expr<f32>, Expr<f32>, Expr<f32>)>;
  const auto z = floats(23, -1, 1);
  auto fma_ref = x;
  for (size_t i = 0; i < x.size(); ++i) fma_ref[i] = x[i] * p[i] + z[i];
  expect_close(run_map<f32, f32, f32, f32>("b_fma2", H([](auto a, auto b, auto c) { return fma(a, b, c); }), x, p, z),
               fma_ref, 1e-6f, 1e-6f, "fma");
  expect_equal(run_map<f32, f32>("b_clamp", F([](auto v) { return clamp(v, -1.5f, 2.25f); }), x),
               map(x, [](float v) { return std::clamp(v, -1.5f, 2.25f); }), "clamp");
}

TEST_F(Operators, RoundBreaksTiesToEven) {
  std::vector<float> x = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f, 3.51f, 126.5f, 127.5f, -127.5f, 0.0f};
  using F = std::function<Expr<f32>(Expr<f32>)>;
  expect_equal(run_map<f32, f32>("b_round", F([](auto v) { return round(v); }), x),
               map(x, [](float v) { return std::nearbyint(v); }), "roundEven");
}

TEST_F(Operators, IntegerBuiltins) {
  const auto a = ints(30, -1000, 1000), b = ints(31, -1000, 1000);
  using F = std::function<Expr<i32>(Expr<i32>, Expr<i32>)>;
  expect_equal(run_map<i32, i32, i32>("i_min", F([](auto x, auto y) { return min(x, y); }), a, b),
               map2(a, b, [](int x, int y) { return std::min(x, y); }), "min");
  expect_equal(run_map<i32, i32, i32>("i_max", F([](auto x, auto y) { return max(x, y); }), a, b),
               map2(a, b, [](int x, int y) { return std::max(x, y); }), "max");
  expect_equal(run_map<i32, i32, i32>("i_abs", F([](auto x, auto) { return abs(x); }), a, b),
               map(a, [](int x) { return std::abs(x); }), "abs");
  expect_equal(run_map<i32, i32, i32>("i_clamp", F([](auto x, auto) { return clamp(x, -128, 127); }), a, b),
               map(a, [](int x) { return std::clamp(x, -128, 127); }), "clamp");
  const auto ua = uints(32), ub = uints(33);
  using G = std::function<Expr<u32>(Expr<u32>, Expr<u32>)>;
  expect_equal(run_map<u32, u32, u32>("u_min", G([](auto x, auto y) { return min(x, y); }), ua, ub),
               map2(ua, ub, [](uint32_t x, uint32_t y) { return std::min(x, y); }), "min");
  expect_equal(run_map<u32, u32, u32>("u_max", G([](auto x, auto y) { return max(x, y); }), ua, ub),
               map2(ua, ub, [](uint32_t x, uint32_t y) { return std::max(x, y); }), "max");
}

TEST_F(Operators, SelectPicksPerInvocation) {
  const auto a = floats(40, -1, 1), b = floats(41, -1, 1);
  using F = std::function<Expr<f32>(Expr<f32>, Expr<f32>)>;
  expect_equal(run_map<f32, f32, f32>("select", F([](auto x, auto y) { return select(x < y, x, y * 2.0f); }), a, b),
               map2(a, b, [](float x, float y) { return x < y ? x : y * 2.0f; }), "select");
}

TEST_F(Operators, ConversionsAndBitcasts) {
  const auto f = floats(50, -1000, 1000);
  using F2I = std::function<Expr<i32>(Expr<f32>)>;
  expect_equal(run_map<i32, f32>("f2i", F2I([](auto v) { return cast<i32>(v); }), f),
               map(f, [](float v) { return int32_t(v); }), "float->int truncates");
  using F2U = std::function<Expr<u32>(Expr<f32>)>;
  expect_equal(run_map<u32, f32>("f_bits", F2U([](auto v) { return bitcast<u32>(v); }), f),
               map(f, [](float v) { return std::bit_cast<uint32_t>(v); }), "floatBitsToUint");
  const auto u = uints(51, 0, 1u << 24);
  using U2F = std::function<Expr<f32>(Expr<u32>)>;
  expect_equal(run_map<f32, u32>("u2f", U2F([](auto v) { return cast<f32>(v); }), u),
               map(u, [](uint32_t v) { return float(v); }), "uint->float");
  const auto bits = map(f, [](float v) { return std::bit_cast<uint32_t>(v); });
  expect_equal(run_map<f32, u32>("u_bits", U2F([](auto v) { return bitcast<f32>(v); }), bits), f, "uintBitsToFloat");
  const auto i = ints(52, INT32_MIN, INT32_MAX);
  using I2U = std::function<Expr<u32>(Expr<i32>)>;
  expect_equal(run_map<u32, i32>("i2u", I2U([](auto v) { return bitcast<u32>(v); }), i),
               map(i, [](int32_t v) { return uint32_t(v); }), "int->uint keeps bits");
  using I2F = std::function<Expr<f32>(Expr<i32>)>;
  expect_equal(run_map<f32, i32>("i_bits_f", I2F([](auto v) { return bitcast<f32>(v); }),
                                 map(f, [](float v) { return std::bit_cast<int32_t>(v); })),
               f, "intBitsToFloat");
}

TEST_F(Operators, BitfieldExtractSignExtendsSignedOnly) {
  const auto u = uints(60);
  using U = std::function<Expr<u32>(Expr<u32>)>;
  expect_equal(run_map<u32, u32>("bfe_u", U([](auto v) { return bitfield_extract(v, 6, 8); }), u),
               map(u, [](uint32_t v) { return (v >> 6) & 0xffu; }), "uint");
  const auto i = map(u, [](uint32_t v) { return int32_t(v); });
  using I = std::function<Expr<i32>(Expr<i32>)>;
  expect_equal(run_map<i32, i32>("bfe_i", I([](auto v) { return bitfield_extract(v, 6, 8); }), i),
               map(i, [](int32_t v) { return int32_t(int8_t(uint8_t(uint32_t(v) >> 6))); }), "int");
}

TEST_F(Operators, PackedBytesAndHalves) {
  const auto w = uints(70), w2 = uints(71);
  using I4 = std::function<Expr<ivec4>(Expr<u32>)>;
  const auto unpacked = run_map<ivec4, u32>("unpack_i8x4", I4([](auto v) { return unpack_i8x4(v); }), w);
  for (size_t k = 0; k < w.size(); ++k)
    for (int l = 0; l < 4; ++l) ASSERT_EQ(unpacked[k][l], int8_t(uint8_t(w[k] >> (8 * l)))) << k;
  using RT = std::function<Expr<u32>(Expr<u32>)>;
  expect_equal(run_map<u32, u32>("i8x4_round_trip", RT([](auto v) { return pack_i8x4(unpack_i8x4(v)); }), w), w,
               "pack_i8x4(unpack_i8x4(w)) == w");
  expect_equal(run_map<u32, u32>("u8x4_sum", RT([](auto v) {
                 auto b = unpack_u8x4(v);
                 return b.x() + b.y() + b.z() + b.w();
               }), w),
               map(w, [](uint32_t v) { return (v & 255) + ((v >> 8) & 255) + ((v >> 16) & 255) + (v >> 24); }),
               "unpack_u8x4");
  using D = std::function<Expr<i32>(Expr<u32>, Expr<u32>)>;
  expect_equal(run_map<i32, u32, u32>("sdot4x8", D([](auto a, auto b) { return sdot4x8(a, b); }), w, w2),
               map2(w, w2, [](uint32_t a, uint32_t b) {
                 int32_t s = 0;
                 for (int l = 0; l < 4; ++l) s += int8_t(uint8_t(a >> (8 * l))) * int8_t(uint8_t(b >> (8 * l)));
                 return s;
               }),
               "packed signed 4x8 dot");
  const std::vector<float> halves = {0.0f, 1.0f, -2.5f, 65504.0f, 0.333251953125f, -0.0f};
  using H = std::function<Expr<f32>(Expr<f32>)>;
  expect_equal(run_map<f32, f32>("half_round_trip", H([](auto v) { return unpack_half2x16(pack_half2x16(make_vec<f32>(v, 0.0f))).x(); }), halves),
               halves, "halves representable exactly survive pack/unpack");
}

TEST_F(Operators, VectorArithmeticAndLanes) {
  const auto a = floats(80, -3, 3), b = floats(81, -3, 3);
  using F = std::function<Expr<f32>(Expr<f32>, Expr<f32>)>;
  // Drivers may fuse a * b + c into one fma (NVIDIA does): results within an ulp or two.
  expect_close(run_map<f32, f32, f32>("vec_ops", F([](auto x, auto y) {
                 auto v = make_vec<f32>(x, y, x + y, 2.0f);
                 auto w = v * 2.0f + make_vec<f32>(y, x, 1.0f, 0.5f);
                 return w.x() - w.y() + w.z() * w.w();
               }), a, b),
               map2(a, b, [](float x, float y) {
                 float w0 = x * 2 + y, w1 = y * 2 + x, w2 = (x + y) * 2 + 1, w3 = 2.0f * 2 + 0.5f;
                 return w0 - w1 + w2 * w3;
               }),
               1e-6f, 1e-5f, "vec4 * scalar, +, lanes");
  expect_close(run_map<f32, f32, f32>("vec_dot", F([](auto x, auto y) { return dot(make_vec<f32>(x, y), make_vec<f32>(y, 3.0f)); }), a, b),
               map2(a, b, [](float x, float y) { return x * y + y * 3.0f; }), 1e-6f, 1e-6f, "dot");
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

TEST_F(Operators, HalfPrecisionStorageAndArithmetic) {
  if (!ctx().info().float16 || !ctx().info().storage16) GTEST_SKIP() << "device lacks float16 / 16-bit storage";
  using namespace dsl;
  KernelBuilder k("half_ops", {64, 1, 1});
  auto h = k.buffer<f16>("h", Access::Read);
  auto out = k.buffer<f32>("result", Access::Write);
  auto back = k.buffer<f16>("back", Access::Write);
  auto i = k.global_id().x();
  if_(i < 4u, [&] {
    Expr<f16> v = h[i];
    out[i] = cast<f32>(v * v + v);  // f16 arithmetic, exact for these small values
    back[i] = cast<f16>(cast<f32>(v) * 0.5f);
  });
  // 1.5, -2.0, 0.25, 3.0 as IEEE halves.
  const std::vector<uint16_t> halves = {0x3E00, 0xC000, 0x3400, 0x4200};
  rt::Buffer hb = buffer_of(halves, "h"), ob(ctx(), 16, {false, "result"}), bb(ctx(), 8, {false, "back"});
  rt::Pipeline p = pipeline(k.build());
  rt::Graph g(ctx());
  g.dispatch(p, {hb, ob, bb}, rt::push(), rt::Grid{1});
  g.submit_and_wait();
  EXPECT_EQ(ob.download<float>(), (std::vector<float>{3.75f, 2.0f, 0.3125f, 12.0f}));
  // Halves of 0.75, -1.0, 0.125, 1.5.
  EXPECT_EQ(bb.download<uint16_t>(), (std::vector<uint16_t>{0x3A00, 0xBC00, 0x3000, 0x3E00}));
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

// x * x - p with p = the rounded x * x is the rounding error of the product: exactly 0 if the
// compiler fuses it into fma(x, x, -p)... or 0 when reassociated. With let_precise the two-product
// error term of Dekker's split comes out exact, as on the CPU.
TEST_F(Operators, LetPreciseKeepsExactArithmetic) {
  using namespace dsl;
  std::vector<float> x = {1.0f + 0x1p-12f, 3.0f + 0x1p-20f, 1.1f, 0.7f};
  using F = std::function<Expr<f32>(Expr<f32>)>;
  const auto got = run_map<f32, f32>("two_product", F([](auto v) {
    auto hi = let_precise("hi", bitcast<f32>(bitcast<u32>(v) & 0xfffff000u));
    auto lo = let_precise("lo", v - hi);
    auto p = let_precise("p", v * v);
    return let_precise("err", ((hi * hi - p) + hi * lo + lo * hi) + lo * lo);
  }), x);
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = double(x[i]) * double(x[i]) - double(x[i] * x[i]);
    EXPECT_EQ(got[i], float(exact)) << x[i];
  }
}

}  // namespace
}  // namespace bdsl::test
