// SplitMix64 (Steele, Lea, Flood 2014): a tiny PRNG whose output is fully specified, so a
// synthetic model made from a seed has the same bytes on every machine and compiler (the
// std:: distributions are implementation-defined, hence not used).
#pragma once
#include <cstdint>
#include <string_view>

namespace bdsl::golden {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 random bits: exactly representable as float.
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [-1, 1).
  float symmetric() { return 2.0f * uniform() - 1.0f; }

 private:
  uint64_t state_;
};

// FNV-1a: turns a tensor name into part of its stream's seed, so each tensor's values depend only
// on (seed, name), not on the order tensors are generated in.
constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

inline SplitMix64 stream_for(uint64_t seed, std::string_view name) {
  SplitMix64 mix(seed ^ fnv1a64(name));
  return SplitMix64(mix.next());
}

}  // namespace bdsl::golden
