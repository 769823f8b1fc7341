#include "runtime/pipeline.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <utility>

#include "runtime/context.h"
#include "runtime/vk_error.h"

namespace bdsl::rt {
namespace {

std::string kernel_label(const KernelInterface& iface) { return "kernel '" + iface.name + "'"; }

void check_push_fields(const KernelInterface& iface) {
  if (iface.push_bytes % 4)
    throw std::invalid_argument(kernel_label(iface) + ": push_bytes " +
                                std::to_string(iface.push_bytes) + " is not a multiple of 4");
  for (const PushField& f : iface.push_fields) {
    if (f.offset % f.type.align() || f.offset + f.type.bytes() > iface.push_bytes)
      throw std::invalid_argument(kernel_label(iface) + ": push constant '" + f.name + "' (" +
                                  to_string(f.type) + " at offset " + std::to_string(f.offset) +
                                  ") is misaligned or outside the " +
                                  std::to_string(iface.push_bytes) + "-byte block");
  }
}

void check_limit(const KernelInterface& iface, const DeviceInfo& device, const char* what,
                 uint64_t wanted, uint64_t limit) {
  if (wanted > limit)
    throw std::runtime_error("device " + device.name + " cannot run " + kernel_label(iface) +
                             ": " + what + " is " + std::to_string(wanted) +
                             " but the device allows at most " + std::to_string(limit));
}

}  // namespace

void check_interface(const KernelInterface& iface) {
  if (iface.name.empty()) throw std::invalid_argument("a kernel interface needs a name");
  std::set<uint32_t> seen;
  for (const BindingInfo& b : iface.bindings)
    if (!seen.insert(b.binding).second)
      throw std::invalid_argument(kernel_label(iface) + ": binding " + std::to_string(b.binding) +
                                  " ('" + b.name + "') is declared twice");
  for (uint32_t size : iface.workgroup_size)
    if (size == 0) throw std::invalid_argument(kernel_label(iface) + ": a workgroup size is 0");
  check_push_fields(iface);
}

void check_device_can_run(const DeviceInfo& device, const KernelInterface& iface) {
  const auto missing = device.missing(iface.features);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw std::runtime_error("device " + device.name + " lacks " + list + " needed by " +
                             kernel_label(iface));
  }
  const auto& wg = iface.workgroup_size;
  const char* axis[] = {"workgroup size x", "workgroup size y", "workgroup size z"};
  for (int i = 0; i < 3; ++i) check_limit(iface, device, axis[i], wg[i], device.max_workgroup_size[i]);
  check_limit(iface, device, "workgroup invocations", uint64_t{wg[0]} * wg[1] * wg[2],
              device.max_workgroup_invocations);
  check_limit(iface, device, "shared memory (bytes)", iface.shared_bytes, device.max_shared_memory);
  check_limit(iface, device, "push constant block (bytes)", iface.push_bytes,
              device.max_push_constants);
}

Pipeline::Pipeline(Context& ctx, const CompiledKernel& kernel) : ctx_(&ctx), iface_(kernel.iface) {
  check_interface(iface_);
  check_device_can_run(ctx.info(), iface_);
  if (kernel.spirv.empty())
    throw std::invalid_argument(kernel_label(iface_) + ": no SPIR-V (was it compiled?)");
  std::sort(iface_.bindings.begin(), iface_.bindings.end(),
            [](const BindingInfo& a, const BindingInfo& b) { return a.binding < b.binding; });
  try {
    create_layouts();
    create_pipeline(kernel);
  } catch (...) {
    release();
    throw;
  }
}

void Pipeline::create_layouts() {
  std::vector<VkDescriptorSetLayoutBinding> bindings;
  for (const BindingInfo& b : iface_.bindings)
    bindings.push_back({b.binding, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                        VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  VkDescriptorSetLayoutCreateInfo set{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set.bindingCount = static_cast<uint32_t>(bindings.size());
  set.pBindings = bindings.data();
  vk_check(vkCreateDescriptorSetLayout(ctx_->device(), &set, nullptr, &set_layout_),
           "vkCreateDescriptorSetLayout");
  const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, iface_.push_bytes};
  VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &set_layout_;
  layout.pushConstantRangeCount = iface_.push_bytes ? 1 : 0;
  layout.pPushConstantRanges = &range;
  vk_check(vkCreatePipelineLayout(ctx_->device(), &layout, nullptr, &layout_),
           "vkCreatePipelineLayout");
}

void Pipeline::create_pipeline(const CompiledKernel& kernel) {
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = kernel.spirv.size() * sizeof(uint32_t);
  module_info.pCode = kernel.spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  vk_check(vkCreateShaderModule(ctx_->device(), &module_info, nullptr, &module),
           ("vkCreateShaderModule for " + kernel_label(iface_)).c_str());
  std::vector<VkSpecializationMapEntry> entries;
  std::vector<uint32_t> values;
  for (const auto& [id, value] : kernel.spec_constants) {
    entries.push_back({id, static_cast<uint32_t>(values.size() * 4), 4});
    values.push_back(value);
  }
  const VkSpecializationInfo spec{static_cast<uint32_t>(entries.size()), entries.data(),
                                  values.size() * 4, values.data()};
  VkComputePipelineCreateInfo create{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  create.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  create.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  create.stage.module = module;
  create.stage.pName = "main";
  create.stage.pSpecializationInfo = entries.empty() ? nullptr : &spec;
  create.layout = layout_;
  if (ctx_->pipeline_statistics()) create.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  const VkResult result = vkCreateComputePipelines(
      ctx_->device(), ctx_->pipeline_cache().handle(), 1, &create, nullptr, &pipeline_);
  vkDestroyShaderModule(ctx_->device(), module, nullptr);
  vk_check(result, ("vkCreateComputePipelines for " + kernel_label(iface_)).c_str());
}

Pipeline::~Pipeline() { release(); }

void Pipeline::release() noexcept {
  if (!ctx_) return;
  if (pipeline_) vkDestroyPipeline(ctx_->device(), pipeline_, nullptr);
  if (layout_) vkDestroyPipelineLayout(ctx_->device(), layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(ctx_->device(), set_layout_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  layout_ = VK_NULL_HANDLE;
  set_layout_ = VK_NULL_HANDLE;
}

Pipeline::Pipeline(Pipeline&& other) noexcept { *this = std::move(other); }

Pipeline& Pipeline::operator=(Pipeline&& other) noexcept {
  if (this == &other) return *this;
  release();
  ctx_ = std::exchange(other.ctx_, nullptr);
  iface_ = std::move(other.iface_);
  set_layout_ = std::exchange(other.set_layout_, VK_NULL_HANDLE);
  layout_ = std::exchange(other.layout_, VK_NULL_HANDLE);
  pipeline_ = std::exchange(other.pipeline_, VK_NULL_HANDLE);
  return *this;
}

std::vector<Pipeline::Statistic> Pipeline::statistics() const {
  if (!ctx_ || !ctx_->pipeline_statistics()) return {};
  auto properties = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(ctx_->device(), "vkGetPipelineExecutablePropertiesKHR"));
  auto statistics = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(ctx_->device(), "vkGetPipelineExecutableStatisticsKHR"));
  if (!properties || !statistics) return {};
  const VkPipelineInfoKHR info{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, nullptr, pipeline_};
  uint32_t executables = 0;
  vk_check(properties(ctx_->device(), &info, &executables, nullptr), "vkGetPipelineExecutablePropertiesKHR");
  std::vector<Statistic> out;
  for (uint32_t e = 0; e < executables; ++e) {
    const VkPipelineExecutableInfoKHR which{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, nullptr, pipeline_, e};
    uint32_t count = 0;
    vk_check(statistics(ctx_->device(), &which, &count, nullptr), "vkGetPipelineExecutableStatisticsKHR");
    std::vector<VkPipelineExecutableStatisticKHR> stats(count, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    vk_check(statistics(ctx_->device(), &which, &count, stats.data()), "vkGetPipelineExecutableStatisticsKHR");
    for (const auto& s : stats) {
      double v = 0;
      switch (s.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: v = s.value.b32; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: v = double(s.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: v = double(s.value.u64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: v = s.value.f64; break;
        default: continue;
      }
      out.push_back({s.name, v});
    }
  }
  return out;
}

}  // namespace bdsl::rt
