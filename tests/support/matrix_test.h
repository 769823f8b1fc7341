// Shared by the matrix-op tests: the device fixture with the device's OpTarget, seeded random
// data, I2_S test weights packed by the codec (models/formats/i2s.h) and the packed int8 activation layout
// of quantize_activations built on the CPU.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <random>
#include <vector>

#include "device_test.h"
#include "golden/reference_ops.h"
#include "models/formats/i2s.h"
#include "ops/target.h"

namespace bdsl::test {

class OpsMatrix : public DeviceTest {
 protected:
  ops::OpTarget target() { return ops::OpTarget::from(ctx().info()); }

  void run2d(const dsl::Kernel& k, std::vector<rt::BufferSlice> bindings, uint32_t gx, uint32_t gy,
             rt::PushConstants push = {}) {
    rt::Pipeline p = pipeline(k);
    rt::Graph g(ctx());
    g.dispatch(p, bindings, push, rt::Grid{gx, gy, 1});
    g.submit_and_wait();
  }
  rt::Buffer output(uint64_t bytes, const char* name) { return rt::Buffer(ctx(), std::max<uint64_t>(bytes, 4), {false, name}); }
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A ternary matrix with about a third of each value, and its I2_S bytes as the GGUF stores them.
struct I2sWeights {
  golden::TernaryMatrix m;
  std::vector<std::byte> bytes;
};
inline I2sWeights random_i2s(size_t rows, size_t cols, uint32_t seed, float scale = 0.75f) {
  std::mt19937 rng(seed);
  I2sWeights w;
  w.m.rows = rows;
  w.m.cols = cols;
  w.m.scale = scale;
  w.m.values.resize(rows * cols);
  for (int8_t& v : w.m.values) v = static_cast<int8_t>(int(rng() % 3) - 1);
  w.bytes = models::i2s::pack(w.m.values, scale);
  return w;
}

// quantize_activations' outputs on the CPU: packed words (element 4w + j in byte j) and act.
struct QuantizedX {
  std::vector<int8_t> q;
  float s = 0;
  int32_t sum = 0;
  std::vector<uint32_t> words() const {
    std::vector<uint32_t> out(q.size() / 4);
    for (size_t i = 0; i < q.size(); ++i) out[i / 4] |= uint32_t(uint8_t(q[i])) << (8 * (i % 4));
    return out;
  }
  std::vector<uint32_t> act() const {
    uint32_t sb, mb;
    std::memcpy(&sb, &s, 4);
    std::memcpy(&mb, &sum, 4);
    return {sb, mb};
  }
};
inline QuantizedX quantize_cpu(std::span<const float> x) {
  QuantizedX r;
  r.q.resize(x.size());
  r.s = golden::quantize_activations(x, r.q);
  for (int8_t v : r.q) r.sum += v;
  return r;
}

// |a - b| in units in the last place of b (b's ulp; 0 when equal).
inline double ulps(float a, float b) {
  if (a == b) return 0.0;
  const float ulp = std::nextafter(std::fabs(b), INFINITY) - std::fabs(b);
  return std::fabs(double(a) - double(b)) / ulp;
}

// The relative error SiLU's exp(-gate) may add on a GPU: Vulkan allows exp 3 + 2|x| ulp (the
// SPIR-V precision table), which for a negative gate carries into gate / (1 + exp(-gate)).
inline float silu_exp_error(float gate) { return gate < 0 ? (3.0f + 2.0f * std::fabs(gate)) * 0x1p-23f : 0.0f; }

// A block of tokens quantized on the CPU, packed as the matmul kernels read them. Token i's values
// have magnitude up to 1 + (i % scale_period), so tokens get different activation scales.
struct Tokens {
  std::vector<QuantizedX> q;
  std::vector<uint32_t> words, act;
};
inline Tokens quantize_tokens(uint32_t tokens, uint32_t cols, uint32_t seed, uint32_t scale_period = UINT32_MAX) {
  Tokens t;
  for (uint32_t i = 0; i < tokens; ++i) {
    t.q.push_back(quantize_cpu(random_floats(cols, seed + i, 1.0f + float(i % scale_period))));
    const auto w = t.q.back().words(), a = t.q.back().act();
    t.words.insert(t.words.end(), w.begin(), w.end());
    t.act.insert(t.act.end(), a.begin(), a.end());
  }
  return t;
}

}  // namespace bdsl::test
