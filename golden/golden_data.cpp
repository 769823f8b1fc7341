#include "golden/golden_data.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "golden/npy.h"
#include "golden/splitmix.h"
#include "golden/synthetic_model.h"
#include "models/formats/gguf.h"

namespace bdsl::golden {

namespace {

namespace fs = std::filesystem;

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

template <class Range>
std::string json_list(const Range& values) {
  std::string out = "[";
  bool first = true;
  for (const auto& v : values) {
    out += (first ? "" : ", ") + std::to_string(v);
    first = false;
  }
  return out + "]";
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error(path.string() + ": cannot write");
}

std::string config_json(const models::BitNetConfig& c) {
  std::ostringstream o;
  o << "{\"dim\": " << c.dim << ", \"n_layers\": " << c.n_layers << ", \"n_heads\": " << c.n_heads
    << ", \"n_kv_heads\": " << c.n_kv_heads << ", \"ffn_dim\": " << c.ffn_dim << ", \"vocab_size\": " << c.vocab_size
    << ", \"context_length\": " << c.context_length << ", \"rope_freq_base\": " << c.rope_freq_base
    << ", \"rms_norm_eps\": " << c.rms_norm_eps << ", \"architecture\": " << json_string(c.architecture)
    << ", \"sub_norms\": " << (c.sub_norms ? "true" : "false") << ", \"ffn_activation\": " << json_string(models::to_string(c.ffn_activation))
    << ", \"rope_mode\": " << json_string(models::to_string(c.rope_mode)) << "}";
  return o.str();
}

// Writes every recorded tensor; returns the manifest's "tensors" entries.
std::vector<std::string> write_tensors(const fs::path& dir, const TensorRecorder& rec) {
  std::vector<std::string> entries;
  const auto entry = [&](const std::string& name, const char* dtype, std::size_t rows, std::size_t cols) {
    entries.push_back("{\"name\": " + json_string(name) + ", \"file\": " + json_string(name + ".npy") +
                      ", \"dtype\": \"" + dtype + "\", \"shape\": [" + std::to_string(rows) + ", " +
                      std::to_string(cols) + "]}");
  };
  for (const std::string& name : rec.names()) {
    const MatrixF& m = rec.tensor(name);
    write_npy(dir / (name + ".npy"), std::span<const float>(m.data), {m.rows, m.cols});
    entry(name, "f32", m.rows, m.cols);
  }
  for (const std::string& name : rec.accumulator_names()) {
    const MatrixI& m = rec.accumulators(name);
    write_npy(dir / (name + ".npy"), std::span<const int32_t>(m.data), {m.rows, m.cols});
    entry(name, "i32", m.rows, m.cols);
  }
  return entries;
}

}  // namespace

GoldenSpec default_golden_spec(const std::string& preset) {
  GoldenSpec spec;
  spec.preset = preset;
  spec.prompt = "The people of the town came down";
  return spec;
}

GoldenRun run_golden(const ReferenceWeights& weights, const models::Tokenizer& tokenizer, const GoldenSpec& spec) {
  GoldenRun run;
  run.prompt_ids = tokenizer.encode(spec.prompt, /*add_bos=*/true);
  ReferenceModel model(weights);
  const ForwardObserver observer = run.prompt_pass.observer();
  run.continuation = generate_greedy(model, run.prompt_ids, spec.n_continuation, &run.logits, &observer);
  return run;
}

uint64_t file_fingerprint(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path.string() + ": cannot open");
  uint64_t h = fnv1a64("");
  std::vector<char> buf(1 << 20);
  while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0) {
    for (std::streamsize i = 0; i < f.gcount(); ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001B3ull;
  }
  return h;
}

namespace {

// A fingerprint as the manifest writes it: "0x" and 16 hex digits.
std::string fingerprint_text(uint64_t fingerprint) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

// The string value of "key" in the manifest's text (the manifest is ours: flat, one key each).
std::string manifest_value(const std::string& text, const std::string& key) {
  const std::string quoted = "\"" + key + "\": ";
  const size_t at = text.find(quoted);
  if (at == std::string::npos) return "";
  size_t begin = at + quoted.size(), end = begin;
  if (text[begin] == '"') end = text.find('"', ++begin);
  else end = text.find_first_of(",}\n", begin);
  return end == std::string::npos ? "" : text.substr(begin, end - begin);
}

}  // namespace

void check_golden_model(const fs::path& dir, const fs::path& model) {
  std::ifstream in(dir / "manifest.json");
  if (!in) throw std::runtime_error((dir / "manifest.json").string() + ": cannot open (not a golden folder?)");
  std::stringstream text;
  text << in.rdbuf();
  const std::string want = manifest_value(text.str(), "fnv1a64");
  if (want.empty()) return;
  const std::string got = fingerprint_text(file_fingerprint(model));
  if (want == got) return;
  const std::string preset = manifest_value(text.str(), "preset"), seed = manifest_value(text.str(), "seed");
  const std::string file = manifest_value(text.str(), "file");
  const std::string how = !preset.empty() ? ", `bitnet-dsl make-model FILE --preset " + preset + (seed.empty() ? "" : " --seed " + seed) + "`"
                          : !file.empty() ? ", the file " + file + "; for this one: `bitnet-dsl make-golden --model " + model.string() +
                                                " --out DIR`"
                                          : "";
  throw std::runtime_error("golden data " + dir.string() + " was made from another model (fnv1a64 " + want + how + ") than " +
                           model.string() + " (" + got + ")");
}

void write_golden(const fs::path& dir, const GoldenSpec& spec, const models::BitNetConfig& config,
                  const GoldenRun& run, uint64_t model_fingerprint) {
  fs::create_directories(dir);
  write_text(dir / "prompt.txt", spec.prompt);
  write_npy(dir / "prompt.npy", std::span<const int32_t>(run.prompt_ids), {run.prompt_ids.size()});
  write_npy(dir / "logits.npy", std::span<const float>(run.logits.data), {run.logits.rows, run.logits.cols});
  write_npy(dir / "continuation.npy", std::span<const int32_t>(run.continuation), {run.continuation.size()});
  const std::vector<std::string> tensors = write_tensors(dir, run.prompt_pass);

  const std::string fingerprint = fingerprint_text(model_fingerprint);
  std::string m = "{\n  \"format\": \"bitnet-dsl golden 1\",\n";
  m += "  \"tool\": " + json_string(kReferenceVersion) + ",\n";
  if (spec.model.empty()) {
    m += "  \"regenerate\": " + json_string("bitnet-dsl make-golden --preset " + spec.preset + " --seed " +
                                            std::to_string(spec.seed) + " --out <dir>") + ",\n";
    m += "  \"model\": {\"preset\": " + json_string(spec.preset) + ", \"seed\": " + std::to_string(spec.seed) +
         ", \"fnv1a64\": \"" + fingerprint + "\", \"config\": " + config_json(config) + "},\n";
  } else {
    m += "  \"regenerate\": " + json_string("bitnet-dsl make-golden --model " + spec.model.string() + " --out <dir>") + ",\n";
    m += "  \"model\": {\"file\": " + json_string(spec.model.filename().string()) + ", \"fnv1a64\": \"" + fingerprint +
         "\", \"config\": " + config_json(config) + "},\n";
  }
  m += "  \"prompt\": " + json_string(spec.prompt) + ",\n";
  m += "  \"prompt_ids\": " + json_list(run.prompt_ids) + ",\n";
  m += "  \"continuation\": " + json_list(run.continuation) + ",\n";
  m += "  \"tolerance\": {\"float_max_abs_error_relative_to_tensor_max_abs\": 1e-5, \"integers\": \"exact\"},\n";
  m += "  \"tensors\": [\n";
  for (std::size_t i = 0; i < tensors.size(); ++i) m += "    " + tensors[i] + (i + 1 < tensors.size() ? ",\n" : "\n");
  m += "  ]\n}\n";
  write_text(dir / "manifest.json", m);
}

GoldenRun make_golden_for_model(const GoldenSpec& spec, const fs::path& out_dir) {
  const models::GgufFile file = models::GgufFile::open(spec.model);
  const ReferenceWeights weights = ReferenceWeights::load(file);
  const models::Tokenizer tokenizer = models::Tokenizer::from_gguf(file);
  GoldenRun run = run_golden(weights, tokenizer, spec);
  write_golden(out_dir, spec, weights.config, run, file_fingerprint(spec.model));
  return run;
}

GoldenRun make_golden(const GoldenSpec& spec, const fs::path& out_dir, const fs::path& work_dir) {
  SyntheticModelOptions options = synthetic_preset(spec.preset);
  options.seed = spec.seed;
  fs::create_directories(work_dir);
  const fs::path model_path = work_dir / ("synthetic-" + spec.preset + ".gguf");
  write_synthetic_model(options, model_path);
  GoldenRun run;
  {
    const models::GgufFile file = models::GgufFile::open(model_path);
    const ReferenceWeights weights = ReferenceWeights::load(file);
    const models::Tokenizer tokenizer = models::Tokenizer::from_gguf(file);
    run = run_golden(weights, tokenizer, spec);
    write_golden(out_dir, spec, weights.config, run, file_fingerprint(model_path));
  }
  fs::remove(model_path);
  return run;
}

}  // namespace bdsl::golden
