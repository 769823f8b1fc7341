// BitNetModel::prefill_scored (bitnet_model.h): a prompt's own tokens scored on the device from
// the prefill's logit rows, as a batched step scores its outputs (ops/head/token_logprobs.h).
#include <fmt/format.h>

#include <stdexcept>
#include <vector>

#include "models/bitnet/activations.h"
#include "models/bitnet/token_logprob_row.h"
#include "ops/head.h"

namespace bdsl::bitnet {

namespace {
constexpr uint32_t kTop = models::kMaxTopLogprobs;  // every scored row's alternatives; a request takes its first few
}  // namespace

void BitNetModel::record_row_scoring(rt::Graph& g, uint32_t rows, RowsMode mode) {
  PrefillBlock& b = *prefill_;
  const auto& t = pipelines_->target;
  const uint32_t vocab = config_.vocab_size, capacity = PrefillBlock::kLogitRows;
  if (!b.score_logprobs) {  // the pipelines and buffers at first use
    const uint32_t top = std::min(kTop, vocab);
    b.score_top_partial.emplace(ops::make_pipeline(ctx_, ops::plan_top_k_partial(t, vocab, top, true)));
    b.score_top_merge.emplace(ops::make_pipeline(ctx_, ops::plan_top_k_merge(t, vocab, top, true)));
    b.score_logprobs.emplace(ops::make_pipeline(ctx_, ops::plan_token_logprobs(t, vocab, top, top, capacity, top)));
    b.score_logprobs_bare.emplace(ops::make_pipeline(ctx_, ops::plan_token_logprobs(t, vocab, 0, 0, capacity, top)));
    auto make = [&](uint64_t bytes, const char* name, ScalarKind kind, bool host = false) {
      return rt::Buffer(ctx_, bytes, {.host_visible = host, .name = name, .holds = kind});
    };
    const uint64_t groups = ops::top_k_plan(t, vocab, top).groups;
    b.score_counter = make(4, "prompt scores' parity", ScalarKind::U32, true);
    b.score_counter.upload(std::vector<uint32_t>{0});
    b.score_next = make(4ull * capacity, "prompt scores' tokens", ScalarKind::U32, true);
    b.score_select = make(4ull * capacity, "prompt scores' rows", ScalarKind::U32, true);
    b.score_part_values = make(4ull * groups * top * capacity, "prompt scores' top-k partial values", ScalarKind::F32);
    b.score_part_indices = make(4ull * groups * top * capacity, "prompt scores' top-k partial indices", ScalarKind::U32);
    b.score_top_values = make(4ull * top * capacity, "prompt scores' top-k values", ScalarKind::F32);
    b.score_top_indices = make(4ull * top * capacity, "prompt scores' top-k indices", ScalarKind::U32);
    b.score_out = make(2 * 4ull * ops::token_logprob_words(top) * capacity, "prompt scores", ScalarKind::U32, true);
  }
  const auto stride = rt::push(uint32_t(b.logit_stride));
  if (mode == RowsMode::ScoredTop) {
    b.score_top_partial->dispatch(g, {{"values", b.logit_rows}, {"part_values", b.score_part_values},
                                      {"part_indices", b.score_part_indices}},
                                  stride, rows);
    b.score_top_merge->dispatch(g, {{"part_values", b.score_part_values}, {"part_indices", b.score_part_indices},
                                    {"top_values", b.score_top_values}, {"top_indices", b.score_top_indices}},
                                {}, rows);
    b.score_logprobs->dispatch(g, {{"counter", b.score_counter}, {"logits", b.logit_rows}, {"sources", b.score_next},
                                   {"select", b.score_select}, {"top_values", b.score_top_values},
                                   {"top_indices", b.score_top_indices}, {"out", b.score_out}},
                               stride, rows);
  } else {
    b.score_logprobs_bare->dispatch(g, {{"counter", b.score_counter}, {"logits", b.logit_rows}, {"sources", b.score_next},
                                        {"select", b.score_select}, {"out", b.score_out}},
                                    stride, rows);
  }
}

models::StepOutput BitNetModel::prefill_scored(std::span<const int32_t> tokens, uint32_t pos, const models::PromptScoring& scoring) {
  models::check_scoring(scoring, tokens.size(), config_.vocab_size);
  const uint32_t top = std::min(scoring.top, config_.vocab_size);
  const uint32_t words = ops::token_logprob_words(std::min(kTop, config_.vocab_size));
  std::vector<float> last;
  for_logit_rows(
      tokens, pos, top ? RowsMode::ScoredTop : RowsMode::Scored,
      [&](uint32_t first, uint32_t rows) {
        PrefillBlock& b = *prefill_;
        std::vector<uint32_t> next(rows), select(rows);
        for (uint32_t r = 0; r < rows; ++r) {
          const int32_t id = scoring.next[first + r];
          next[r] = id < 0 ? 0 : uint32_t(id);
          select[r] = id < 0 ? ops::kNoLogprobs : r;
        }
        b.score_next.upload(next);
        b.score_select.upload(select);
      },
      [&](uint32_t first, uint32_t rows) {
        const PrefillBlock& b = *prefill_;
        const auto out = b.score_out.download<uint32_t>(0, size_t{rows} * words);  // parity 0's half
        for (uint32_t r = 0; r < rows; ++r) {
          if (scoring.next[first + r] < 0) continue;
          scoring.on_scored(first + r, token_logprob_row(std::span(out).subspan(size_t{r} * words, words), top,
                                                         scoring.next[first + r], fmt::format("prompt row {}", first + r)));
        }
        if (first + rows == tokens.size())
          last = b.logit_staging.download<float>(0, config_.vocab_size);  // the group's last row
      });
  return models::output_of_logits(std::move(last), top_k());
}

}  // namespace bdsl::bitnet
