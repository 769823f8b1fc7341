// The batched prompt path of BitNetModel: one recording per block length (with or without the
// head, attention on tensor cores or not), replayed for every such block. Per layer:
// norm+quantize, QKV, RoPE + KV write, attention over the block, norm+quantize, attn_output (+
// residual), norm+quantize, gate/up, norm+quantize, ffn_down (+ residual); then, in the block that
// ends a prefill(), the last token's row goes through the decode graph's tail (norm, LM head,
// argmax). fill_cache() and the blocks before a prompt's last record no tail: the F16 head is
// not read (on a CPU device its pages then stay out of memory).
// QKV and gate/up are one dispatch each, or one per tensor side by side (prefill_pipelines.h).
#include <fmt/format.h>

#include "models/bitnet/activations.h"
#include "ops/attention.h"
#include "ops/common.h"
#include "ops/ternary.h"

namespace bdsl::bitnet {

const PrefillPipelines& BitNetModel::prefill_pipelines() {
  const auto& p = *pipelines_;
  if (!prefill_pipelines_)
    prefill_pipelines_ = std::make_unique<PrefillPipelines>(ctx_, config_, p.target, p.split.rows_per_part, p.split.parts,
                                                            options_.prefill_projections, options_.tensor_core_attention);
  return *prefill_pipelines_;
}

std::unique_ptr<BitNetModel::PrefillBlock> BitNetModel::make_prefill_buffers() {
  const auto& c = config_;
  const auto& p = *pipelines_;
  const auto& d = p.dims;
  const auto& pp = prefill_pipelines();
  auto b = std::make_unique<PrefillBlock>();
  const uint32_t n = b->capacity = std::min(kMaxPrefillBlock, c.context_length);
  auto f32 = [&](uint64_t count, const char* name) { return rt::Buffer(ctx_, count * 4, {.name = name, .holds = ScalarKind::F32}); };
  b->tokens = rt::Buffer(ctx_, n * 4ull,
                         {.host_visible = true, .name = "prefill tokens", .gpu_reads_often = true, .holds = ScalarKind::U32});
  b->x = f32(uint64_t{n} * c.dim, "prefill x");
  b->q8 = rt::Buffer(ctx_, uint64_t{n} * std::max(c.dim, c.ffn_dim), {false, "prefill int8 activations"});
  // Each token's scale and sum as raw words (the quantizer writes them as u32).
  b->act = rt::Buffer(ctx_, 8ull * n, {.name = "prefill activation scales", .holds = ScalarKind::U32});
  b->q = f32(uint64_t{n} * d.q_width(), "prefill q");
  b->k = f32(uint64_t{n} * d.kv_width(), "prefill k");
  b->v = f32(uint64_t{n} * d.kv_width(), "prefill v");
  b->attn = f32(uint64_t{n} * d.q_width(), "prefill attention out");
  const bool separate = pp.projections.gate_up_apart() || (pp.short_projections && pp.short_projections->gate_up_apart());
  b->ffn = f32(uint64_t{n} * c.ffn_dim, separate ? "prefill gate or ffn" : "prefill ffn");
  if (separate) b->up = f32(uint64_t{n} * c.ffn_dim, "prefill up");
  // The attention scratch of the longest block: a shorter one uses a prefix.
  const auto& al = pp.attention_layout;
  uint64_t partials = 4, counters = 4;
  for (uint32_t len = 1; len <= n; ++len) {
    partials = std::max(partials, ops::attention_prefill_partials_bytes(d, al, len, ops::attention_prefill_chunks(d, al, len)));
    counters = std::max(counters, ops::attention_prefill_counters_bytes(d, al, len));
    if (pp.attention_coopmat) {  // the tensor-core kernel's, on the same scratch
      const auto& t = pipelines_->target;
      const uint32_t chunks = ops::attention_prefill_coopmat_chunks(t, len, c.context_length - len);  // the most, last
      partials = std::max(partials, ops::attention_prefill_coopmat_partials_bytes(d, len, chunks));
      counters = std::max(counters, ops::attention_prefill_coopmat_counters_bytes(d, len));
    }
  }
  b->partials = rt::Buffer(ctx_, partials, {.name = "prefill partials", .holds = ScalarKind::F32});
  b->counters = rt::Buffer(ctx_, counters, {.name = "prefill counters", .holds = ScalarKind::U32});
  b->counters.fill(0);
  return b;
}

std::unique_ptr<rt::Graph> BitNetModel::record_prefill_block(uint32_t n, bool head, uint32_t coop_chunks) {
  const auto& c = config_;
  const auto& p = *pipelines_;
  const auto& pp = prefill_pipelines();
  PrefillBlock* b = prefill_.get();
  auto graph = std::make_unique<rt::Graph>(ctx_, rt::GraphOptions{options_.timestamps, fmt::format("prefill {}{}", n, head ? "" : " (no head)")});
  rt::Graph& g = *graph;
  auto& a = *act_;
  std::vector<rt::Arg> embedding = {{"tokens", b->tokens}, {"x", b->x}};
  for (size_t i = 0; i < weights_.token_embd.parts.size(); ++i)
    embedding.push_back({"table_" + std::to_string(i), weights_.token_embd.parts[i]});
  pp.embedding.dispatch(g, embedding, rt::push(n), n);
  const BlockProjections& proj = pp.projections_for(n);
  const BlockActivations acts{b->x, b->q8, b->act, b->q, b->k, b->v, b->attn, b->ffn, proj.gate_up_apart() ? &b->up : nullptr};
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    record_block_layer(g, proj, pp.norm_quantize, weights_.layers[l], acts, n, c.rms_norm_eps, [&] {
      p.rope_kv.dispatch(g, {{"step", a.step}, {"rope_table", a.rope_table}, {"q", b->q}, {"k", b->k}, {"v", b->v},
                             {"k_cache", a.k_cache[l]}, {"v_cache", a.v_cache[l]}},
                         rt::push(n), n);
      const std::initializer_list<rt::Arg> args{{"step", a.step},         {"q", b->q},
                                                {"k_cache", a.k_cache[l]}, {"v_cache", a.v_cache[l]},
                                                {"partials", b->partials}, {"counters", b->counters},
                                                {"out", b->attn}};
      if (coop_chunks == 0) {
        pp.attention.dispatch(g, args, rt::push(n), n);
      } else {
        const auto grid = ops::attention_prefill_coopmat_grid(pipelines_->target, pipelines_->dims, n, coop_chunks);
        g.dispatch(pp.attention_coopmat->pipeline, args, rt::push(n), rt::Grid{grid[0], grid[1], grid[2]});
      }
    });
  }
  if (head) {  // the last token continues through the decode graph's tail
    g.copy(b->x.slice(uint64_t{n - 1} * c.dim * 4, c.dim * 4ull), a.x);
    record_tail(g);
  }
  g.finish();
  return graph;
}

StepOutput BitNetModel::prefill(std::span<const int32_t> tokens, uint32_t pos) {
  run_prefill(tokens, pos, true);
  return read_step_output();
}

void BitNetModel::fill_cache(std::span<const int32_t> tokens, uint32_t pos) { run_prefill(tokens, pos, false); }

void BitNetModel::run_prefill(std::span<const int32_t> tokens, uint32_t pos, bool head) {
  if (tokens.empty()) throw std::invalid_argument("prefill: no tokens");
  check_tokens(tokens, pos);
  write_history(tokens, pos);
  for (size_t first = 0; first < tokens.size(); first += kMaxPrefillBlock) {
    const auto block = tokens.subspan(first, std::min<size_t>(kMaxPrefillBlock, tokens.size() - first));
    const auto n = uint32_t(block.size());
    const bool block_head = head && first + n == tokens.size();  // only the last block's last token is chosen from
    const auto& pp = prefill_pipelines();
    const uint32_t block_pos = pos + uint32_t(first);
    const uint32_t coop_chunks =
        pp.attention_coopmat && ops::attention_prefill_coopmat_pays(pipelines_->target, pipelines_->dims, n, block_pos)
            ? ops::attention_prefill_coopmat_chunks(pipelines_->target, n, block_pos)
            : 0;
    if (!prefill_) prefill_ = make_prefill_buffers();
    auto& graphs = prefill_->graphs;
    auto it = graphs.find({n, block_head, coop_chunks});
    if (it == graphs.end()) {
      if (graphs.size() >= PrefillBlock::kMaxGraphs)  // the least recently used recording goes
        graphs.erase(std::min_element(graphs.begin(), graphs.end(), [](const auto& a, const auto& b) {
          return a.second.last_used < b.second.last_used;
        }));
      it = graphs.emplace(std::tuple{n, block_head, coop_chunks},
                          PrefillBlock::Recorded{record_prefill_block(n, block_head, coop_chunks), 0})
               .first;
    }
    it->second.last_used = ++prefill_->uses;
    prefill_->last = it->second.graph.get();
    prefill_->tokens.upload_bytes(std::as_bytes(block));
    write_step_state(0, pos + uint32_t(first));
    it->second.graph->submit_and_wait();
  }
}

void BitNetModel::for_logit_rows(std::span<const int32_t> tokens, uint32_t pos, RowsMode mode,
                                 const std::function<void(uint32_t, uint32_t)>& before,
                                 const std::function<void(uint32_t, uint32_t)>& after) {
  if (tokens.empty()) throw std::invalid_argument("prefill: no tokens");
  check_tokens(tokens, pos);
  const auto& c = config_;
  const auto& p = *pipelines_;
  for (size_t first = 0; first < tokens.size(); first += kMaxPrefillBlock) {
    const auto n = uint32_t(std::min<size_t>(kMaxPrefillBlock, tokens.size() - first));
    prefill(tokens.subspan(first, n), pos + uint32_t(first));  // leaves the block's x in prefill_->x
    PrefillBlock& b = *prefill_;
    if (!b.lm_head_rows) {
      b.lm_head_rows.emplace(ops::make_pipeline(ctx_, ops::plan_lm_head_batch(p.target, c.vocab_size, c.dim, p.split.rows_per_part)));
      const uint64_t align = std::max<uint64_t>(ctx_.info().min_storage_buffer_offset_alignment, 4);
      b.logit_stride = (4ull * c.vocab_size + align - 1) / align * align / 4;
      b.xn_rows = rt::Buffer(ctx_, 4ull * PrefillBlock::kLogitRows * c.dim, {.name = "prefill normed rows", .holds = ScalarKind::F32});
      // In device memory: the head writes them at the device's speed (host-visible memory took
      // ~7 ms a group of rows on an H200), then a copy moves what the host reads.
      b.logit_rows = rt::Buffer(ctx_, 4ull * PrefillBlock::kLogitRows * b.logit_stride, {.name = "prefill logits", .holds = ScalarKind::F32});
      b.logit_staging = rt::Buffer(ctx_, 4ull * PrefillBlock::kLogitRows * b.logit_stride,
                                   {.host_visible = true, .name = "prefill logits' staging", .holds = ScalarKind::F32});
    }
    for (uint32_t row = 0; row < n; row += PrefillBlock::kLogitRows) {
      const uint32_t rows = std::min(PrefillBlock::kLogitRows, n - row);
      auto& graph = b.logit_graphs[{row, rows, mode}];
      if (!graph) {  // each token's logits exactly as the decode graph's lm_head computes them
        graph = std::make_unique<rt::Graph>(ctx_, rt::GraphOptions{false, fmt::format("prefill logits {}+{}", row, rows)});
        p.output_norm.dispatch(*graph, {{"x", b.x.slice(4ull * row * c.dim, 4ull * rows * c.dim)}, {"weight", weights_.output_norm},
                                        {"out", b.xn_rows}},
                               rt::push(c.rms_norm_eps), rows);
        std::vector<rt::Arg> head = {{"x", b.xn_rows}, {"logits", b.logit_rows}};
        append_parts(head, "table", weights_.lm_head());
        b.lm_head_rows->dispatch(*graph, head, rt::push(rows, uint32_t(b.logit_stride)));
        const uint64_t row_bytes = 4ull * b.logit_stride;
        if (mode == RowsMode::Logits) {
          graph->copy(b.logit_rows.slice(0, rows * row_bytes), b.logit_staging.slice(0, rows * row_bytes));
        } else {  // the scores, and the last row's logits (the prompt's last row's are its output)
          record_row_scoring(*graph, rows, mode);
          graph->copy(b.logit_rows.slice((rows - 1) * row_bytes, row_bytes), b.logit_staging.slice(0, row_bytes));
        }
        graph->finish();
      }
      before(uint32_t(first) + row, rows);
      graph->submit_and_wait();
      after(uint32_t(first) + row, rows);
    }
  }
}

void BitNetModel::prefill_all_logits(std::span<const int32_t> tokens, uint32_t pos,
                                     const std::function<void(uint32_t, std::span<const float>)>& on_row) {
  for_logit_rows(tokens, pos, RowsMode::Logits, [](uint32_t, uint32_t) {}, [&](uint32_t first, uint32_t rows) {
    const PrefillBlock& b = *prefill_;
    for (uint32_t t = 0; t < rows; ++t) on_row(first + t, b.logit_staging.download<float>(4ull * t * b.logit_stride, config_.vocab_size));
  });
}

std::vector<double> BitNetModel::prefill_timestamps_ns() const {
  return prefill_ && prefill_->last ? prefill_->last->timestamps_ns() : std::vector<double>{};
}
double BitNetModel::prefill_gpu_span_ns() const { return prefill_ && prefill_->last ? prefill_->last->span_ns() : 0.0; }
std::vector<std::string> BitNetModel::prefill_operation_names() const {
  return prefill_ && prefill_->last ? prefill_->last->operation_names() : std::vector<std::string>{};
}
rt::GraphStats BitNetModel::prefill_stats() const {
  return prefill_ && prefill_->last ? prefill_->last->stats() : rt::GraphStats{};
}

}  // namespace bdsl::bitnet
