// Shared by the attention-half op tests: a fixture that knows the device's OpTarget, seeded random
// data, F16 helpers and a runner for one dispatch.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "device_test.h"
#include "golden/splitmix.h"
#include "models/numerics/half_float.h"
#include "ops/common/step_state.h"
#include "ops/target.h"

namespace bdsl::test {

class OpsTest : public DeviceTest {
 protected:
  ops::OpTarget target() { return ops::OpTarget::from(ctx().info()); }

  static std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
    golden::SplitMix64 rng(seed);
    std::vector<float> v(n);
    for (float& x : v) x = scale * rng.symmetric();
    return v;
  }
  // Values rounded to F16 so the reference sees exactly what the device reads.
  static std::vector<float> f16_rounded(std::vector<float> v) {
    for (float& x : v) x = numerics::f16_to_f32(numerics::f32_to_f16(x));
    return v;
  }
  // Pairs of halves, low element in the low bits (pack_half2x16's layout); n must be even.
  static std::vector<uint32_t> pack_f16(const std::vector<float>& v) {
    std::vector<uint32_t> words(v.size() / 2);
    for (size_t i = 0; i < words.size(); ++i)
      words[i] = numerics::f32_to_f16(v[2 * i]) | (uint32_t(numerics::f32_to_f16(v[2 * i + 1])) << 16);
    return words;
  }
  static std::vector<float> unpack_f16(const std::vector<uint32_t>& words) {
    std::vector<float> v(words.size() * 2);
    for (size_t i = 0; i < words.size(); ++i) {
      v[2 * i] = numerics::f16_to_f32(uint16_t(words[i] & 0xffffu));
      v[2 * i + 1] = numerics::f16_to_f32(uint16_t(words[i] >> 16));
    }
    return v;
  }
  rt::Buffer step_buffer(uint32_t token, uint32_t pos) {
    ops::StepState s;
    s.token = token;
    s.pos = pos;
    return buffer_of(std::vector<ops::StepState>{s}, "step");
  }
  void run(const dsl::Kernel& k, std::vector<rt::BufferSlice> bindings, rt::PushConstants push, rt::Grid grid) {
    rt::Pipeline p = pipeline(k);
    rt::Graph g(ctx());
    g.dispatch(p, bindings, push, grid);
    g.submit_and_wait();
  }
};

}  // namespace bdsl::test
