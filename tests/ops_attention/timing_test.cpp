// GPU time of the attention-half ops at the 2B shape near the end of the context, per op, from
// timestamps. Disabled by default (a measurement, not a check); run it on the target GPU with
// --gtest_also_run_disabled_tests --gtest_filter='*Timing*'.
#include <cstdio>
#include <map>
#include <string>

#include "ops/attention_decode.h"
#include "ops/embedding_lookup.h"
#include "ops/rms_norm.h"
#include "ops/rope_kv_write.h"
#include "ops_test_util.h"

namespace bdsl::test {
namespace {

class Timing : public OpsTest {};

TEST_F(Timing, DISABLED_DecodeOpsAt2BShape) {
  if (!ctx().info().timestamps) GTEST_SKIP() << "no timestamps";
  const ops::AttentionDims d{20, 5, 128};
  const uint32_t context = 4096, dim = 2560, layers = 30;
  const auto t = target();
  const uint32_t chunks = ops::attention_chunks(t, d, context);
  std::printf("device %s: subgroup %u, attention workgroup %u, chunks %u\n", ctx().info().name.c_str(),
              t.subgroup_size, ops::attention_workgroup(t, d), chunks);
  rt::Buffer step = step_buffer(7, context - 1);
  rt::Buffer x = buffer_of(random_floats(dim, 1), "x"), w = buffer_of(random_floats(dim, 2), "w");
  rt::Buffer xn(ctx(), dim * 4, {false, "xn"});
  rt::Buffer table = buffer_of(pack_f16(random_floats(size_t(dim) * 64, 3)), "table");
  rt::Buffer q = buffer_of(random_floats(d.q_width(), 4), "q"), k = buffer_of(random_floats(d.kv_width(), 5), "k");
  rt::Buffer v = buffer_of(random_floats(d.kv_width(), 6), "v"), out(ctx(), d.q_width() * 4, {false, "out"});
  std::vector<rt::Buffer> kc, vc;
  for (uint32_t l = 0; l < layers; ++l) {
    kc.push_back(buffer_of(pack_f16(random_floats(size_t(context) * d.kv_width(), 10 + l)), "k_cache"));
    vc.push_back(buffer_of(pack_f16(random_floats(size_t(context) * d.kv_width(), 50 + l)), "v_cache"));
  }
  rt::Buffer partials(ctx(), ops::attention_partials_bytes(d, chunks, 1), {false, "partials"});
  rt::Buffer counters = buffer_of(std::vector<uint32_t>(d.n_kv_heads, 0), "counters");
  rt::Pipeline emb = pipeline(ops::embedding_lookup(t, {dim, 64, 1}));
  rt::Pipeline norm = pipeline(ops::rms_norm(t, dim));
  rt::Pipeline rope = pipeline(ops::rope_kv_write(t, d, context));
  rt::Pipeline attn = pipeline(ops::attention_decode(t, d, context, chunks));
  rt::Graph g(ctx(), {true, "timing"});
  const uint32_t ew = ops::embedding_workgroup(t), rw = ops::rope_kv_write_workgroup(t);
  g.dispatch(emb, {step, table, x}, rt::push(), rt::Grid{(dim + ew - 1) / ew});
  const uint32_t units = (d.n_heads + 2 * d.n_kv_heads) * d.head_dim / 4;
  for (uint32_t l = 0; l < layers; ++l) {
    g.dispatch(norm, {x, w, xn}, rt::push(1e-5f), rt::Grid{1});
    g.dispatch(rope, {step, q, k, v, kc[l], vc[l]}, rt::push(500000.0f, 1u), rt::Grid{(units + rw - 1) / rw, 1});
    g.dispatch(attn, {step, q, kc[l], vc[l], partials, counters, out}, rt::push(), rt::Grid{d.n_kv_heads, chunks, 1});
  }
  for (int rep = 0; rep < 3; ++rep) g.submit_and_wait();
  const auto ns = g.timestamps_ns();
  const auto names = g.operation_names();
  std::map<std::string, std::pair<double, int>> per;
  for (size_t i = 0; i < ns.size(); ++i) {
    per[names[i]].first += ns[i];
    per[names[i]].second += 1;
  }
  for (const auto& [name, s] : per) std::printf("%-32s %8.2f us mean over %d\n", name.c_str(), s.first / s.second / 1000, s.second);
  std::printf("graph: %u dispatches, %u steps\n", g.stats().dispatches, g.stats().steps);
  for (uint32_t pos : {100u, 1000u}) {  // the default chunks at earlier positions
    rt::Buffer st = step_buffer(0, pos);
    rt::Graph ga(ctx(), {true, "attention"});
    for (uint32_t l = 0; l < layers; ++l)
      ga.dispatch(attn, {st, q, kc[l], vc[l], partials, counters, out}, rt::push(), rt::Grid{d.n_kv_heads, chunks, 1});
    for (int rep = 0; rep < 3; ++rep) ga.submit_and_wait();
    double total = 0;
    for (double v : ga.timestamps_ns()) total += v;
    std::printf("attention_decode pos %u, %2u chunks: %8.2f us mean\n", pos, chunks, total / layers / 1000);
  }
  for (uint32_t c : {4u, 8u, 16u, 32u, 64u}) {  // attention alone, per chunk count
    if (c * ops::attention_workgroup(t, d) < context / 64) continue;
    rt::Buffer part(ctx(), ops::attention_partials_bytes(d, c, 1), {false, "partials"});
    rt::Pipeline a = pipeline(ops::attention_decode(t, d, context, c));
    rt::Graph ga(ctx(), {true, "attention"});
    for (uint32_t l = 0; l < layers; ++l)
      ga.dispatch(a, {step, q, kc[l], vc[l], part, counters, out}, rt::push(), rt::Grid{d.n_kv_heads, c, 1});
    for (int rep = 0; rep < 3; ++rep) ga.submit_and_wait();
    double total = 0;
    for (double v : ga.timestamps_ns()) total += v;
    std::printf("attention_decode pos %u, %2u chunks: %8.2f us mean\n", context - 1, c, total / layers / 1000);
  }
}

}  // namespace
}  // namespace bdsl::test
