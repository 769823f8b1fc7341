#include "codegen/shader_cache.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "codegen/sha256.h"

namespace bdsl::codegen {
namespace {

// Bump when the key recipe or the file layout changes: old entries then simply miss.
constexpr std::string_view kFormatVersion = "bitnet-dsl shader cache v1";
constexpr char kFileMagic[8] = {'B', 'D', 'S', 'L', 'S', 'P', 'V', '1'};
constexpr uint32_t kSpirvMagic = 0x07230203u;
constexpr size_t kDigestChars = 64;

// File layout: magic, payload byte count (u64), hex SHA-256 of the payload, payload (SPIR-V).
struct FileHeader {
  char magic[8];
  uint64_t payload_bytes;
  char digest[kDigestChars];
};

std::string_view as_bytes(const std::vector<uint32_t>& words) {
  return {reinterpret_cast<const char*>(words.data()), words.size() * sizeof(uint32_t)};
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

// Parses a cache file; anything short, mismatched or corrupt is a miss, never trusted.
std::optional<std::vector<uint32_t>> parse_entry(const std::string& file) {
  FileHeader header;
  if (file.size() < sizeof header) return std::nullopt;
  std::memcpy(&header, file.data(), sizeof header);
  const std::string_view payload(file.data() + sizeof header, file.size() - sizeof header);
  if (std::memcmp(header.magic, kFileMagic, sizeof kFileMagic) != 0) return std::nullopt;
  if (header.payload_bytes != payload.size() || payload.size() % 4 != 0 || payload.size() < 20)
    return std::nullopt;
  if (sha256_hex(payload) != std::string_view(header.digest, kDigestChars)) return std::nullopt;
  std::vector<uint32_t> spirv(payload.size() / 4);
  std::memcpy(spirv.data(), payload.data(), payload.size());
  if (spirv[0] != kSpirvMagic) return std::nullopt;
  return spirv;
}

void warn_once(const std::string& message) {
  static std::once_flag once;
  std::call_once(once, [&] { std::cerr << "bitnet-dsl: " << message << " (warned once)\n"; });
}

// The whole interface as text: two interfaces share a memory entry only when this is equal.
std::string interface_text(const KernelInterface& iface) {
  std::ostringstream out;
  out << iface.name.size() << ":" << iface.name << ";b";
  for (const BindingInfo& b : iface.bindings)
    out << "," << b.binding << ":" << b.name.size() << ":" << b.name << ":" << to_string(b.access)
        << ":" << to_string(b.element);
  out << ";p";
  for (const PushField& f : iface.push_fields)
    out << "," << f.name.size() << ":" << f.name << ":" << to_string(f.type) << "@" << f.offset;
  const KernelFeatures& x = iface.features;
  out << ";" << iface.push_bytes << ";" << iface.workgroup_size[0] << "x" << iface.workgroup_size[1]
      << "x" << iface.workgroup_size[2] << ";" << iface.shared_bytes << ";f" << x.int_dot_product
      << x.subgroup_basic << x.subgroup_arithmetic << x.subgroup_shuffle << x.subgroup_ballot
      << x.float16 << x.storage16 << x.atomics << x.int8 << x.storage8 << x.cooperative_matrix_nv << x.memory_model;
  for (const MatrixShape& m : x.matrix_shapes) out << "," << to_string(m);
  return out.str();
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

std::filesystem::path default_cache_dir() {
  if (const char* dir = std::getenv("BDSL_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::filesystem::path(xdg) / "bitnet-dsl";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "bitnet-dsl";
  return std::filesystem::temp_directory_path() / "bitnet-dsl";
}

ShaderCache::ShaderCache(std::optional<std::filesystem::path> dir) : dir_(std::move(dir)) {}

std::string ShaderCache::key_of(std::string_view glsl, const CompileOptions& options) {
  std::string material;
  material += kFormatVersion;
  material += '\n' + compiler_version();
  material += '\n' + options.target_env();
  material += '\n' + options.serialize();
  material += "\nglsl " + std::to_string(glsl.size()) + "\n";
  material += glsl;
  return sha256_hex(material);
}

std::filesystem::path ShaderCache::file_for(std::string_view key) const {
  if (!dir_) throw std::logic_error("ShaderCache::file_for: this cache has no disk directory");
  return *dir_ / (std::string(key) + ".spv");
}

std::optional<std::vector<uint32_t>> ShaderCache::load(std::string_view key) const {
  if (!dir_) return std::nullopt;
  return parse_entry(read_file(file_for(key)));
}

// Written to a unique temporary file and renamed: readers never see half a file.
void ShaderCache::store(std::string_view key, const std::vector<uint32_t>& spirv) const {
  if (!dir_) return;
  std::error_code error;
  std::filesystem::create_directories(*dir_, error);
  const auto path = file_for(key);
  auto temp = path;
  temp += ".tmp." + std::to_string(::getpid()) + "." +
          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  FileHeader header{};
  std::memcpy(header.magic, kFileMagic, sizeof kFileMagic);
  header.payload_bytes = spirv.size() * sizeof(uint32_t);
  const std::string digest = sha256_hex(as_bytes(spirv));
  std::memcpy(header.digest, digest.data(), kDigestChars);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&header), sizeof header);
    out << as_bytes(spirv);
    if (!out) {
      warn_once("cannot write the shader cache file " + temp.string());
      std::filesystem::remove(temp, error);
      return;
    }
  }
  std::filesystem::rename(temp, path, error);
  if (error) {
    warn_once("cannot rename " + temp.string() + " to " + path.string() + ": " + error.message());
    std::filesystem::remove(temp, error);
  }
}

const CompiledKernel& ShaderCache::remember(CompiledKernel kernel) {
  std::lock_guard lock(mutex_);
  binaries_.try_emplace(kernel.key, kernel.spirv);
  auto& slot = kernels_[kernel.key + "\n" + interface_text(kernel.iface)];
  if (!slot) slot = std::make_unique<CompiledKernel>(std::move(kernel));
  return *slot;  // another thread may have got here first with the same binary: keep its copy
}

// Memory first: the exact kernel, or the same binary under another interface.
std::optional<const CompiledKernel*> ShaderCache::find_in_memory(CompiledKernel& kernel) {
  std::lock_guard lock(mutex_);
  if (auto it = kernels_.find(kernel.key + "\n" + interface_text(kernel.iface));
      it != kernels_.end()) {
    ++stats_.memory_hits;
    return it->second.get();
  }
  if (auto it = binaries_.find(kernel.key); it != binaries_.end()) {
    ++stats_.memory_hits;
    kernel.spirv = it->second;
    return nullptr;
  }
  return std::nullopt;
}

const CompiledKernel& ShaderCache::get(const KernelInterface& iface, std::string glsl,
                                       const CompileOptions& options) {
  std::string key = key_of(glsl, options);
  CompiledKernel kernel{iface, std::move(glsl), std::move(key), {}, options.spec_constants};
  if (auto found = find_in_memory(kernel)) {
    if (*found) return **found;
  } else if (auto spirv = load(kernel.key)) {
    kernel.spirv = std::move(*spirv);
    std::lock_guard lock(mutex_);
    ++stats_.disk_hits;
  } else {
    const auto start = std::chrono::steady_clock::now();
    kernel.spirv = compile_glsl(iface.name, kernel.glsl, options);
    const double ms = elapsed_ms(start);
    store(kernel.key, kernel.spirv);
    std::lock_guard lock(mutex_);
    ++stats_.misses;
    stats_.compile_ms += ms;
  }
  return remember(std::move(kernel));
}

ShaderCacheStats ShaderCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::string ShaderCache::report() const {
  const ShaderCacheStats s = stats();
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", s.compile_ms);
  return "shader cache: " + std::to_string(s.memory_hits) + " memory hits, " +
         std::to_string(s.disk_hits) + " disk hits, " + std::to_string(s.misses) +
         " compiled (" + ms + " ms)" + (dir_ ? " in " + dir_->string() : " (memory only)");
}

ShaderCache& default_shader_cache() {
  static ShaderCache cache;
  return cache;
}

}  // namespace bdsl::codegen
