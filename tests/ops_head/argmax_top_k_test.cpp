// argmax against golden::argmax and top_k against a std::partial_sort with the same order
// (value descending, ties by the lower index): indices exact, values bit for bit (only copied).
#include <algorithm>
#include <numeric>

#include "golden/reference_model.h"
#include "matrix_test.h"
#include "ops/head/argmax.h"
#include "ops/head/top_k.h"

namespace bdsl::test {
namespace {

class Sampling : public OpsMatrix {
 protected:
  uint32_t argmax(const std::vector<float>& values) {
    const auto n = static_cast<uint32_t>(values.size());
    const ops::ArgmaxPlan plan = ops::argmax_plan(target(), n);
    rt::Buffer vb = buffer_of(values, "values");
    rt::Buffer pv = output(plan.groups * 4, "part_values"), pi = output(plan.groups * 4, "part_indices");
    rt::Buffer token = output(4, "token");
    rt::Pipeline partial = pipeline(ops::argmax_partial(target(), n)), final = pipeline(ops::argmax_final(target(), n));
    rt::Graph g(ctx());
    g.dispatch(partial, {vb, pv, pi}, rt::Grid{plan.groups});
    g.dispatch(final, {pv, pi, token}, rt::Grid{1});
    g.submit_and_wait();
    return token.download<uint32_t>()[0];
  }

  void check_top_k(const std::vector<float>& values, uint32_t k, const ops::OpTarget& t) {
    const auto n = static_cast<uint32_t>(values.size());
    SCOPED_TRACE(testing::Message() << "n " << n << " k " << k);
    const ops::TopKPlan plan = ops::top_k_plan(t, n, k);
    rt::Buffer vb = buffer_of(values, "values");
    rt::Buffer pv = output(plan.groups * k * 4, "part_values"), pi = output(plan.groups * k * 4, "part_indices");
    rt::Buffer tv = output(k * 4, "top_values"), ti = output(k * 4, "top_indices");
    rt::Pipeline partial = pipeline(ops::top_k_partial(t, n, k)), merge = pipeline(ops::top_k_merge(t, n, k));
    rt::Graph g(ctx());
    g.dispatch(partial, {vb, pv, pi}, rt::Grid{plan.groups});
    g.dispatch(merge, {pv, pi, tv, ti}, rt::Grid{1});
    g.submit_and_wait();
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](uint32_t a, uint32_t b) {
      return values[a] > values[b] || (values[a] == values[b] && a < b);
    });
    const auto got_v = tv.download<float>();
    const auto got_i = ti.download<uint32_t>();
    for (uint32_t r = 0; r < k; ++r) {
      ASSERT_EQ(got_i[r], order[r]) << "rank " << r;
      ASSERT_EQ(got_v[r], values[order[r]]) << "rank " << r;
    }
  }
};

TEST_F(Sampling, ArgmaxMatchesGoldenOverVocabSizes) {
  for (uint32_t n : {1u, 7u, 1000u, 5000u, 128256u}) {
    const auto v = random_floats(n, n, 5.0f);
    EXPECT_EQ(argmax(v), uint32_t(golden::argmax(v))) << n;
  }
}

TEST_F(Sampling, ArgmaxTakesTheLowestIndexOnTies) {
  std::vector<float> v(128256, -1.0f);
  v[90000] = 3.0f;
  v[70001] = 3.0f;  // another workgroup, lower index
  v[70003] = 3.0f;  // the same workgroup, higher index
  v[128255] = 3.0f;
  EXPECT_EQ(argmax(v), 70001u);
  EXPECT_EQ(argmax(std::vector<float>(3000, 0.5f)), 0u);  // all equal
  std::vector<float> inf(3000, -INFINITY);
  inf[2999] = -1e30f;
  EXPECT_EQ(argmax(inf), 2999u);
  EXPECT_EQ(argmax(std::vector<float>(3000, -INFINITY)), 0u);
}

// The decode graph's argmax_final moves the step state on to its choice: the next replay decodes
// it at the next position, and generated[pos] keeps it for the host; past the context it writes
// only the step state.
TEST_F(Sampling, ArgmaxFinalAdvancesTheStepState) {
  const uint32_t n = 5000, context = 8;
  const auto values = random_floats(n, 11, 5.0f);
  const uint32_t want = uint32_t(golden::argmax(values));
  const ops::ArgmaxPlan plan = ops::argmax_plan(target(), n);
  rt::Buffer vb = buffer_of(values, "values");
  rt::Buffer pv = output(plan.groups * 4, "part_values"), pi = output(plan.groups * 4, "part_indices");
  rt::Buffer token = output(4, "token");
  rt::Buffer step(ctx(), 16, {true, "step"});
  rt::Buffer generated(ctx(), context * 4, {true, "generated"});
  rt::Pipeline partial = pipeline(ops::argmax_partial(target(), n));
  rt::Pipeline final = pipeline(ops::argmax_final(target(), n, context));
  rt::Graph g(ctx());
  g.dispatch(partial, {vb, pv, pi}, rt::Grid{plan.groups});
  g.dispatch(final, {pv, pi, token, step, generated}, rt::Grid{1});
  for (uint32_t pos : {5u, context - 1, context}) {
    generated.upload(std::vector<uint32_t>(context, 77u));
    step.upload(std::vector<uint32_t>{3u, pos, 0u, 9u});
    g.submit_and_wait();
    EXPECT_EQ(token.download<uint32_t>()[0], want);
    EXPECT_EQ(step.download<uint32_t>(), (std::vector<uint32_t>{want, pos + 1, 0u, 10u})) << "pos " << pos;
    std::vector<uint32_t> expect(context, 77u);
    if (pos < context) expect[pos] = want;
    EXPECT_EQ(generated.download<uint32_t>(), expect) << "pos " << pos;
  }
}

TEST_F(Sampling, TopKSortedDescendingOverVocabSizes) {
  const ops::OpTarget t = target();
  check_top_k(random_floats(128256, 1), 128, t);
  check_top_k(random_floats(128256, 2), 40, t);
  check_top_k(random_floats(5000, 3), 1, t);
  check_top_k(random_floats(100, 4), 100, t);  // k = n, one partial workgroup, padded window
  check_top_k(random_floats(3, 5), 2, t);
}

TEST_F(Sampling, TopKBreaksTiesByLowerIndex) {
  // Few distinct values: every rank is decided by the index order.
  std::vector<float> v(20000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 7919) % 5);
  check_top_k(v, 128, target());
  check_top_k(std::vector<float>(9000, 1.0f), 64, target());
}

// A 16 KiB shared-memory target: a window of 2048, so 63 partial workgroups and a merge of five
// rounds (keep 128, refill 1920) instead of one.
TEST_F(Sampling, TopKMergesInSeveralRoundsWithASmallWindow) {
  ops::OpTarget t = target();
  t.max_shared_bytes = 16384;
  const ops::TopKPlan plan = ops::top_k_plan(t, 128256, 128);
  EXPECT_EQ(plan.chunk, 2048u);
  EXPECT_EQ(plan.rounds, 5u);
  check_top_k(random_floats(128256, 6), 128, t);
}

// Many rows of values in one buffer (a padded stride apart), one dispatch per pass for all rows:
// each row's argmax and top k are what the one-row kernels give it alone.
TEST_F(Sampling, RowsGiveEachRowItsOwnArgmaxAndTopK) {
  const uint32_t n = 5000, rows = 5, stride = 5008, k = 16;
  std::vector<float> values(size_t(rows) * stride, 1e30f);  // the padding would win if it were read
  for (uint32_t r = 0; r < rows; ++r) {
    const auto row = random_floats(n, 100 + r, 5.0f);
    std::copy(row.begin(), row.end(), values.begin() + size_t(r) * stride);
  }
  const ops::ArgmaxPlan ap = ops::argmax_plan(target(), n);
  const ops::TopKPlan tp = ops::top_k_plan(target(), n, k);
  rt::Buffer vb = buffer_of(values, "values");
  rt::Buffer apv = output(4ull * ap.groups * rows, "argmax part values"), api = output(4ull * ap.groups * rows, "argmax part indices");
  rt::Buffer tokens = output(4 * rows, "tokens");
  rt::Buffer tpv = output(4ull * tp.groups * k * rows, "top part values"), tpi = output(4ull * tp.groups * k * rows, "top part indices");
  rt::Buffer tv = output(4ull * k * rows, "top values"), ti = output(4ull * k * rows, "top indices");
  rt::Pipeline a1 = pipeline(ops::argmax_partial(target(), n, true)), a2 = pipeline(ops::argmax_final(target(), n, 0, true));
  rt::Pipeline t1 = pipeline(ops::top_k_partial(target(), n, k, true)), t2 = pipeline(ops::top_k_merge(target(), n, k, true));
  rt::Graph g(ctx());
  g.dispatch(a1, {{"values", vb}, {"part_values", apv}, {"part_indices", api}}, rt::push(stride), rt::Grid{ap.groups, rows});
  g.dispatch(t1, {{"values", vb}, {"part_values", tpv}, {"part_indices", tpi}}, rt::push(stride), rt::Grid{tp.groups, rows});
  g.dispatch(a2, {{"part_values", apv}, {"part_indices", api}, {"token", tokens}}, rt::push(), rt::Grid{1, rows});
  g.dispatch(t2, {{"part_values", tpv}, {"part_indices", tpi}, {"top_values", tv}, {"top_indices", ti}}, rt::push(),
             rt::Grid{1, rows});
  g.submit_and_wait();
  const auto got_tokens = tokens.download<uint32_t>();
  const auto got_v = tv.download<float>();
  const auto got_i = ti.download<uint32_t>();
  for (uint32_t r = 0; r < rows; ++r) {
    SCOPED_TRACE(testing::Message() << "row " << r);
    const std::vector<float> row(values.begin() + size_t(r) * stride, values.begin() + size_t(r) * stride + n);
    EXPECT_EQ(got_tokens[r], argmax(row));
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](uint32_t a, uint32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (uint32_t j = 0; j < k; ++j) {
      ASSERT_EQ(got_i[r * k + j], order[j]) << "rank " << j;
      ASSERT_EQ(got_v[r * k + j], row[order[j]]) << "rank " << j;
    }
  }
}

TEST_F(Sampling, TopKRefusesKOutOfRange) {
  EXPECT_THROW(ops::top_k_plan(target(), 100, 0), std::invalid_argument);
  EXPECT_THROW(ops::top_k_plan(target(), 100, 129), std::invalid_argument);
  EXPECT_THROW(ops::top_k_plan(target(), 10, 11), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::test
