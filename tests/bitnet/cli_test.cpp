// The `bitnet-dsl` program's error paths: one clear line on stderr and a non-zero exit, never a
// stack trace or an abort. Runs the built binary.
#include <gtest/gtest.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/wait.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "temp_dir.h"

namespace {
using bdsl::test::TempDir;

struct Result {
  int code;
  std::string output;  // stdout and stderr
};

Result run(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " " + std::string(BDSL_BINARY_DIR) + "/tools/bitnet-dsl " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

void expect_one_line_error(const Result& r, int code, const std::string& fragment) {
  EXPECT_EQ(r.code, code) << r.output;
  EXPECT_NE(r.output.find(fragment), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Aborted"), std::string::npos) << r.output;
}

}  // namespace

TEST(Cli, RunWithoutAModelSaysWhereToGetOne) {
  const Result r = run("run -p hello");
  expect_one_line_error(r, 2, "microsoft/bitnet-b1.58-2B-4T-gguf");
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(Cli, MissingModelFile) { expect_one_line_error(run("run -m /no/such/model.gguf -p hi"), 2, "does not exist"); }

TEST(Cli, NotAGgufFile) {
  expect_one_line_error(run("run -m " + std::string(BDSL_SOURCE_DIR) + "/README.md -p hi"), 1, "expected \"GGUF\"");
}

TEST(Cli, WrongArchitecture) {
  // A valid GGUF of another architecture: the tiny model with its architecture key changed.
  const TempDir tmp("cli-test");
  const auto& dir = tmp.path();
  const Result made = run("make-model " + (dir / "tiny.gguf").string() + " --preset tiny");
  ASSERT_EQ(made.code, 0) << made.output;
  std::fstream f(dir / "tiny.gguf", std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  const auto at = bytes.find("bitnet-b1.58");
  ASSERT_NE(at, std::string::npos);
  f.seekp(std::streamoff(at));
  f.write("llama-b1.58!", 12);  // same length: the file stays well formed
  f.close();
  expect_one_line_error(run("run -m " + (dir / "tiny.gguf").string() + " -p hi"), 1, "llama-b1.58!");
}

TEST(Cli, BadFlags) {
  expect_one_line_error(run("run --temp abc"), 2, "--temp expects a number, got 'abc'");
  expect_one_line_error(run("run --frobnicate"), 2, "unknown flag '--frobnicate'");
  expect_one_line_error(run("run --top-k 500 -m x"), 2, "--top-k must be at most 128");
  expect_one_line_error(run("run --min-p 1.5 -m x"), 2, "--min-p must be in [0, 1]");
  expect_one_line_error(run("run --top-p 0 -m x"), 2, "--top-p must be in (0, 1]");
  expect_one_line_error(run("run -m"), 2, "-m needs a value");
  expect_one_line_error(run("frobnicate"), 2, "unknown command 'frobnicate'");
}

TEST(Cli, NoVulkanDevice) {
  // An ICD list naming no driver leaves the loader with no device at all.
  expect_one_line_error(run("devices", "VK_ICD_FILENAMES=/nonexistent.json"), 1, "no Vulkan device found");
  expect_one_line_error(run("demo", "VK_ICD_FILENAMES=/nonexistent.json"), 1, "no Vulkan device found");
}

TEST(Cli, DumpsLogitsAndLayersAsNpy) {
  namespace fs = std::filesystem;
  const TempDir tmp("cli-dump-test");
  const auto& dir = tmp.path();
  ASSERT_EQ(run("make-model " + (dir / "tiny.gguf").string() + " --preset tiny").code, 0);
  const Result r = run("run -m " + (dir / "tiny.gguf").string() +
                       " --prompt-ids 990,312,626 -n 4 --temp 0 --ids --dump-logits " + (dir / "logits.npy").string() +
                       " --dump-layers " + (dir / "layers").string());
  ASSERT_EQ(r.code, 0) << r.output;
  // 3 prompt positions + 3 steps (the 4th token needs no further step), vocab 1000.
  std::ifstream logits(dir / "logits.npy", std::ios::binary);
  std::string header(128, '\0');
  logits.read(header.data(), 128);
  EXPECT_NE(header.find("'shape': (6, 1000)"), std::string::npos) << header;
  for (const char* name : {"inp_embd", "Qcur-0", "Kcur-3", "Vcur-1", "kqv_out-2", "ffn_out-3", "l_out-3", "result_output"})
    EXPECT_TRUE(fs::exists(dir / "layers" / (std::string(name) + ".npy"))) << name;
}

// run prints what the model holds on the device by class; --ctx-size sizes the KV cache (and so
// the context: generation stops when it is full).
TEST(Cli, RunPrintsItsDeviceMemoryAndTakesAContextSize) {
  namespace fs = std::filesystem;
  const TempDir tmp("cli-ctx-test");
  const auto& dir = tmp.path();
  const std::string model = (dir / "tiny.gguf").string();
  ASSERT_EQ(run("make-model " + model + " --preset tiny").code, 0);
  auto kv_mib_and_positions = [](const std::string& out) {
    const auto at = out.find("KV ");
    EXPECT_NE(at, std::string::npos) << out;
    if (at == std::string::npos) return std::pair<int, int>{-1, -1};
    const auto for_at = out.find(" for ", at);
    return std::pair<int, int>{std::stoi(out.substr(at + 3)), std::stoi(out.substr(for_at + 5))};
  };
  const Result full = run("run -m " + model + " --prompt-ids 990,312,626 -n 4 --temp 0");
  ASSERT_EQ(full.code, 0) << full.output;
  EXPECT_NE(full.output.find("model: "), std::string::npos) << full.output;
  EXPECT_NE(full.output.find("device memory "), std::string::npos) << full.output;
  EXPECT_NE(full.output.find("weights "), std::string::npos) << full.output;
  const auto [kv_full, positions_full] = kv_mib_and_positions(full.output);
  const Result small = run("run -m " + model + " --prompt-ids 990,312,626 -n 40 --temp 0 -c 8");
  ASSERT_EQ(small.code, 0) << small.output;
  const auto [kv_small, positions_small] = kv_mib_and_positions(small.output);
  EXPECT_EQ(positions_small, 8) << small.output;
  EXPECT_GT(positions_full, 8) << full.output;
  EXPECT_LE(kv_small, kv_full);
  EXPECT_NE(small.output.find("context of 8 tokens is full"), std::string::npos) << small.output;
  // A CPU device reads the weights where they lie in the mapped file; --no-mmap copies them. The
  // same tokens either way.
  const bool cpu = run("devices").output.find("(cpu") != std::string::npos;
  EXPECT_EQ(full.output.find("read in place from the file") != std::string::npos, cpu) << full.output;
  // ... and holds no int8 shadow of the LM head there (host memory that does not pay on a CPU).
  EXPECT_EQ(full.output.find("no lm-head shadow") != std::string::npos, cpu) << full.output;
  const Result copied = run("run -m " + model + " --prompt-ids 990,312,626 -n 4 --temp 0 --ids --no-mmap");
  const Result in_place = run("run -m " + model + " --prompt-ids 990,312,626 -n 4 --temp 0 --ids");
  ASSERT_EQ(copied.code, 0) << copied.output;
  EXPECT_EQ(copied.output.find("read in place"), std::string::npos) << copied.output;
  auto ids_line = [](const std::string& out) {  // --ids: the one line of digits and commas
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && line.find_first_not_of("0123456789,") == std::string::npos) return line;
    return std::string("(none)");
  };
  EXPECT_NE(ids_line(in_place.output), "(none)") << in_place.output;
  EXPECT_EQ(ids_line(copied.output), ids_line(in_place.output));
  expect_one_line_error(run("run -m " + model + " -p hi --ctx-size 0"), 2, "--ctx-size");
}

// llama-cli's flags: --version, -f FILE, -s, -n -1 (until the end of generation or a full context),
// and the text on stdout ends with a newline.
// The family's shapes and formats beyond the 2B-4T's, each checked layer by layer against golden
// data the CPU reference makes for that very file (make-golden --model): head size 256, dims and
// FFN that are multiples of 128 but not 256, Falcon3's vocabulary of 131,072, an LM head of its
// own (output.weight), and TQ1_0 projections.
TEST(Cli, EveryShapeValidatesAgainstGoldenDataMadeForItsOwnFile) {
  namespace fs = std::filesystem;
  const TempDir tmp("cli-shapes-test");
  const auto& dir = tmp.path();
  const std::pair<const char*, const char*> shapes[] = {
      {"head256", "--dim 1024 --heads 4 --kv-heads 2 --ffn 2816"},
      {"dims640", "--dim 640 --heads 5 --kv-heads 5 --ffn 1664"},
      {"vocab131072", "--dim 256 --heads 4 --kv-heads 1 --ffn 768 --vocab 131072"},
      {"untied", "--untied-output"},
      {"tq1", "--weight-type tq1_0"},
  };
  for (const auto& [name, flags] : shapes) {
    const std::string model = (dir / (std::string(name) + ".gguf")).string(), golden = (dir / name).string();
    ASSERT_EQ(run("make-model " + model + " --layers 2 " + flags).code, 0) << name;
    const Result made = run("make-golden --model " + model + " --out " + golden + " -n 6");
    ASSERT_EQ(made.code, 0) << name << ": " << made.output;
    const Result checked = run("validate -m " + model + " --golden " + golden);
    EXPECT_EQ(checked.code, 0) << name << ": " << checked.output;
    EXPECT_NE(checked.output.find("validate: PASS"), std::string::npos) << name << ": " << checked.output;
  }
  // The manifest names the file it was made from; another file is refused in one line.
  const Result other = run("validate -m " + (dir / "tq1.gguf").string() + " --golden " + (dir / "untied").string());
  EXPECT_NE(other.code, 0) << other.output;
  EXPECT_NE(other.output.find("was made from another model"), std::string::npos) << other.output;
  EXPECT_NE(other.output.find("the file untied.gguf; for this one: `bitnet-dsl make-golden --model"), std::string::npos) << other.output;
}

// Each architecture's graph on the GPU: `llama` (no sub-norms, SiLU, adjacent-pair RoPE run as NeoX
// on reordered q and k rows) and 1bitLLM's `bitnet` (sub-norms, SiLU) validate layer by layer
// against golden data the CPU reference makes for their own file, and `run` generates from a
// prompt that goes through the prompt blocks first. (Prefill against decode and the batch:
// Prefill.MatchesDecodeForEveryArchitecture, BatchDecoder.*ForLlama.)
TEST(Cli, EveryArchitectureValidatesOnTheGpu) {
  namespace fs = std::filesystem;
  const TempDir tmp("cli-arch-test");
  const auto& dir = tmp.path();
  std::vector<std::string> prompt_lines;
  for (const char* arch : {"llama", "bitnet"}) {
    SCOPED_TRACE(arch);
    const std::string model = (dir / (std::string(arch) + ".gguf")).string(), golden = (dir / arch).string();
    // 1bitLLM's `bitnet` files carry a SentencePiece vocabulary: the golden prompt and run's text through it.
    const std::string tokenizer = std::string(arch) == "bitnet" ? " --tokenizer llama" : "";
    ASSERT_EQ(run("make-model " + model + " --arch " + arch + " --preset tiny --layers 2" + tokenizer).code, 0);  // --preset keeps --arch
    const Result made = run("make-golden --model " + model + " --out " + golden + " -n 6");
    ASSERT_EQ(made.code, 0) << made.output;
    EXPECT_TRUE(fs::exists(fs::path(golden) / "ffn_out-1.npy"));
    EXPECT_EQ(fs::exists(fs::path(golden) / "ffn_sub_norm-1.npy"), std::string(arch) == "bitnet");
    const Result checked = run("validate -m " + model + " --golden " + golden);
    EXPECT_EQ(checked.code, 0) << checked.output;
    EXPECT_NE(checked.output.find("validate: PASS"), std::string::npos) << checked.output;
    const Result generated = run("run -m " + model + " --prompt-ids 1,2,3,4,5,6,7,8,9,10 -n 4 --temp 0");
    EXPECT_EQ(generated.code, 0) << generated.output;
    // SentencePiece puts a space in front of the prompt: its tokens are byte-level BPE's of " the ...".
    const Result text = run("run -m " + model + " -p '" + (tokenizer.empty() ? " " : "") + "the people of the city' -n 4 --temp 0");
    EXPECT_EQ(text.code, 0) << text.output;
    const auto at = text.output.find("prompt: ");
    ASSERT_NE(at, std::string::npos) << text.output;
    prompt_lines.push_back(text.output.substr(at, text.output.find(" tokens", at) - at));
  }
  ASSERT_EQ(prompt_lines.size(), 2u);
  EXPECT_EQ(prompt_lines[1], prompt_lines[0]);
}

TEST(Cli, LlamaCliFlagsAndANewlineAtTheEnd) {
  namespace fs = std::filesystem;
  const TempDir tmp("cli-flags-test");
  const auto& dir = tmp.path();
  const std::string model = (dir / "tiny.gguf").string();
  ASSERT_EQ(run("make-model " + model + " --preset tiny").code, 0);
  const Result version = run("--version");
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.output.rfind("bitnet-dsl ", 0), 0u) << version.output;
  EXPECT_EQ(run("run --version").output, version.output);
  std::ofstream(dir / "prompt.txt") << "hello world";
  // The generated text: stdout, between the model line and the statistics (which start "\nprompt:").
  auto generated = [](const std::string& out) {
    const auto start = out.find('\n', out.find("model: ")) + 1, end = out.find("\nprompt: ");
    return start > 0 && end != std::string::npos && end >= start ? out.substr(start, end - start) : std::string("(none)");
  };
  const Result from_file = run("run -m " + model + " -f " + (dir / "prompt.txt").string() + " -n 6 -s 3");
  const Result from_flag = run("run -m " + model + " -p 'hello world' -n 6 --seed 3");
  EXPECT_EQ(from_file.code, 0) << from_file.output;
  EXPECT_EQ(generated(from_file.output), generated(from_flag.output)) << "-f FILE and -s are -p TEXT and --seed";
  const std::string text = generated(from_file.output);
  ASSERT_GT(text.size(), 1u) << from_file.output;
  EXPECT_EQ(text.back(), '\n') << from_file.output;
  const Result until_full = run("run -m " + model + " -p 'hello world' -n -1 --temp 0 -c 24");
  EXPECT_EQ(until_full.code, 0) << until_full.output;
  EXPECT_NE(until_full.output.find("context of 24 tokens is full"), std::string::npos) << until_full.output;
  expect_one_line_error(run("run -m " + model + " -f " + (dir / "missing.txt").string()), 2, "missing.txt");
  expect_one_line_error(run("run -m " + model + " -p hi -n -2"), 2, "-n must be between -1");
}

// Ctrl-C stops the generation, prints its statistics and exits as a shell reports SIGINT (130).
TEST(Cli, CtrlCStopsTheGenerationAndPrintsItsStatistics) {
  namespace fs = std::filesystem;
  const TempDir tmp("cli-sigint-test");
  const auto& dir = tmp.path();
  const std::string model = (dir / "tiny.gguf").string(), err = (dir / "err.txt").string();
  // A long context, so that the generation (greedy from this prompt, no end-of-generation token for
  // dozens of steps on the tiny model) is still running when the signal comes.
  ASSERT_EQ(run("make-model " + model + " --preset tiny --ctx 32768").code, 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  const std::string binary = std::string(BDSL_BINARY_DIR) + "/tools/bitnet-dsl";
  if (pid == 0) {  // only async-signal-safe calls between fork and exec
    const int out = open("/dev/null", O_WRONLY), log = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || log < 0 || dup2(out, 1) < 0 || dup2(log, 2) < 0) _exit(126);
    execl(binary.c_str(), binary.c_str(), "run", "-m", model.c_str(), "-p", "hello world", "-n", "-1", "--temp", "0", nullptr);
    _exit(127);
  }
  auto err_text = [&] {
    std::ifstream in(err);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  for (int i = 0; i < 600 && err_text().find("model: ") == std::string::npos; ++i) usleep(100000);
  usleep(1500000);  // a few tokens into the generation
  kill(pid, SIGINT);
  int status = 0;
  for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; ++i) usleep(100000);
  if (waitpid(pid, &status, WNOHANG) == 0) {  // never hang the suite
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "still running 60 s after SIGINT: " << err_text();
  }
  ASSERT_TRUE(WIFEXITED(status)) << err_text();
  EXPECT_EQ(WEXITSTATUS(status), 130) << err_text();
  EXPECT_NE(err_text().find("| interrupted (Ctrl-C)"), std::string::npos) << err_text();
}

TEST(Cli, InteractiveChatKeepsTheConversationInTheCache) {
  namespace fs = std::filesystem;
  const TempDir tmp("cli-chat-test");
  const auto& dir = tmp.path();
  ASSERT_EQ(run("make-model " + (dir / "tiny.gguf").string() + " --preset tiny").code, 0);
  const Result r = run("run -m " + (dir / "tiny.gguf").string() + " -i -n 4 --temp 0",
                       "printf 'hello there\\nand again\\n' |");
  EXPECT_EQ(r.code, 0) << r.output;
  // Two turns; the second feeds only what is new since the first (the cache keeps the rest).
  const auto first = r.output.find("prompt: "), second = r.output.find("prompt: ", first + 1);
  ASSERT_NE(second, std::string::npos) << r.output;
  const int n1 = std::stoi(r.output.substr(first + 8)), n2 = std::stoi(r.output.substr(second + 8));
  EXPECT_LT(n2, n1 + 4 + 8) << r.output;
}

TEST(Cli, InspectPrintsTheTensorTableAsTextAndJson) {
  namespace fs = std::filesystem;
  const TempDir tmp("cli-inspect-test");
  const auto& dir = tmp.path();
  const std::string model = (dir / "tiny.gguf").string();
  ASSERT_EQ(run("make-model " + model + " --preset tiny").code, 0);
  const Result text = run("inspect " + model);
  EXPECT_EQ(text.code, 0);
  EXPECT_NE(text.output.find("general.architecture"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("blk.3.ffn_down.weight"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("I2_S"), std::string::npos) << text.output;
  const Result json = run("inspect " + model + " --json");
  EXPECT_EQ(json.code, 0);
  EXPECT_EQ(json.output.front(), '{') << json.output.substr(0, 200);
  EXPECT_NE(json.output.find("\"tensors\""), std::string::npos);
  EXPECT_NE(json.output.find("\"blk.0.attn_q.weight\""), std::string::npos);
  expect_one_line_error(run("inspect /no/such.gguf"), 1, "/no/such.gguf");
}

// `shaders`: the list, one op's GLSL with its cache key, and with --exact-norm the kernels as
// `run --exact-norm` builds them (the squares summed in double); an unknown op is named.
TEST(Cli, ShadersPrintTheKernelsAsTheModelBuildsThem) {
  const Result list = run("shaders --no-device");
  EXPECT_EQ(list.code, 0);
  EXPECT_NE(list.output.find("rms_norm "), std::string::npos) << list.output;
  const Result plain = run("shaders --no-device --op rms_norm");
  EXPECT_EQ(plain.code, 0);
  EXPECT_NE(plain.output.find("// sha256: "), std::string::npos) << plain.output;
  EXPECT_EQ(plain.output.find("double"), std::string::npos) << plain.output;
  const Result exact = run("shaders --no-device --exact-norm --op rms_norm");
  EXPECT_EQ(exact.code, 0);
  EXPECT_NE(exact.output.find("double"), std::string::npos) << exact.output;
  EXPECT_NE(exact.output.substr(exact.output.find("// sha256: ")), plain.output.substr(plain.output.find("// sha256: ")));
  expect_one_line_error(run("shaders --no-device --op no_such_op"), 2, "no op named 'no_such_op'");
}

// `perplexity`: a whole run on the tiny model (the base written, then compared with itself and
// with another model), and every bad input named in one line.
TEST(Cli, PerplexityAndKlDivergence) {
  const TempDir tmp("cli-perplexity");
  const auto& dir = tmp.path();
  const std::string model = (dir / "tiny.gguf").string(), other = (dir / "other.gguf").string();
  const std::string small_vocab = (dir / "small.gguf").string(), text = (dir / "text.txt").string();
  ASSERT_EQ(run("make-model " + model + " --preset tiny").code, 0);
  ASSERT_EQ(run("make-model " + other + " --preset tiny --seed 77").code, 0);
  ASSERT_EQ(run("make-model " + small_vocab + " --preset tiny --vocab 500").code, 0);
  {
    std::ofstream t(text);
    for (int i = 0; i < 12; ++i) t << "the people of the town came down to the river and saw a boat ";
  }
  const std::string base = (dir / "base.kld").string();
  const Result saved = run("perplexity -m " + model + " -f " + text + " --ctx 32 --kl-divergence-base " + base);
  ASSERT_EQ(saved.code, 0) << saved.output;
  EXPECT_NE(saved.output.find("Final estimate: PPL = "), std::string::npos) << saved.output;
  EXPECT_NE(saved.output.find("[2]"), std::string::npos) << "a running estimate per window: " << saved.output;
  const Result same = run("perplexity -m " + model + " --kl-divergence-base " + base + " --kl-divergence");
  ASSERT_EQ(same.code, 0) << same.output;
  EXPECT_NE(same.output.find("Same top token: 100.000%"), std::string::npos) << same.output;
  const Result versus = run("perplexity -m " + other + " -f " + text + " --kl-divergence-base " + base + " --kl-divergence");
  ASSERT_EQ(versus.code, 0) << versus.output;
  EXPECT_NE(versus.output.find("Mean    KLD:"), std::string::npos) << versus.output;
  EXPECT_EQ(versus.output.find("Same top token: 100.000%"), std::string::npos) << "another model: " << versus.output;

  expect_one_line_error(run("perplexity -m " + model + " -f /no/such.txt"), 2, "text file '/no/such.txt' does not exist");
  const std::string empty = (dir / "empty.txt").string();
  std::ofstream(empty).close();
  expect_one_line_error(run("perplexity -m " + model + " -f " + empty), 2, "is empty: nothing to score");
  expect_one_line_error(run("perplexity -m " + model + " -f " + text + " --ctx 100000"), 2,
                        "does not fit the model's context of 256");
  const std::string short_text = (dir / "short.txt").string();
  std::ofstream(short_text) << "hello world";
  expect_one_line_error(run("perplexity -m " + model + " -f " + short_text + " --ctx 64"), 2, "needs at least 64");
  expect_one_line_error(run("perplexity -m " + small_vocab + " --kl-divergence-base " + base + " --kl-divergence"), 2,
                        "a vocabulary of 1000 tokens; this model's has 500");
  expect_one_line_error(run("perplexity -m " + model + " --kl-divergence"), 2, "needs --kl-divergence-base FILE");
  expect_one_line_error(run("perplexity -m " + model + " --kl-divergence-base " + text + " --kl-divergence"), 2,
                        "is not a KL-divergence base file");
  // Truncated: the header promises more rows than the file holds.
  std::filesystem::resize_file(base, std::filesystem::file_size(base) - 100);
  expect_one_line_error(run("perplexity -m " + model + " --kl-divergence-base " + base + " --kl-divergence"), 2, "(truncated)");
  // Another text against the base: the tokens differ.
  ASSERT_EQ(run("perplexity -m " + model + " -f " + text + " --ctx 32 --kl-divergence-base " + base).code, 0);
  {
    std::ofstream t(text);
    for (int i = 0; i < 12; ++i) t << "a boat with red sails came down the river to the town and its people ";
  }
  expect_one_line_error(run("perplexity -m " + model + " -f " + text + " --kl-divergence-base " + base + " --kl-divergence"), 2,
                        "another text or tokenizer");
}

// validate without --golden: the tiny model's golden data; a model other than the one it was made
// from is refused before anything runs, in one line that says how to make the right one.
TEST(Cli, ValidateChecksTheModelAgainstTheGoldenDataFirst) {
  const TempDir tmp("cli-validate");
  const auto& dir = tmp.path();
  ASSERT_EQ(run("make-model " + (dir / "tiny.gguf").string() + " --preset tiny").code, 0);
  const Result ok = run("validate -m " + (dir / "tiny.gguf").string());
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find("golden/data/tiny"), std::string::npos) << ok.output;
  ASSERT_EQ(run("make-model " + (dir / "other.gguf").string() + " --preset tiny --seed 6").code, 0);
  const Result other = run("validate -m " + (dir / "other.gguf").string());
  expect_one_line_error(other, 1, "was made from another model (fnv1a64 0x");
  EXPECT_NE(other.output.find("`bitnet-dsl make-model FILE --preset tiny --seed 5`"), std::string::npos) << other.output;
  EXPECT_EQ(std::count(other.output.begin(), other.output.end(), '\n'), 1) << other.output;
  EXPECT_EQ(other.output.find("FAIL"), std::string::npos) << other.output;
}

// llama-cli's --repeat-penalty and --repeat-last-n: the text changes (the tiny model's greedy
// continuation repeats a token), -1 is the whole context, and bad values are refused in one line.
TEST(Cli, RepeatPenaltyChangesTheGreedyText) {
  const TempDir tmp("cli-penalty");
  const auto& dir = tmp.path();
  const std::string model = (dir / "tiny.gguf").string();
  ASSERT_EQ(run("make-model " + model + " --preset tiny").code, 0);
  const std::string base = "run -m " + model + " --prompt-ids 990,312,626,307 -n 24 --temp 0 --ids";
  const Result plain = run(base), penalized = run(base + " --repeat-penalty 1.5"),
               whole = run(base + " --repeat-penalty 1.5 --repeat-last-n -1");
  ASSERT_EQ(plain.code, 0) << plain.output;
  ASSERT_EQ(penalized.code, 0) << penalized.output;
  ASSERT_EQ(whole.code, 0) << whole.output;
  auto ids = [](const std::string& out) {  // --ids: the one line of digits and commas
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && line.find_first_not_of("0123456789,") == std::string::npos) return line;
    return std::string("(none)");
  };
  EXPECT_NE(ids(plain.output), "(none)") << plain.output;
  EXPECT_NE(ids(plain.output), ids(penalized.output)) << plain.output << penalized.output;
  EXPECT_NE(ids(whole.output), "(none)") << whole.output;
  expect_one_line_error(run(base + " --repeat-penalty 0"), 2, "--repeat-penalty must be > 0");
  expect_one_line_error(run(base + " --repeat-last-n 2000"), 2, "--repeat-last-n");
  expect_one_line_error(run(base + " --repeat-penalty 1.2 --dump-logits x.npy"), 2, "not with --dump-logits");
}
