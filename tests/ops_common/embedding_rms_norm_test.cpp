// embedding_lookup and rms_norm against the CPU reference on the device.
#include <cmath>

#include "golden/reference_ops.h"
#include "ops/common/embedding_lookup.h"
#include "ops/common/parity_copy.h"
#include "ops/common/rms_norm.h"
#include "ops_test_util.h"

namespace bdsl::test {
namespace {

class EmbeddingAndNorm : public OpsTest {
 protected:
  // A [vocab, dim] F16 table as `parts` buffers of rows_per_part rows, and its f32 values.
  struct Table {
    std::vector<float> values;
    std::vector<rt::Buffer> parts;
  };
  Table table(uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
    Table t;
    t.values = f16_rounded(random_floats(size_t(vocab) * dim, 7 + dim, 4.0f));
    for (uint32_t first = 0; first < vocab; first += rows_per_part) {
      const uint32_t rows = std::min(rows_per_part, vocab - first);
      std::vector<float> part(t.values.begin() + size_t(first) * dim, t.values.begin() + size_t(first + rows) * dim);
      if (part.size() % 2) part.push_back(0.0f);  // the last word of an odd-sized part
      t.parts.push_back(buffer_of(pack_f16(part), "table"));
    }
    return t;
  }
};

// Widening F16 to f32 is exact, so the row must come back bit for bit.
TEST_F(EmbeddingAndNorm, LookupReturnsTheTokensRowExactly) {
  struct Case { uint32_t vocab, dim, rows_per_part; };
  for (const Case c : {Case{37, 2560, 37}, Case{37, 512, 16}, Case{21, 77, 10}}) {
    Table t = table(c.vocab, c.dim, c.rows_per_part);
    const ops::EmbeddingShape shape{c.dim, c.rows_per_part, uint32_t(t.parts.size())};
    rt::Pipeline p = pipeline(ops::embedding_lookup(target(), shape));
    for (uint32_t token : {0u, c.rows_per_part - 1, c.rows_per_part % c.vocab, c.vocab - 1}) {
      rt::Buffer step = step_buffer(token, 5), x(ctx(), c.dim * 4, {false, "x"});
      std::vector<rt::BufferSlice> bindings{step};
      for (auto& b : t.parts) bindings.emplace_back(b);
      bindings.emplace_back(x);
      rt::Graph g(ctx());
      g.dispatch(p, bindings, rt::push(), rt::Grid{(c.dim + ops::embedding_workgroup(target()) - 1) / ops::embedding_workgroup(target())});
      g.submit_and_wait();
      const auto got = x.download<float>();
      for (uint32_t j = 0; j < c.dim; ++j)
        ASSERT_EQ(got[j], t.values[size_t(token) * c.dim + j]) << "dim " << c.dim << " token " << token << " j " << j;
    }
  }
}

TEST_F(EmbeddingAndNorm, BatchLookupFillsOneRowPerToken) {
  const uint32_t vocab = 30, dim = 513, rows_per_part = 12;
  Table t = table(vocab, dim, rows_per_part);
  const ops::EmbeddingShape shape{dim, rows_per_part, uint32_t(t.parts.size())};
  const std::vector<uint32_t> tokens{3, 29, 12, 11, 0, 24, 3};
  const uint32_t n = uint32_t(tokens.size());
  rt::Buffer ids = buffer_of(tokens, "tokens"), x(ctx(), size_t(n) * dim * 4, {false, "x"});
  std::vector<rt::BufferSlice> bindings{ids};
  for (auto& b : t.parts) bindings.emplace_back(b);
  bindings.emplace_back(x);
  const uint32_t wg = ops::embedding_workgroup(target());
  run(ops::embedding_lookup_batch(target(), shape), bindings, rt::push(n), rt::Grid{(dim + wg - 1) / wg, n});
  const auto got = x.download<float>();
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t j = 0; j < dim; ++j)
      ASSERT_EQ(got[size_t(r) * dim + j], t.values[size_t(tokens[r]) * dim + j]) << "row " << r << " j " << j;
}

// Tokens fed from other buffers (a pipelined step's, which the step before wrote): each row the
// named source's element, a fed id outside the vocabulary taken as 0, the plain ids as they are.
TEST_F(EmbeddingAndNorm, FedLookupTakesEachRowsTokenFromItsSource) {
  const uint32_t vocab = 29, dim = 258, rows_per_part = 12;
  Table t = table(vocab, dim, rows_per_part);
  const ops::EmbeddingShape shape{dim, rows_per_part, uint32_t(t.parts.size())};
  const std::vector<uint32_t> source0{7, 28, 3}, source1{19, 0xffffffffu, 29}, source2{1};
  const std::vector<uint32_t> words_of{ops::fed_token_word(1, 0), 5, ops::fed_token_word(0, 1), ops::fed_token_word(2, 0),
                                    ops::fed_token_word(1, 1), 28, ops::fed_token_word(1, 2), ops::fed_token_word(0, 2)};
  const std::vector<uint32_t> want{19, 5, 28, 1, 0, 28, 0, 3};
  const uint32_t n = uint32_t(words_of.size());
  rt::Buffer ids = buffer_of(words_of, "tokens"), x(ctx(), size_t(n) * dim * 4, {false, "x"});
  rt::Buffer fed0 = buffer_of(source0, "fed 0"), fed1 = buffer_of(source1, "fed 1"), fed2 = buffer_of(source2, "fed 2");
  std::vector<rt::BufferSlice> bindings{ids, fed0, fed1, fed2};
  for (auto& b : t.parts) bindings.emplace_back(b);
  bindings.emplace_back(x);
  const uint32_t wg = ops::embedding_workgroup(target());
  run(ops::embedding_lookup_fed(target(), shape, vocab, 3), bindings, rt::push(n), rt::Grid{(dim + wg - 1) / wg, n});
  const auto got = x.download<float>();
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t j = 0; j < dim; ++j)
      ASSERT_EQ(got[size_t(r) * dim + j], t.values[size_t(want[r]) * dim + j]) << "row " << r << " j " << j;
  // Staged: the same rows from the half of the staging buffer the count picks, and that half
  // copied out whole (more words than one pass of the grid).
  const uint32_t words = 3000, tokens_at = 5;
  for (uint32_t count : {4u, 9u}) {
    std::vector<uint32_t> halves(2 * words);
    for (uint32_t i = 0; i < 2 * words; ++i) halves[i] = 7 * i + 1;
    std::copy(words_of.begin(), words_of.end(), halves.begin() + (count % 2) * words + tokens_at);
    rt::Buffer counter = buffer_of(std::vector<uint32_t>{count}, "counter"), staging = buffer_of(halves, "staging");
    rt::Buffer inputs(ctx(), 4ull * words, {true, "inputs"}), xs(ctx(), size_t(n) * dim * 4, {false, "x"});
    std::vector<rt::BufferSlice> b{counter, staging, fed0, fed1, fed2};
    for (auto& p : t.parts) b.emplace_back(p);
    b.emplace_back(xs);
    b.emplace_back(inputs);
    run(ops::embedding_lookup_fed(target(), shape, vocab, 3, ops::StagedInputs{words, tokens_at}), b, rt::push(n),
        rt::Grid{(dim + wg - 1) / wg, n});
    const auto staged_x = xs.download<float>();
    for (uint32_t r = 0; r < n; ++r)
      for (uint32_t j = 0; j < dim; ++j)
        ASSERT_EQ(staged_x[size_t(r) * dim + j], t.values[size_t(want[r]) * dim + j]) << "count " << count << " row " << r << " j " << j;
    EXPECT_TRUE(std::equal(halves.begin() + (count % 2) * words, halves.begin() + (count % 2 + 1) * words,
                           inputs.download<uint32_t>().begin()))
        << "count " << count;
  }
  EXPECT_THROW(ops::embedding_lookup_fed(target(), shape, 37, 3), std::invalid_argument);
  EXPECT_THROW(ops::embedding_lookup_fed(target(), shape, vocab, 0), std::invalid_argument);
}

// A replayed step's staging: the half the counter picks, in and out, and the counter counted on
// only where the copy advances it (after every invocation read it: one count, whatever the words).
TEST_F(EmbeddingAndNorm, ParityCopyPicksTheHalfOfTheCountAndCountsOn) {
  const uint32_t words = 700;  // more than one pass of the workgroup
  std::vector<uint32_t> halves(2 * words);
  for (uint32_t i = 0; i < 2 * words; ++i) halves[i] = 1000000 + i;
  rt::Buffer staging = buffer_of(halves, "staging"), out(ctx(), 4ull * words, {true, "out"});
  rt::Buffer back(ctx(), 8ull * words, {true, "back"});
  back.fill(0);
  for (uint32_t count : {0u, 1u, 6u, 7u}) {
    rt::Buffer counter = buffer_of(std::vector<uint32_t>{count}, "counter");
    run(ops::parity_copy(target(), words, ops::ParityCopy::FromHalf), {counter, staging, out}, rt::push(), rt::Grid{1});
    const auto got = out.download<uint32_t>();
    for (uint32_t i = 0; i < words; ++i) ASSERT_EQ(got[i], halves[(count % 2) * words + i]) << "count " << count << " word " << i;
    EXPECT_EQ(counter.download<uint32_t>()[0], count) << "no advance";
    run(ops::parity_copy(target(), words, ops::ParityCopy::ToHalf, true), {counter, out, back}, rt::push(), rt::Grid{1});
    const auto b = back.download<uint32_t>();
    for (uint32_t i = 0; i < words; ++i) ASSERT_EQ(b[(count % 2) * words + i], got[i]) << "count " << count << " word " << i;
    EXPECT_EQ(counter.download<uint32_t>()[0], count + 1);
  }
  EXPECT_THROW(ops::parity_copy(target(), 0, ops::ParityCopy::FromHalf), std::invalid_argument);
}

// Tolerance: the device sums the squares as strided partials and a tree, the reference in order;
// both are fp32, so the mean differs by at most ~dim * 2^-24 relative (1.5e-4 at 2560, worst
// case; typically ~sqrt(dim) * 2^-24), and the output by half that through the square root.
TEST_F(EmbeddingAndNorm, RmsNormMatchesReferencePerRow) {
  for (uint32_t dim : {2560u, 512u, 77u, 1u, 1000u}) {
    const uint32_t rows = 3;
    auto x = random_floats(size_t(rows) * dim, dim, 3.0f);
    for (uint32_t j = 0; j < dim; ++j) x[dim + j] *= 1e-3f;  // a small row: eps matters
    const auto weight = random_floats(dim, 99 + dim, 2.0f);
    const float eps = 1e-5f;
    rt::Buffer xb = buffer_of(x, "x"), wb = buffer_of(weight, "weight"), out(ctx(), x.size() * 4, {false, "out"});
    run(ops::rms_norm(target(), dim), {xb, wb, out}, rt::push(eps), rt::Grid{rows});
    const auto got = out.download<float>();
    std::vector<float> want(dim);
    for (uint32_t r = 0; r < rows; ++r) {
      golden::rms_norm(std::span(x).subspan(size_t(r) * dim, dim), weight, eps, want);
      for (uint32_t j = 0; j < dim; ++j)
        ASSERT_NEAR(got[size_t(r) * dim + j], want[j], 1e-4f * std::fabs(want[j]) + 1e-7f)
            << "dim " << dim << " row " << r << " j " << j;
    }
  }
}

// A kernel built for a larger subgroup than the device runs (a target of 4x its size) has more
// subgroups than the target says: its partial sums still each get a slot, so the output is the
// same as the kernel built for the device's own size.
TEST_F(EmbeddingAndNorm, RmsNormOnSmallerSubgroupsThanItsTarget) {
  const uint32_t dim = 2560, rows = 2;
  const auto x = random_floats(size_t(rows) * dim, 5, 3.0f), weight = random_floats(dim, 6, 2.0f);
  ops::OpTarget larger = target();
  larger.subgroup_size = target().subgroup_size * 4;
  larger.subgroup_size_fixed = false;
  ASSERT_EQ(ops::rms_norm_workgroup(larger), ops::rms_norm_workgroup(target()));
  rt::Buffer xb = buffer_of(x, "x"), wb = buffer_of(weight, "weight");
  std::vector<std::vector<uint32_t>> got;
  for (const ops::OpTarget& t : {target(), larger}) {
    rt::Buffer out(ctx(), x.size() * 4, {false, "out"});
    run(ops::rms_norm(t, dim), {xb, wb, out}, rt::push(1e-5f), rt::Grid{rows});
    got.push_back(out.download<uint32_t>());
  }
  EXPECT_EQ(got[0], got[1]);
}

}  // namespace
}  // namespace bdsl::test
