// lm_head against golden's F16 row dot (DenseRows::dot_row: f16 -> f32, sequential f32 sum),
// with the table split into several bindings.
#include "ops/head/lm_head.h"
#include "ops/head/lm_head_batch.h"

#include "matrix_test.h"
#include "models/numerics/half_float.h"

namespace bdsl::test {
namespace {

class LmHead : public OpsMatrix {
 protected:
  // Runs lm_head with the table split for `t`, each part its own buffer (or, with one_buffer,
  // slices of one buffer), and checks every logit.
  void check(uint32_t vocab, uint32_t dim, const ops::OpTarget& t, uint32_t want_parts, bool one_buffer = false,
             uint32_t rows_per_part = 0) {
    SCOPED_TRACE(testing::Message() << vocab << "x" << dim << " parts " << want_parts);
    std::mt19937 rng(vocab + dim);
    std::normal_distribution<float> d(0.0f, 0.05f);
    std::vector<uint16_t> table(size_t(vocab) * dim);
    for (uint16_t& h : table) h = numerics::f32_to_f16(d(rng));
    const auto x = random_floats(dim, dim, 1.5f);

    ops::LmHeadSplit split = ops::lm_head_split(t, vocab, dim);
    if (rows_per_part) {
      split.rows_per_part = rows_per_part;
      split.parts = (vocab + rows_per_part - 1) / rows_per_part;
    }
    ASSERT_EQ(split.parts, want_parts);
    rt::Buffer xb = buffer_of(x, "x"), logits = output(vocab * 4, "logits");
    std::vector<rt::Buffer> parts;
    rt::Buffer whole;
    std::vector<rt::BufferSlice> bindings{xb};
    if (one_buffer) {
      whole = buffer_of(table, "table");
      for (uint32_t p = 0; p < split.parts; ++p)
        bindings.emplace_back(whole, p * split.part_bytes, uint64_t(split.rows_in_part(p, vocab)) * dim * 2);
    } else {
      for (uint32_t p = 0; p < split.parts; ++p) {
        const size_t begin = size_t(p) * split.rows_per_part * dim, n = size_t(split.rows_in_part(p, vocab)) * dim;
        parts.push_back(buffer_of(std::vector<uint16_t>(table.begin() + begin, table.begin() + begin + n), "table part"));
      }
      for (const rt::Buffer& b : parts) bindings.emplace_back(b);
    }
    bindings.emplace_back(logits);
    const ops::Plan plan = rows_per_part ? ops::plan_lm_head(t, vocab, dim, rows_per_part) : ops::plan_lm_head(t, vocab, dim);
    run(plan.kernel, bindings, plan.grid().x);
    const auto got = logits.download<float>();
    for (size_t v = 0; v < vocab; ++v) {
      float want = 0.0f, magnitude = 0.0f;
      for (size_t c = 0; c < dim; ++c) {
        const float e = numerics::f16_to_f32(table[v * dim + c]);
        want += e * x[c];
        magnitude += std::fabs(e * x[c]);
      }
      // Both sums (golden's sequential one and the GPU's strided-then-tree one) are within
      // dim * 2^-24 * sum|e x| of the exact value (f16 -> f32 and each product are exact), so
      // they are within twice that of each other.
      ASSERT_NEAR(got[v], want, 2.0f * dim * 0x1p-24f * magnitude + 1e-30f) << "row " << v;
    }
  }
};

TEST_F(LmHead, OneBindingWhenTheTableFits) {
  check(1000, 256, target(), 1);   // uvec4 path
  check(333, 130, target(), 1);    // u32 path, dim % 8 != 0, rows not a workgroup multiple
}

// A small maxStorageBufferRange forces the split: parts of whole rows, a multiple of 256 bytes,
// part boundaries not on workgroup boundaries, the last part shorter.
TEST_F(LmHead, SplitTableAcrossBindings) {
  ops::OpTarget t = target();
  t.max_storage_buffer_range = 300 * 512 + 100;  // 300 rows of 256 halves (a multiple of 256 bytes)
  check(1000, 256, t, 4);
  check(1000, 256, t, 4, /*one_buffer=*/true);
  t.max_storage_buffer_range = 150 * 260 + 7;  // rows of 130 halves: parts of 128 rows (256-byte multiple)
  check(333, 130, t, 3);
  t.max_storage_buffer_range = 4u << 20;  // 4 MiB: the real width, 819 rows a part, 5 parts
  check(4000, 2560, t, 5);
  // Parts chosen by the uploader (any whole number of rows within the range).
  check(1000, 256, t, 3, false, 409);
}

TEST_F(LmHead, RefusesARowLargerThanTheRange) {
  ops::OpTarget t = target();
  t.max_storage_buffer_range = 100;
  EXPECT_THROW(ops::lm_head(t, 10, 256), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

// lm_head_batch gives every token the logits lm_head gives it alone, bit for bit, whatever the
// batch: token counts below, at and past the tile, rows not a workgroup multiple, a split table.
class LmHeadBatch : public OpsMatrix {
 protected:
  void check(uint32_t vocab, uint32_t dim, uint32_t tokens, const ops::OpTarget& t) {
    SCOPED_TRACE(testing::Message() << vocab << "x" << dim << ", " << tokens << " tokens");
    std::mt19937 rng(vocab + dim + tokens);
    std::normal_distribution<float> d(0.0f, 0.05f);
    std::vector<uint16_t> table(size_t(vocab) * dim);
    for (uint16_t& h : table) h = numerics::f32_to_f16(d(rng));
    const ops::LmHeadSplit split = ops::lm_head_split(t, vocab, dim);
    std::vector<rt::Buffer> parts;
    for (uint32_t p = 0; p < split.parts; ++p) {
      const size_t begin = size_t(p) * split.rows_per_part * dim, n = size_t(split.rows_in_part(p, vocab)) * dim;
      parts.push_back(buffer_of(std::vector<uint16_t>(table.begin() + begin, table.begin() + begin + n), "table part"));
    }
    const auto x = random_floats(size_t(tokens) * dim, dim + tokens, 1.5f);
    const uint32_t stride = vocab + 3;  // a padded row of logits per token
    rt::Buffer xs = buffer_of(x, "x"), batch = output(uint64_t(tokens) * stride * 4, "logits");
    rt::Pipeline batched = pipeline(ops::lm_head_batch(t, vocab, dim, split.rows_per_part));
    rt::Pipeline single = pipeline(ops::lm_head(t, vocab, dim, split.rows_per_part));
    std::vector<rt::Buffer> alone;
    rt::Graph g(ctx());
    std::vector<rt::Arg> args = {{"x", xs}, {"logits", batch}};
    for (uint32_t p = 0; p < split.parts; ++p) args.push_back({"table" + std::to_string(p), parts[p]});
    g.dispatch(batched, args, rt::push(tokens, stride), rt::Grid{ops::lm_head_batch_workgroups(t, vocab)});
    for (uint32_t tok = 0; tok < tokens; ++tok) {
      alone.push_back(output(vocab * 4, "logits alone"));
      std::vector<rt::Arg> one = {{"x", xs.slice(uint64_t(tok) * dim * 4, uint64_t(dim) * 4)}, {"logits", alone.back()}};
      for (uint32_t p = 0; p < split.parts; ++p) one.push_back({"table" + std::to_string(p), parts[p]});
      g.dispatch(single, one, rt::push(), rt::Grid{ops::lm_head_workgroups(t, vocab)});
    }
    g.submit_and_wait();
    const auto got = batch.download<float>();
    for (uint32_t tok = 0; tok < tokens; ++tok) {
      const auto want = alone[tok].download<float>();
      for (uint32_t r = 0; r < vocab; ++r) ASSERT_EQ(got[size_t(tok) * stride + r], want[r]) << "token " << tok << " row " << r;
    }
  }
};

TEST_F(LmHeadBatch, EveryTokensLogitsAreLmHeadsForThatTokenAlone) {
  check(1000, 256, 1, target());
  check(1000, 256, 11, target());
  check(77, 2560, 3, target());  // fewer rows than one workgroup's
  ops::OpTarget t = target();
  t.max_storage_buffer_range = 300 * 512 + 100;  // 4 parts of 300 rows
  check(1000, 256, 5, t);
}

}  // namespace
}  // namespace bdsl::test
