// libFuzzer target for the .npy reader (golden data, --dump-logits files given back to us):
// arbitrary bytes are decoded as float32 and as int32. The only acceptable outcomes are an
// NpyError or an array whose element count is the product of its shape and that encodes back
// to an array with the same shape and bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <type_traits>

#include "golden/npy.h"

namespace {

template <class T>
void check(const bdsl::golden::NpyArray<T>& a) {
  uint64_t n = 1;
  for (uint64_t d : a.shape) n *= d;  // the reader refused any shape whose product overflows
  if (n != a.data.size()) std::abort();
  const auto bytes = bdsl::golden::encode_npy(std::span<const T>(a.data), a.shape);
  bdsl::golden::NpyArray<T> back;
  if constexpr (std::is_same_v<T, float>)
    back = bdsl::golden::decode_npy_f32(bytes);
  else
    back = bdsl::golden::decode_npy_i32(bytes);
  if (back.shape != a.shape || back.data.size() != a.data.size()) std::abort();
  if (!a.data.empty() && std::memcmp(back.data.data(), a.data.data(), a.data.size() * sizeof(T)) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::span bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    check(bdsl::golden::decode_npy_f32(bytes, "fuzz.npy"));
  } catch (const bdsl::golden::NpyError&) {
  }
  try {
    check(bdsl::golden::decode_npy_i32(bytes, "fuzz.npy"));
  } catch (const bdsl::golden::NpyError&) {
  }
  return 0;
}
