// The flags of `bitnet-dsl run`, parsed and checked: every mistake is a UsageError naming the flag.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/sampler.h"
#include "tools/command.h"

namespace bdsl::tools {

// --repeat-last-n -1 until the context is known (cmd_run resolves it).
inline constexpr uint32_t kWholeContext = UINT32_MAX;

struct RunOptions {
  std::string model;
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  bool has_prompt_ids = false;
  uint32_t n_predict = 128;
  uint32_t ctx_size = 0;  // 0: the model's trained context
  bool no_mmap = false;   // copy the weights even where the device reads them in place
  bool exact_norm = false;  // ModelOptions::exact_norm_scale
  models::SamplerOptions sampling{0.8f, 40, 0.95f, 0.0f, 0};
  bool seed_given = false;
  bool print_ids = false;
  bool chat = false;
  bool interactive = false;
  std::string device;
  bool list_devices = false;
  std::string dump_logits;
  std::string dump_layers;
  bool help = false;
  bool version = false;
};

RunOptions parse_run_options(const Args& args);
extern const char* const kRunUsage;

}  // namespace bdsl::tools
