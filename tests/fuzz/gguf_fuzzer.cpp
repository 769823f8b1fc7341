// libFuzzer target for the GGUF reader: parse arbitrary bytes from memory, then walk everything a
// caller could touch (every value rendered, every tensor's bytes read, the BitNet config checks).
// The only acceptable outcomes are success or a GgufError / BitNetConfigError; the sanitizers
// turn any out-of-bounds read, overflow or leak into a crash.
#include <cstddef>
#include <cstdint>
#include <span>

#include "models/bitnet_config.h"
#include "models/formats/gguf.h"

namespace {

void walk(const bdsl::models::GgufFile& f) {
  std::size_t sink = 0;
  for (const auto& kv : f.metadata()) sink += kv.value.to_string(4, (sink & 1) != 0).size();
  for (const auto& t : f.tensors()) {
    const auto data = f.tensor_data(t);
    if (!data.empty()) sink += std::to_integer<std::size_t>(data.back());
  }
  if (const auto arch = f.find("general.architecture");
      arch && arch->type() == bdsl::models::GgufValueType::STRING &&
      bdsl::models::is_bitnet_architecture(arch->as<std::string_view>())) {
    try {
      sink += bdsl::models::BitNetConfig::from_gguf(f).dim;
    } catch (const bdsl::models::BitNetConfigError&) {
    }
  }
  static volatile std::size_t keep;
  keep = sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::span bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    walk(bdsl::models::GgufFile::parse(bytes, "fuzz.gguf"));
  } catch (const bdsl::models::GgufError&) {
  }
  return 0;
}
