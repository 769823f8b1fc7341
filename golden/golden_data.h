// Golden data: what the CPU reference computes for a synthetic model and a fixed prompt, stored
// as .npy files so GPU runs (and future versions of the reference) can be checked against it.
//
// Layout of a golden folder (e.g. golden/data/tiny/):
//   manifest.json        preset, seed, model fingerprint, config, prompt, ids, tensor list, tolerance
//   prompt.txt           the prompt text (UTF-8, no trailing newline)
//   prompt.npy           int32 [tokens]: the prompt ids, BOS first
//   <name>.npy           float32 [tokens, features]: every intermediate of the prompt pass, named as
//                        llama.cpp's eval callback names them (inp_embd, attn_norm-0, ... result_output)
//   <proj>_acc-N.npy     int32 [tokens, out features]: exact ternary accumulators (attn_q_acc-0, ...)
//   logits.npy           float32 [tokens, vocab]: the logits at every prompt position
//   continuation.npy     int32 [n]: the greedy continuation, computed one token at a time (KV cache)
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "golden/recorder.h"
#include "golden/reference_model.h"
#include "golden/synthetic_model.h"
#include "models/tokenizer/tokenizer.h"

namespace bdsl::golden {

// Bumped whenever the reference's arithmetic changes on purpose (golden data must be regenerated).
inline constexpr const char* kReferenceVersion = "bitnet-dsl reference 4";  // 2: F16 KV cache; 3: q in F16 before q.K; 4: ggml's RMSNorm scale (double sum)

// Floats must match within this fraction of the tensor's largest magnitude. The reference is IEEE
// fp32 in a fixed order (no threads change it, no FMA contraction in ISO C++ mode), so on one
// platform it reproduces bit for bit; the allowance is for another libm's expf/sin/cos (RoPE angles
// are rounded from double, so they agree almost always). Integers (ids, accumulators) are exact.
inline constexpr double kGoldenRelativeTolerance = 1e-5;

struct GoldenSpec {
  std::string preset = "tiny";
  uint64_t seed = kDefaultSyntheticSeed;
  // A model file to take instead of the synthetic preset (any shape and weight type the reference
  // reads; make_golden_for_model).
  std::filesystem::path model;
  std::string prompt;
  std::size_t n_continuation = 16;
};
// The spec the committed data was made with: the preset, the default seed, a short prompt (8
// tokens with BOS for "tiny"), 16 greedy tokens.
GoldenSpec default_golden_spec(const std::string& preset = "tiny");

struct GoldenRun {
  std::vector<int32_t> prompt_ids;
  TensorRecorder prompt_pass;  // every intermediate of the prompt as one batch
  MatrixF logits;              // [prompt tokens, vocab]
  std::vector<int32_t> continuation;
};
GoldenRun run_golden(const ReferenceWeights& weights, const models::Tokenizer& tokenizer, const GoldenSpec& spec);

// FNV-1a 64 over the file's bytes: a fingerprint that tells whether the synthetic model generator
// still makes the model the golden data came from (not a security hash).
uint64_t file_fingerprint(const std::filesystem::path& path);
// Before a validation: throws std::runtime_error, in one line that says how to get the right one,
// unless `model` is the file the golden data in `dir` was made from (its manifest's fingerprint;
// golden data whose manifest names none is accepted).
void check_golden_model(const std::filesystem::path& dir, const std::filesystem::path& model);

// Writes the folder (created if needed; files of the same names are replaced).
void write_golden(const std::filesystem::path& dir, const GoldenSpec& spec, const models::BitNetConfig& config,
                  const GoldenRun& run, uint64_t model_fingerprint);

// The whole of `bitnet-dsl make-golden`: writes the synthetic model into `work_dir`, runs the
// reference, writes `out_dir`, deletes the model. Returns the run.
GoldenRun make_golden(const GoldenSpec& spec, const std::filesystem::path& out_dir, const std::filesystem::path& work_dir);
// The same for the model file spec.model (`bitnet-dsl make-golden --model FILE`): its manifest
// names the file rather than a preset.
GoldenRun make_golden_for_model(const GoldenSpec& spec, const std::filesystem::path& out_dir);

}  // namespace bdsl::golden
