#include <gtest/gtest.h>

#include <cmath>

#include "golden/recorder.h"
#include "golden/reference_model.h"
#include "tests/golden/tiny_model.h"

namespace bdsl::golden {
namespace {

double rms(const MatrixF& m) {
  double s = 0;
  for (float v : m.data) s += double(v) * v;
  return std::sqrt(s / double(m.data.size()));
}

std::vector<int32_t> prompt_ids() { return test::tiny_model().tokenizer.encode("The people of the town came down", true); }

TEST(ReferenceModel, DecodeOneTokenAtATimeEqualsTheBatch) {
  const auto& tiny = test::tiny_model();
  const auto ids = prompt_ids();
  ASSERT_GE(ids.size(), 4u);
  ReferenceModel batch(tiny.weights);
  const MatrixF all = batch.forward(ids);
  ReferenceModel stepwise(tiny.weights);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const MatrixF one = stepwise.forward(std::span<const int32_t>(&ids[t], 1));
    ASSERT_EQ(one.cols, all.cols);
    for (std::size_t v = 0; v < one.cols; ++v) ASSERT_EQ(one.at(0, v), all.at(t, v)) << "position " << t << " logit " << v;
  }
  EXPECT_EQ(stepwise.n_past(), ids.size());
  // A batch after a cached prefix is the same again.
  ReferenceModel split(tiny.weights);
  split.forward(std::span<const int32_t>(ids).first(2));
  const MatrixF rest = split.forward(std::span<const int32_t>(ids).subspan(2));
  for (std::size_t v = 0; v < rest.cols; ++v) ASSERT_EQ(rest.at(rest.rows - 1, v), all.at(all.rows - 1, v));
}

TEST(ReferenceModel, ReportsEveryIntermediateWithItsShape) {
  const auto& tiny = test::tiny_model();
  const auto& c = tiny.weights.config;
  const auto ids = prompt_ids();
  ReferenceModel model(tiny.weights);
  TensorRecorder rec;
  const ForwardObserver obs = rec.observer();
  model.forward(ids, &obs);
  const std::size_t n = ids.size();
  const auto expect_shape = [&](const std::string& name, std::size_t cols) {
    ASSERT_TRUE(rec.contains(name)) << name;
    EXPECT_EQ(rec.tensor(name).rows, n) << name;
    EXPECT_EQ(rec.tensor(name).cols, cols) << name;
  };
  expect_shape("inp_embd", c.dim);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const std::string s = "-" + std::to_string(l);
    for (const char* name : {"attn_norm", "kqv_out", "attn_sub_norm", "attn_o_out", "ffn_inp", "ffn_norm",
                             "ffn_down", "l_out", "Qcur"}) {
      expect_shape(name + s, c.dim);
    }
    expect_shape("Kcur" + s, c.kv_dim());
    expect_shape("Vcur" + s, c.kv_dim());
    for (const char* name : {"ffn_gate", "ffn_up", "ffn_out", "ffn_sub_norm"}) expect_shape(name + s, c.ffn_dim);
    EXPECT_EQ(rec.accumulators("ffn_down_acc" + s).cols, c.dim);
    EXPECT_EQ(rec.accumulators("attn_k_acc" + s).cols, c.kv_dim());
  }
  expect_shape("result_norm", c.dim);
  expect_shape("result_output", c.vocab_size);
  EXPECT_EQ(rec.names().size(), 1 + 15 * c.n_layers + 2);
  EXPECT_EQ(rec.accumulator_names().size(), 7 * c.n_layers);
}

TEST(ReferenceModel, ActivationsStayInASaneRange) {
  const auto& tiny = test::tiny_model();
  ReferenceModel model(tiny.weights);
  TensorRecorder rec;
  const ForwardObserver obs = rec.observer();
  const MatrixF logits = model.forward(prompt_ids(), &obs);
  for (uint32_t l = 0; l < tiny.weights.config.n_layers; ++l) {
    const double r = rms(rec.tensor("l_out-" + std::to_string(l)));
    EXPECT_GT(r, 0.1) << "layer " << l;
    EXPECT_LT(r, 10.0) << "layer " << l;
  }
  // Logits: spread out (not all equal), not saturated, different at every position.
  for (std::size_t t = 0; t < logits.rows; ++t) {
    float lo = logits.at(t, 0), hi = lo;
    for (float v : logits.row(t)) lo = std::min(lo, v), hi = std::max(hi, v);
    EXPECT_GT(hi - lo, 5.0f) << "position " << t;
    EXPECT_LT(hi - lo, 100.0f) << "position " << t;
  }
  EXPECT_NE(argmax(logits.row(0)), argmax(logits.row(logits.rows - 1)));
}

TEST(ReferenceModel, RejectsBadTokensAndContextOverflow) {
  const auto& tiny = test::tiny_model();
  ReferenceModel model(tiny.weights);
  const int32_t bad[] = {static_cast<int32_t>(tiny.weights.config.vocab_size)};
  EXPECT_THROW(model.forward(bad), std::out_of_range);
  std::vector<int32_t> too_long(tiny.weights.config.context_length + 1, 1);
  EXPECT_THROW(model.forward(too_long), std::length_error);
}

TEST(ReferenceModel, GreedyGenerationIsDeterministic) {
  const auto& tiny = test::tiny_model();
  ReferenceModel model(tiny.weights);
  const auto ids = prompt_ids();
  const auto a = generate_greedy(model, ids, 8);
  const auto b = generate_greedy(model, ids, 8);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 8u);
}

}  // namespace
}  // namespace bdsl::golden
