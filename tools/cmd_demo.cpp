// `bitnet-dsl demo`: the README's first command ends here. On the chosen Vulkan device it runs the
// tutorial's kernels (docs/writing-kernels.md) against the CPU, then makes the tiny synthetic
// BitNet model (once, in the cache folder), generates from it, and validates it layer by layer
// against the CPU reference.
#include <cmath>
#include <cstdio>
#include <string>

#include "codegen/shader_cache.h"
#include "golden/golden_data.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/bitnet_model.h"
#include "models/bitnet/golden_check.h"
#include "models/generator.h"
#include "models/tokenizer/token_stream.h"
#include "models/tokenizer/tokenizer.h"
#include "ops/examples.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"
#include "tools/command.h"

namespace bdsl::tools {
namespace {

bool report(const char* what, float max_error, float tolerance) {
  const bool ok = max_error <= tolerance;
  std::printf("  %-34s max error %.3g  %s\n", what, max_error, ok ? "ok" : "FAILED");
  return ok;
}

bool demo_saxpy(rt::Context& ctx) {
  const uint32_t n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = float(i % 1000) * 0.5f, y[i] = 1.0f - float(i % 7);
  rt::Buffer xb(ctx, n * 4, {false, "x"}), yb(ctx, n * 4, {false, "y"});
  xb.upload(x);
  yb.upload(y);
  rt::Pipeline saxpy = rt::make_pipeline(ctx, ops::saxpy());
  rt::Graph graph(ctx);
  graph.dispatch(saxpy, {xb, yb}, rt::push(n, 2.0f), rt::Grid{(n + 255) / 256});
  graph.submit_and_wait();
  const std::vector<float> got = yb.download<float>();
  float err = 0;
  for (uint32_t i = 0; i < n; ++i) err = std::max(err, std::fabs(got[i] - (2.0f * x[i] + y[i])));
  return report("saxpy (1M floats)", err, 0.0f);
}

bool demo_sum(rt::Context& ctx) {
  const uint32_t n = 1 << 20, wg = 128;
  std::vector<float> x(n);
  double want = 0;
  for (uint32_t i = 0; i < n; ++i) want += x[i] = float(i % 13) * 0.25f;
  rt::Buffer xb(ctx, n * 4, {false, "x"}), partial(ctx, (n / wg) * 4, {false, "partial"}),
      total(ctx, 4 * ((n / wg + wg - 1) / wg), {false, "total"});
  xb.upload(x);
  rt::Pipeline sum = rt::make_pipeline(ctx, ops::workgroup_sum(wg));
  rt::Graph graph(ctx);  // two passes: the second reads what the first wrote, so a barrier
  graph.dispatch(sum, {xb, partial}, rt::push(n), rt::Grid{n / wg});
  graph.dispatch(sum, {partial, total}, rt::push(n / wg), rt::Grid{(n / wg + wg - 1) / wg});
  graph.submit_and_wait();
  float got = 0;
  for (float v : total.download<float>()) got += v;
  std::printf("  (graph: %u dispatches, %u barrier)\n", graph.stats().dispatches, graph.stats().barriers);
  return report("workgroup sum (1M floats)", std::fabs(got - float(want)), 1e-6f * float(want));
}

bool demo_softmax(rt::Context& ctx) {
  const uint32_t rows = 64, cols = 1000, wg = 64;
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i)) * 8.0f;
  rt::Buffer xb(ctx, x.size() * 4, {false, "x"}), yb(ctx, x.size() * 4, {false, "y"});
  xb.upload(x);
  rt::Pipeline softmax = rt::make_pipeline(ctx, ops::subgroup_softmax(wg));
  const uint32_t rows_per_group = wg / ctx.info().subgroup_size;
  rt::Graph graph(ctx);
  graph.dispatch(softmax, {xb, yb}, rt::push(rows, cols), rt::Grid{(rows + rows_per_group - 1) / rows_per_group});
  graph.submit_and_wait();
  const std::vector<float> got = yb.download<float>();
  float err = 0;
  for (uint32_t r = 0; r < rows; ++r) {
    float m = -INFINITY, s = 0;
    for (uint32_t c = 0; c < cols; ++c) m = std::max(m, x[r * cols + c]);
    for (uint32_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (uint32_t c = 0; c < cols; ++c)
      err = std::max(err, std::fabs(got[r * cols + c] - std::exp(x[r * cols + c] - m) / s));
  }
  return report("subgroup softmax (64 x 1000)", err, 1e-6f);
}

// The tiny model: generate a continuation, then compare every layer with the CPU reference.
bool demo_model(rt::Context& ctx) {
  namespace fs = std::filesystem;
  const fs::path dir = codegen::default_cache_dir() / "demo";
  const fs::path model_path = dir / "tiny.gguf";
  const golden::GoldenSpec spec = golden::default_golden_spec("tiny");
  std::printf("\ntiny synthetic BitNet b1.58 model (random weights, so the text is nonsense):\n");
  // Fresh golden data from the CPU reference, and the model it was made from.
  const golden::GoldenRun reference = golden::make_golden(spec, dir / "golden", dir / "work");
  if (!fs::exists(model_path)) golden::write_synthetic_model(golden::synthetic_preset("tiny"), model_path);
  const auto file = models::GgufFile::open(model_path);
  const auto tokenizer = models::Tokenizer::from_gguf(file);
  bitnet::BitNetModel model(ctx, file, models::BitNetConfig::from_gguf(file));
  const auto s = model.stats();
  std::printf("  one token = one recorded command buffer: %u dispatches, %u barrier-separated steps\n", s.dispatches,
              s.steps);
  models::Generator generator(model);
  models::GenerateOptions options;
  options.max_new_tokens = 24;
  options.sampling.temperature = 0;
  models::TokenStreamDecoder stream(tokenizer);
  std::printf("  %s|", spec.prompt.c_str());
  const auto r = generator.generate(reference.prompt_ids, options, [&](int32_t id) {
    std::printf("%s", stream.push(id).c_str());
    return true;
  });
  std::printf("%s\n  (%.1f tokens/s)\n\nper-layer check against the CPU reference:\n", stream.flush().c_str(),
              r.tokens.size() / std::max(r.generate_seconds, 1e-9));
  const auto report = bitnet::validate_against_golden(ctx, file, dir / "golden");
  std::printf("%s", bitnet::format_report(report).c_str());
  return report.pass();
}

int run_demo(const Args& args) {
  rt::ContextOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--device" && i + 1 < args.size()) {
      options.device = args[++i];
    } else if (args[i] == "--help") {
      std::printf("usage: bitnet-dsl demo [--device N|NAME]\n");
      return 0;
    } else {
      throw UsageError("unknown argument '" + args[i] + "' (try --help)");
    }
  }
  rt::Context ctx(options);
  std::printf("device: %s\n", ctx.info().summary().c_str());
  std::printf("tutorial kernels (docs/writing-kernels.md), checked against the CPU:\n");
  bool ok = demo_saxpy(ctx);
  ok = demo_sum(ctx) && ok;
  ok = demo_softmax(ctx) && ok;
  ok = demo_model(ctx) && ok;
  std::printf("%s\n", codegen::default_shader_cache().report().c_str());
  std::printf(ok ? "demo: everything matches the CPU\n" : "demo: MISMATCH\n");
  return ok ? 0 : 1;
}

const Command demo("demo", "run the built-in demo on the GPU and check it against the CPU", run_demo);

}  // namespace
}  // namespace bdsl::tools
