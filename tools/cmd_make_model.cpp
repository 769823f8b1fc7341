// bitnet-dsl make-model: writes a synthetic BitNet b1.58 GGUF (golden/synthetic_model.h).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include "golden/synthetic_model.h"
#include "tools/command.h"

namespace bdsl::tools {

namespace {

constexpr const char* kUsage =
    "usage: bitnet-dsl make-model OUT.gguf [--preset NAME] [--dim N] [--layers N] [--heads N]\n"
    "                             [--kv-heads N] [--ffn N] [--vocab N] [--ctx N] [--rope-base F] [--seed S]\n"
    "                             [--weight-type i2_s|tq2_0|tq1_0] [--untied-output]\n"
    "                             [--arch bitnet-b1.58|bitnet|llama] [--tokenizer gpt2|llama]\n"
    "Writes a synthetic BitNet b1.58 model: real key and tensor names, I2_S projections, F32 norms,\n"
    "F16 embedding, a byte-level BPE vocabulary; the same options and seed give the same bytes.\n"
    "Presets: tiny (dim 512, 4 layers, 8/2 heads, FFN 1536, vocab 1000; the default), 2b (the 2B-4T\n"
    "shape, ~1.2 GB), the LLaMA-shaped llama3-8b, falcon3-1b, falcon3-3b, falcon3-7b, falcon3-10b\n"
    "(architecture llama, an output.weight of their own) and bitnet-large (1bitLLM's bitnet);\n"
    "docs/model-family.md says where each number comes from. Flags after --preset override its\n"
    "values. --weight-type writes the\n"
    "projections in mainline llama.cpp's TQ2_0 or TQ1_0 instead (scales rounded to F16, as theirs are);\n"
    "--untied-output an LM head (output.weight) of its own. --arch writes another graph of the family:\n"
    "bitnet (1bitLLM's: SiLU) or llama (LLaMA-shaped: no sub-norms, SiLU, adjacent-pair RoPE).\n"
    "--tokenizer llama writes the vocabulary as SentencePiece (1bitLLM's files) instead of byte-level BPE.\n";

uint64_t parse_number(const std::string& flag, const std::string& text, uint64_t max) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || text[0] == '-' || v > max) {
    throw UsageError(flag + " expects a whole number up to " + std::to_string(max) + ", got '" + text + "'");
  }
  return v;
}

golden::SyntheticModelOptions parse_options(const Args& args, std::string& out) {
  golden::SyntheticModelOptions o = golden::synthetic_preset("tiny");
  bool arch_given = false, untied_given = false;  // by the user, not by a preset
  const auto u32 = [](const std::string& flag, const std::string& v) {
    return static_cast<uint32_t>(parse_number(flag, v, std::numeric_limits<uint32_t>::max()));
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      if (!out.empty()) throw UsageError("more than one output path ('" + out + "', '" + a + "')");
      out = a;
      continue;
    }
    if (a == "--untied-output") {
      o.untied_output = true;
      untied_given = true;
      o.preset = "custom";
      continue;
    }
    if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
    const std::string& v = args[++i];
    if (a == "--preset") {  // a shape: the seed and the format flags given before it stay
      const golden::SyntheticModelOptions before = o;
      try {
        o = golden::synthetic_preset(v);
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
      o.seed = before.seed;
      o.weight_type = before.weight_type;
      o.tokenizer = before.tokenizer;
      // --untied-output and --arch given before change the preset's graph: a custom model.
      if (untied_given && !o.untied_output) o.untied_output = true, o.preset = "custom";
      if (arch_given && before.architecture != o.architecture) o.architecture = before.architecture, o.preset = "custom";
      continue;
    }
    if (a == "--seed") {
      o.seed = parse_number(a, v, std::numeric_limits<uint64_t>::max());
      continue;
    }
    if (a == "--arch") {
      o.architecture = v;
      arch_given = true;
      o.preset = "custom";
      continue;
    }
    if (a == "--tokenizer") {  // the same vocabulary in another form: still the preset
      if (v != "gpt2" && v != "llama") throw UsageError("--tokenizer expects gpt2 or llama, got '" + v + "'");
      o.tokenizer = v;
      continue;
    }
    if (a == "--weight-type") {  // the same weights in another format: still the preset
      if (v == "i2_s") o.weight_type = models::GgmlType::I2_S;
      else if (v == "tq2_0") o.weight_type = models::GgmlType::TQ2_0;
      else if (v == "tq1_0") o.weight_type = models::GgmlType::TQ1_0;
      else throw UsageError("--weight-type expects i2_s, tq2_0 or tq1_0, got '" + v + "'");
      continue;
    }
    // Any shape flag makes the model no longer the named preset: the file says "custom".
    o.preset = "custom";
    if (a == "--dim") { o.dim = u32(a, v);
    } else if (a == "--layers") { o.n_layers = u32(a, v);
    } else if (a == "--heads") { o.n_heads = u32(a, v);
    } else if (a == "--kv-heads") { o.n_kv_heads = u32(a, v);
    } else if (a == "--ffn") { o.ffn_dim = u32(a, v);
    } else if (a == "--vocab") { o.vocab_size = u32(a, v);
    } else if (a == "--ctx") { o.context_length = u32(a, v);
    } else if (a == "--rope-base") {
      try {
        o.rope_freq_base = std::stof(v);
      } catch (const std::exception&) {
        throw UsageError("--rope-base expects a number, got '" + v + "'");
      }
    } else {
      throw UsageError("unknown flag '" + a + "' (see --help)");
    }
  }
  if (out.empty()) throw UsageError("missing the output path (bitnet-dsl make-model OUT.gguf)");
  return o;
}

int run(const Args& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::string out;
  const golden::SyntheticModelOptions options = parse_options(args, out);
  try {
    golden::synthetic_config(options);  // option errors are the user's to fix
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const auto start = std::chrono::steady_clock::now();
  golden::write_synthetic_model(options, out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: synthetic %s '%s' (dim %u, %u layers, %u/%u heads, FFN %u, vocab %u, ctx %u, seed %llu), "
              "%.1f MB in %.2f s\n",
              out.c_str(), options.architecture == "bitnet-b1.58" ? "BitNet b1.58" : options.architecture.c_str(),
              options.preset.c_str(), options.dim, options.n_layers, options.n_heads, options.n_kv_heads,
              options.ffn_dim, options.vocab_size, options.context_length,
              static_cast<unsigned long long>(options.seed),
              static_cast<double>(std::filesystem::file_size(out)) / 1e6, seconds);
  return 0;
}

const Command kCommand("make-model", "write a synthetic BitNet b1.58 GGUF (tiny, 2b, or any shape)", run);

}  // namespace

}  // namespace bdsl::tools
