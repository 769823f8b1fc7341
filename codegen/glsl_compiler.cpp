#include "codegen/glsl_compiler.h"

#include <glslang/build_info.h>
#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>

#include <algorithm>
#include <iomanip>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

namespace bdsl::codegen {
namespace {

struct Target {
  glslang::EShTargetClientVersion client;
  glslang::EShTargetLanguageVersion spirv;
  spv_target_env env;
};

Target target_for(int vulkan_minor) {
  switch (vulkan_minor) {
    case 2: return {glslang::EShTargetVulkan_1_2, glslang::EShTargetSpv_1_5, SPV_ENV_VULKAN_1_2};
    case 3: return {glslang::EShTargetVulkan_1_3, glslang::EShTargetSpv_1_6, SPV_ENV_VULKAN_1_3};
  }
  throw CompileError("CompileOptions: vulkan_minor must be 2 or 3, got " +
                     std::to_string(vulkan_minor));
}

// glslang needs one process-wide initialisation; after it, separate TShaders compile in parallel.
void init_glslang_once() {
  static std::once_flag once;
  std::call_once(once, [] { glslang::InitializeProcess(); });
}

std::string preamble_of(const CompileOptions& options) {
  std::string text;
  for (const auto& [name, value] : options.defines) text += "#define " + name + " " + value + "\n";
  return text;
}

std::vector<uint32_t> glsl_to_spirv(std::string_view name, std::string_view glsl,
                                    const CompileOptions& options, const Target& target) {
  init_glslang_once();
  glslang::TShader shader(EShLangCompute);
  const char* text = glsl.data();
  const int length = static_cast<int>(glsl.size());
  const std::string source_name(name);
  const char* names[] = {source_name.c_str()};
  shader.setStringsWithLengthsAndNames(&text, &length, names, 1);
  const std::string preamble = preamble_of(options);
  shader.setPreamble(preamble.c_str());
  shader.setEnvInput(glslang::EShSourceGlsl, EShLangCompute, glslang::EShClientVulkan, 100);
  shader.setEnvClient(glslang::EShClientVulkan, target.client);
  shader.setEnvTarget(glslang::EShTargetSpv, target.spirv);
  const auto messages = static_cast<EShMessages>(EShMsgSpvRules | EShMsgVulkanRules);
  if (!shader.parse(GetDefaultResources(), 450, false, messages)) {
    const std::string log = shader.getInfoLog();
    throw CompileError("kernel '" + source_name + "': GLSL compile failed:\n" + log +
                       "in the GLSL source:\n" + excerpt_lines(glsl, log));
  }
  glslang::TProgram program;
  program.addShader(&shader);
  if (!program.link(messages))
    throw CompileError("kernel '" + source_name + "': GLSL link failed:\n" + program.getInfoLog());
  glslang::SpvOptions spv_options;
  spv_options.generateDebugInfo = options.debug_info;
  spv_options.disableOptimizer = true;  // SPIRV-Tools runs below, with our own settings
  std::vector<uint32_t> spirv;
  spv::SpvBuildLogger logger;
  glslang::GlslangToSpv(*program.getIntermediate(EShLangCompute), spirv, &logger, &spv_options);
  if (spirv.empty())
    throw CompileError("kernel '" + source_name + "': SPIR-V generation failed:\n" +
                       logger.getAllMessages());
  return spirv;
}

// Collects SPIRV-Tools diagnostics into one string for the error message.
spvtools::MessageConsumer collect_into(std::string& out) {
  return [&out](spv_message_level_t, const char*, const spv_position_t& pos, const char* msg) {
    out += "  [word " + std::to_string(pos.index) + "] " + msg + "\n";
  };
}

void validate_spirv(std::string_view name, const std::vector<uint32_t>& spirv,
                    const Target& target, const char* stage) {
  spvtools::SpirvTools tools(target.env);
  std::string diagnostics;
  tools.SetMessageConsumer(collect_into(diagnostics));
  if (!tools.Validate(spirv))
    throw CompileError("kernel '" + std::string(name) + "': SPIR-V validation failed " + stage +
                       ":\n" + diagnostics);
}

std::vector<uint32_t> optimize_spirv(std::string_view name, const std::vector<uint32_t>& spirv,
                                     const Target& target) {
  spvtools::Optimizer optimizer(target.env);
  std::string diagnostics;
  optimizer.SetMessageConsumer(collect_into(diagnostics));
  optimizer.RegisterPerformancePasses();
  spvtools::OptimizerOptions opt_options;
  opt_options.set_run_validator(false);  // validated (or deliberately not) by the caller
  std::vector<uint32_t> out;
  if (!optimizer.Run(spirv.data(), spirv.size(), &out, opt_options))
    throw CompileError("kernel '" + std::string(name) + "': spirv-opt failed:\n" + diagnostics);
  return out;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

std::string CompileOptions::serialize() const {
  std::ostringstream out;
  out << "vulkan_minor=" << vulkan_minor << ";optimize=" << optimize << ";validate=" << validate
      << ";debug_info=" << debug_info << ";defines=" << defines.size();
  // Lengths before contents, so no choice of names or values can make two lists print alike.
  for (const auto& [name, value] : defines)
    out << ";" << name.size() << ":" << name << "=" << value.size() << ":" << value;
  out << ";spec_constants=" << spec_constants.size();
  for (const auto& [id, value] : spec_constants) out << ";" << id << "=" << value;
  return out.str();
}

std::string CompileOptions::target_env() const {
  return vulkan_minor == 3 ? "vulkan1.3/spv1.6" : "vulkan1." + std::to_string(vulkan_minor) +
                                                      "/spv1.5";
}

std::string compiler_version() {
  return "glslang " + std::to_string(GLSLANG_VERSION_MAJOR) + "." +
         std::to_string(GLSLANG_VERSION_MINOR) + "." + std::to_string(GLSLANG_VERSION_PATCH) +
         GLSLANG_VERSION_FLAVOR + "; " + spvSoftwareVersionDetailsString();
}

std::string excerpt_lines(std::string_view glsl, std::string_view info_log, int context) {
  static const std::regex located(R"((ERROR|WARNING): [^:\n]*:(\d+):)");
  std::set<int> marked;
  const std::string log(info_log);
  for (auto it = std::sregex_iterator(log.begin(), log.end(), located);
       it != std::sregex_iterator(); ++it)
    marked.insert(std::stoi((*it)[2].str()));
  const auto lines = split_lines(glsl);
  std::set<int> shown;
  for (int line : marked)
    for (int i = std::max(1, line - context);
         i <= std::min<int>(static_cast<int>(lines.size()), line + context); ++i)
      shown.insert(i);
  std::ostringstream out;
  int previous = 0;
  for (int i : shown) {
    if (previous != 0 && i != previous + 1) out << "     ...\n";
    out << (marked.count(i) ? "> " : "  ") << std::setw(4) << i << " | " << lines[i - 1] << "\n";
    previous = i;
  }
  if (shown.empty()) out << "  (glslang named no line)\n";
  return out.str();
}

std::vector<uint32_t> compile_glsl(std::string_view kernel_name, std::string_view glsl,
                                   const CompileOptions& options) {
  const Target target = target_for(options.vulkan_minor);
  std::vector<uint32_t> spirv = glsl_to_spirv(kernel_name, glsl, options, target);
  if (options.validate) validate_spirv(kernel_name, spirv, target, "after glslang");
  if (options.optimize) {
    spirv = optimize_spirv(kernel_name, spirv, target);
    if (options.validate) validate_spirv(kernel_name, spirv, target, "after spirv-opt");
  }
  return spirv;
}

}  // namespace bdsl::codegen
