// GLSL compute shader -> SPIR-V, in-process: glslang, then SPIRV-Tools validation and optimisation.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bdsl::codegen {

struct CompileOptions {
  int vulkan_minor = 2;     // Vulkan 1.2 -> SPIR-V 1.5; Vulkan 1.3 -> SPIR-V 1.6
  bool optimize = true;     // spirv-opt performance passes
  bool validate = true;     // spirv-val before (and after) optimising
  bool debug_info = false;  // OpLine/OpSource in the binary, for debuggers
  std::vector<std::pair<std::string, std::string>> defines;  // #define NAME VALUE, in order
  // Specialization constants (constant_id -> 32-bit value), applied when the pipeline is built.
  std::vector<std::pair<uint32_t, uint32_t>> spec_constants;

  // Every field above in a fixed text form: part of the shader cache key.
  std::string serialize() const;
  std::string target_env() const;  // "vulkan1.2/spv1.5"
};

// A kernel that failed to compile, validate or optimise; what() names the kernel and says why.
class CompileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<uint32_t> compile_glsl(std::string_view kernel_name, std::string_view glsl,
                                   const CompileOptions& options = {});

// The compilers' versions ("glslang 12.0.0; SPIRV-Tools v2023.1 ..."): part of the cache key.
std::string compiler_version();

// The lines glslang's info log names ("ERROR: 0:12: ..."), each with `context` lines around it,
// numbered; the marked lines start with '>'. Used in CompileError messages.
std::string excerpt_lines(std::string_view glsl, std::string_view info_log, int context = 2);

}  // namespace bdsl::codegen
