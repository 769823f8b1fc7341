// SPIR-V cache keyed by the SHA-256 of everything that changes the binary: the GLSL text, the
// compile options (target environment and specialization constants included) and the compilers'
// versions. Looks in memory, then in `<dir>/<key>.spv`, then compiles. Thread-safe.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codegen/glsl_compiler.h"
#include "codegen/kernel_interface.h"

namespace bdsl::codegen {

// $BDSL_CACHE_DIR, else $XDG_CACHE_HOME/bitnet-dsl, else $HOME/.cache/bitnet-dsl.
std::filesystem::path default_cache_dir();

struct ShaderCacheStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;        // kernels compiled
  double compile_ms = 0.0;    // total wall time spent compiling
};

class ShaderCache {
 public:
  // `dir` = std::nullopt keeps the cache in memory only.
  explicit ShaderCache(std::optional<std::filesystem::path> dir = default_cache_dir());
  ShaderCache(const ShaderCache&) = delete;
  ShaderCache& operator=(const ShaderCache&) = delete;

  // The compiled kernel for this source; the reference stays valid as long as the cache.
  const CompiledKernel& get(const KernelInterface& iface, std::string glsl,
                            const CompileOptions& options = {});

  static std::string key_of(std::string_view glsl, const CompileOptions& options);
  const std::optional<std::filesystem::path>& dir() const { return dir_; }
  std::filesystem::path file_for(std::string_view key) const;  // requires a disk cache

  ShaderCacheStats stats() const;
  std::string report() const;  // "shader cache: 3 memory hits, 1 disk hit, 2 compiled (41.2 ms)"

 private:
  std::optional<std::vector<uint32_t>> load(std::string_view key) const;
  void store(std::string_view key, const std::vector<uint32_t>& spirv) const;
  const CompiledKernel& remember(CompiledKernel kernel);
  // nullopt: not in memory; nullptr: the binary was, now in kernel.spirv; else the kernel.
  std::optional<const CompiledKernel*> find_in_memory(CompiledKernel& kernel);

  std::optional<std::filesystem::path> dir_;
  mutable std::mutex mutex_;
  // Keyed by the key and the whole interface: a kernel is never handed another's interface.
  std::unordered_map<std::string, std::unique_ptr<CompiledKernel>> kernels_;
  std::unordered_map<std::string, std::vector<uint32_t>> binaries_;  // by key
  ShaderCacheStats stats_;
};

// The process-wide cache on default_cache_dir().
ShaderCache& default_shader_cache();

}  // namespace bdsl::codegen
