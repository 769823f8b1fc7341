#include "ops/head/draw_support.h"

#include "ops/common/philox.h"
#include "ops/common/step_state.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

Expr<f32> gumbel_score(Expr<f32> value, Expr<f32> best, Expr<f32> inverse_temperature, Expr<u32> id, Expr<u32> counter,
                       Expr<u32> seed_low, Expr<u32> seed_high) {
  auto u = let("u", open_unit_interval(philox_first_word(id, counter, seed_low, seed_high)));
  // -log(u) as the host twin computes it: near u = 1 (the winning draws) from t = 1 - u, exact,
  // by its series (a log there may be off by 2^-21 absolutely, a large part of a small -log u).
  auto t = let_precise("t", 1.0f - u);
  auto s1 = let_precise("s1", t * 0.25f);
  auto s2 = let_precise("s2", s1 + 0.333333343f);
  auto s3 = let_precise("s3", s2 * t);
  auto s4 = let_precise("s4", s3 + 0.5f);
  auto s5 = let_precise("s5", s4 * t);
  auto s6 = let_precise("s6", s5 * t);
  auto series = let_precise("series", t + s6);
  auto minus_log_u = let("minus_log_u", select(t < 0.00390625f, series, -log(u)));
  auto gumbel = let_precise("gumbel", -log(minus_log_u));
  auto scaled = let_precise("scaled", (value - best) * inverse_temperature);
  return let_precise("score", scaled + gumbel);
}

std::pair<std::optional<Buffer<u32>>, std::optional<Buffer<u32>>> declare_advance(KernelBuilder& kb, uint32_t advance_context) {
  if (!advance_context) return {};
  auto step = kb.buffer<u32>("step", Access::ReadWrite);
  return {step, kb.buffer<u32>("generated", Access::Write)};
}

void advance_step(const Buffer<u32>& step, const Buffer<u32>& generated, uint32_t advance_context, Expr<u32> chosen) {
  auto pos = let("pos", Expr<u32>(step[kStepPos]));
  step[kStepToken] = chosen;
  step[kStepPos] = pos + 1u;
  step[kStepEpoch] = Expr<u32>(step[kStepEpoch]) + 1u;
  if_(pos < advance_context, [&] { generated[pos] = chosen; });
}

}  // namespace bdsl::ops
