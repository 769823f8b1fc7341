// Writes the fuzzer's seed corpus with the real writer: a file with every metadata type and
// nested arrays, one with a custom alignment and several tensor types, and a minimal valid
// BitNet model, so the fuzzer starts from deep inside the format instead of at the magic.
#include <cstdio>
#include <filesystem>
#include <string>

#include "models/bitnet_config.h"
#include "models/formats/gguf_writer.h"

using namespace bdsl::models;

namespace {

void every_metadata_type(const std::filesystem::path& out) {
  GgufWriter w;
  w.add("u8", GgufOutValue::u8(1));
  w.add("i8", GgufOutValue::i8(-1));
  w.add("u16", GgufOutValue::u16(2));
  w.add("i16", GgufOutValue::i16(-2));
  w.add_u32("u32", 3);
  w.add_i32("i32", -3);
  w.add_u64("u64", 4);
  w.add("i64", GgufOutValue::i64(-4));
  w.add_f32("f32", 0.5f);
  w.add("f64", GgufOutValue::f64(0.25));
  w.add_bool("bool", true);
  w.add_string("str", "text");
  const std::vector<std::string> strings = {"a", "bc"};
  w.add_string_array("strings", strings);
  const std::vector<uint16_t> shorts = {1, 2, 3};
  const std::vector<GgufOutValue> nested = {GgufOutValue::array<uint16_t>(shorts),
                                            GgufOutValue::string_array(strings)};
  w.add("nested", GgufOutValue::array_of(nested));
  w.write(out);
}

void tensor_types(const std::filesystem::path& out) {
  GgufWriter w(64);
  const auto zeros = [](std::span<std::byte> o) { std::fill(o.begin(), o.end(), std::byte{0}); };
  w.add_tensor("f32", GgmlType::F32, {4, 2}, zeros);
  w.add_tensor("f16", GgmlType::F16, {8}, zeros);
  w.add_tensor("q8", GgmlType::Q8_0, {32}, zeros);
  w.add_tensor("i2s", GgmlType::I2_S, {128}, zeros);
  w.add_tensor("tq2", GgmlType::TQ2_0, {256}, zeros);
  w.write(out);
}

void minimal_bitnet(const std::filesystem::path& out) {
  BitNetConfig c;
  c.architecture = "bitnet-b1.58";
  c.vocab_size = 4, c.context_length = 16, c.dim = 128, c.n_layers = 1, c.ffn_dim = 128;
  c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 64, c.rope_dim = 64, c.rms_norm_eps = 1e-5f;
  GgufWriter w;
  const std::string p = c.architecture + ".";
  w.add_string("general.architecture", c.architecture);
  w.add_u32(p + "context_length", c.context_length);
  w.add_u32(p + "embedding_length", c.dim);
  w.add_u32(p + "block_count", c.n_layers);
  w.add_u32(p + "feed_forward_length", c.ffn_dim);
  w.add_u32(p + "rope.dimension_count", c.rope_dim);
  w.add_u32(p + "attention.head_count", c.n_heads);
  w.add_u32(p + "attention.head_count_kv", c.n_kv_heads);
  w.add_f32(p + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  w.add_f32(p + "rope.freq_base", 500000.0f);
  const std::vector<std::string> tokens = {"a", "b", "c", "d"};
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  for (const auto& spec : bitnet_tensor_specs(c))
    w.add_tensor(spec.name, spec.type, spec.dims, [](std::span<std::byte> o) {
      std::fill(o.begin(), o.end(), std::byte{0x55});  // I2_S zeros; harmless floats elsewhere
    });
  w.write(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  every_metadata_type(dir / "every_metadata_type.gguf");
  tensor_types(dir / "tensor_types.gguf");
  minimal_bitnet(dir / "minimal_bitnet.gguf");
  return 0;
}
