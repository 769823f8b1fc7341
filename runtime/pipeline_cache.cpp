#include "runtime/pipeline_cache.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>
#include <vector>

#include "runtime/vk_error.h"

namespace bdsl::rt {
namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%x", v);
  return buf;
}

}  // namespace

std::string PipelineCache::file_name(const DeviceInfo& info) {
  return "pipeline-cache-" + hex(info.vendor_id) + "-" + hex(info.device_id) + "-" +
         hex(info.driver_version) + ".bin";
}

bool PipelineCache::header_matches(std::string_view data, const DeviceInfo& info) {
  VkPipelineCacheHeaderVersionOne header;
  if (data.size() < sizeof header) return false;
  std::memcpy(&header, data.data(), sizeof header);
  return header.headerSize >= sizeof header && header.headerSize <= data.size() &&
         header.headerVersion == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
         header.vendorID == info.vendor_id && header.deviceID == info.device_id &&
         std::memcmp(header.pipelineCacheUUID, info.pipeline_cache_uuid.data(), VK_UUID_SIZE) == 0;
}

PipelineCache::PipelineCache(VkDevice device, const DeviceInfo& info,
                             std::optional<std::filesystem::path> dir)
    : device_(device) {
  std::string data;
  if (dir) {
    file_ = *dir / file_name(info);
    data = read_all(*file_);
    loaded_ = header_matches(data, info);
    if (!loaded_) data.clear();
  }
  VkPipelineCacheCreateInfo create{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  create.initialDataSize = data.size();
  create.pInitialData = data.data();
  vk_check(vkCreatePipelineCache(device_, &create, nullptr, &cache_), "vkCreatePipelineCache");
}

PipelineCache::~PipelineCache() {
  save();
  vkDestroyPipelineCache(device_, cache_, nullptr);
}

void PipelineCache::save() const {
  if (!file_) return;
  size_t size = 0;
  if (vkGetPipelineCacheData(device_, cache_, &size, nullptr) != VK_SUCCESS || size == 0) return;
  std::vector<char> data(size);
  if (vkGetPipelineCacheData(device_, cache_, &size, data.data()) != VK_SUCCESS) return;
  std::error_code error;
  std::filesystem::create_directories(file_->parent_path(), error);
  auto temp = *file_;
  temp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(size));
    if (!out) {
      std::cerr << "bitnet-dsl: cannot write the pipeline cache " << temp << "\n";
      return;
    }
  }
  std::filesystem::rename(temp, *file_, error);
  if (error) std::filesystem::remove(temp, error);
}

}  // namespace bdsl::rt
