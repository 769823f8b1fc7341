// A compute pipeline built from a CompiledKernel: one storage-buffer binding per BindingInfo in
// set 0, a push-constant range of iface.push_bytes, the shared VkPipelineCache. Refuses, naming the
// kernel, an interface that is malformed or that this device cannot run.
#pragma once
#include <vulkan/vulkan.h>

#include <string>
#include <vector>

#include "codegen/kernel_interface.h"
#include "runtime/device_info.h"

namespace bdsl::rt {

class Context;

class Pipeline {
 public:
  Pipeline(Context& ctx, const CompiledKernel& kernel);
  Pipeline() = default;  // none yet: one is moved in later (ops::PipelineBatch builds them together)
  ~Pipeline();
  Pipeline(Pipeline&& other) noexcept;
  Pipeline& operator=(Pipeline&& other) noexcept;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The kernel's interface, bindings sorted by binding number.
  const KernelInterface& iface() const { return iface_; }
  const std::string& name() const { return iface_.name; }
  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  // What the driver says of the compiled kernel ("Register Count", ...: names and meanings are
  // the driver's), where the context keeps pipeline statistics; empty otherwise.
  struct Statistic {
    std::string name;
    double value;
  };
  std::vector<Statistic> statistics() const;

 private:
  void release() noexcept;
  void create_layouts();
  void create_pipeline(const CompiledKernel& kernel);

  Context* ctx_ = nullptr;
  KernelInterface iface_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

// Throws std::invalid_argument naming the kernel when the interface contradicts itself
// (duplicate bindings, push fields outside push_bytes, a zero workgroup dimension, ...).
void check_interface(const KernelInterface& iface);
// Throws std::runtime_error "device X lacks <feature> needed by kernel Y", or names the limit.
void check_device_can_run(const DeviceInfo& device, const KernelInterface& iface);

}  // namespace bdsl::rt
