#include "runtime/graph.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "runtime/barrier.h"
#include "runtime/context.h"
#include "runtime/vk_error.h"

namespace bdsl::rt {
namespace {

std::string kernel_label(const KernelInterface& iface) { return "kernel '" + iface.name + "'"; }

// The bindings a dispatch gives (the graph binds a kernel's parameters itself).
std::string describe_bindings(const KernelInterface& iface) {
  std::string out;
  for (const BindingInfo& b : iface.bindings)
    if (!b.parameters) out += (out.empty() ? "" : ", ") + b.name + ": " + to_string(b.access);
  return out;
}

size_t given_bindings(const KernelInterface& iface) {
  return size_t(std::count_if(iface.bindings.begin(), iface.bindings.end(), [](const BindingInfo& b) { return !b.parameters; }));
}

std::string describe_field(const PushField& f) { return f.parameter ? "parameter " + to_string(*f.parameter) : to_string(f.type); }
std::string describe_value(const PushValue& v) { return v.parameter_graph ? "parameter " + to_string(v.type) : to_string(v.type); }

template <class T, class F>
std::string describe_all(const std::vector<T>& items, F describe) {
  std::string out;
  for (const T& item : items) out += (out.empty() ? "" : ", ") + describe(item);
  return out;
}

void check_binding(const KernelInterface& iface, const BindingInfo& info, const BufferSlice& s,
                   const DeviceInfo& device) {
  const std::string where = "binding " + std::to_string(info.binding) + " ('" + info.name +
                            "') of " + kernel_label(iface);
  if (!s.buffer || !*s.buffer) throw std::invalid_argument(where + ": the buffer is empty");
  if (s.vk_offset() % device.min_storage_buffer_offset_alignment)
    throw std::invalid_argument(where + ": offset " + std::to_string(s.vk_offset()) +
                                " is not a multiple of the device's storage buffer alignment " +
                                std::to_string(device.min_storage_buffer_offset_alignment));
  if (s.bytes > device.max_storage_buffer_range)
    throw std::invalid_argument(where + ": " + std::to_string(s.bytes) +
                                " bytes exceed the device's maxStorageBufferRange of " +
                                std::to_string(device.max_storage_buffer_range));
  if (s.buffer->read_only() && info.access != Access::Read)
    throw std::invalid_argument(where + " writes, but buffer '" + s.buffer->name() +
                                "' is a read-only view of host memory (Buffer::over_host)");
  if (s.buffer->holds() && *s.buffer->holds() != info.element.kind)
    throw std::invalid_argument(where + " reads " + to_string(info.element) + " but buffer '" + s.buffer->name() +
                                "' holds " + to_string(Type{*s.buffer->holds(), 1}));
  if (s.bytes % info.element.align())
    throw std::invalid_argument(where + ": " + std::to_string(s.bytes) +
                                " bytes is not a whole number of " + to_string(info.element) +
                                " elements");
}

// Two bindings of one dispatch over overlapping bytes of one buffer, one of them written: the
// kernel's reads and writes of the two race unless the caller vouches for them (`disjoint`).
void check_aliasing(const KernelInterface& iface, std::span<const BufferSlice> bindings, std::span<const uint32_t> disjoint) {
  auto vouched = [&](size_t i) { return std::find(disjoint.begin(), disjoint.end(), i) != disjoint.end(); };
  for (size_t i = 0; i < bindings.size(); ++i)
    for (size_t j = i + 1; j < bindings.size(); ++j) {
      const BufferSlice &a = bindings[i], &b = bindings[j];
      if (!a.buffer || !b.buffer || a.handle() != b.handle()) continue;
      if (!writes(iface.bindings[i].access) && !writes(iface.bindings[j].access)) continue;
      const bool overlap = a.vk_offset() < b.vk_offset() + b.bytes && b.vk_offset() < a.vk_offset() + a.bytes;
      if (!overlap || vouched(i) || vouched(j)) continue;
      throw std::invalid_argument(kernel_label(iface) + ": bindings '" + iface.bindings[i].name + "' and '" +
                                  iface.bindings[j].name + "' overlap in buffer '" + a.buffer->name() +
                                  "' and one is written: bind disjoint ranges, or declare them disjoint");
    }
}

// `lowest`: 1 for a recorded grid, 0 for a grid parameter (0 skips the dispatch).
void check_grid(const std::string& label, Grid grid, const DeviceInfo& device, uint32_t lowest = 1) {
  const uint32_t counts[] = {grid.x, grid.y, grid.z};
  for (int i = 0; i < 3; ++i)
    if (counts[i] < lowest || counts[i] > device.max_workgroup_count[i])
      throw std::invalid_argument(
          label + ": grid " + std::to_string(grid.x) + "x" +
          std::to_string(grid.y) + "x" + std::to_string(grid.z) + " is outside " + std::to_string(lowest) + ".." +
          std::to_string(device.max_workgroup_count[i]) + " in dimension " + "xyz"[i]);
}

// Every access the given stages make (shader or transfer).
VkAccessFlags accesses_of(VkPipelineStageFlags stages) {
  VkAccessFlags access = 0;
  for (VkPipelineStageFlags s : {VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT})
    if (stages & s) access |= read_access(s) | write_access(s);
  return access;
}

RangeAccess range_of(const BufferSlice& s, bool write, VkPipelineStageFlags stage) {
  return {reinterpret_cast<uint64_t>(s.handle()), s.vk_offset(), s.vk_offset() + s.bytes, write, stage};
}

}  // namespace

Graph::Graph(Context& ctx, GraphOptions options) : ctx_(ctx), options_(std::move(options)) {
  if (options_.timestamps && !ctx.info().timestamps)
    throw std::runtime_error("graph '" + options_.name + "': timestamps requested but device " +
                             ctx.info().name + " has none on its compute queue");
}

Graph::~Graph() {
  VkDevice device = ctx_.device();
  for (uint64_t t = waited_ + 1; t <= submitted_; ++t)  // never free what the device still runs
    vkWaitForFences(device, 1, &fence_[t % kInFlight], VK_TRUE, UINT64_MAX);
  for (uint32_t i = 0; i < kInFlight; ++i) {
    if (fence_[i]) vkDestroyFence(device, fence_[i], nullptr);
    if (cmd_[i]) ctx_.free_command_buffer(cmd_[i]);
  }
  if (queries_) vkDestroyQueryPool(device, queries_, nullptr);
  if (pool_) vkDestroyDescriptorPool(device, pool_, nullptr);  // frees the sets with it
}

void Graph::check_open(const char* what) const {
  if (finished())
    throw std::logic_error("graph '" + options_.name + "': " + what + " after finish()");
}

void Graph::add(Op op, std::span<const RangeAccess> accesses) {
  op.barrier = tracker_.add(accesses);
  if (op.barrier.needed) ++stats_.barriers;
  if (ops_.empty() || op.barrier.needed) ++stats_.steps;
  used_stages_ |= op.stage;
  for (const RangeAccess& a : accesses)
    if (a.write) used_writes_ |= write_access(a.stage);
  ops_.push_back(std::move(op));
}

std::vector<std::byte> Graph::pack_push(const KernelInterface& iface, const PushConstants& push) const {
  bool match = iface.push_fields.size() == push.values.size();
  for (size_t i = 0; match && i < push.values.size(); ++i) {
    const PushField& f = iface.push_fields[i];
    const PushValue& v = push.values[i];
    match = bool(f.parameter) == bool(v.parameter_graph) && (f.parameter ? *f.parameter : f.type) == v.type;
  }
  if (!match)
    throw std::invalid_argument(kernel_label(iface) + " expects push constants (" +
                                describe_all(iface.push_fields, describe_field) + ") but the dispatch passed (" +
                                describe_all(push.values, describe_value) + ")");
  std::vector<std::byte> bytes(iface.push_bytes);
  for (size_t i = 0; i < push.values.size(); ++i) {
    const PushValue& v = push.values[i];
    if (v.parameter_graph && v.parameter_graph != this)
      throw std::invalid_argument(kernel_label(iface) + ": parameter '" + iface.push_fields[i].name +
                                  "' is another graph's, not graph '" + options_.name + "''s");
    std::memcpy(bytes.data() + iface.push_fields[i].offset, v.parameter_graph ? static_cast<const void*>(&v.parameter_word) : v.bytes.data(), 4);
  }
  return bytes;
}

void Graph::dispatch(const Pipeline& pipeline, std::span<const BufferSlice> bindings,
                     const PushConstants& push_constants, Grid grid, std::span<const uint32_t> disjoint) {
  dispatch_with(pipeline, bindings, push_constants, grid, std::nullopt, disjoint);
}

void Graph::dispatch(const Pipeline& pipeline, std::span<const BufferSlice> bindings, const PushConstants& push_constants,
                     const GridParameter& grid) {
  if (grid.graph_ != this)
    throw std::invalid_argument(kernel_label(pipeline.iface()) + ": its grid parameter is another graph's, not graph '" +
                                options_.name + "''s");
  dispatch_with(pipeline, bindings, push_constants, Grid{}, grid.word_, {});
}

void Graph::dispatch_with(const Pipeline& pipeline, std::span<const BufferSlice> given,
                          const PushConstants& push_constants, Grid grid, std::optional<uint32_t> indirect_word,
                          std::span<const uint32_t> disjoint) {
  check_open("dispatch");
  const KernelInterface& iface = pipeline.iface();
  if (given.size() != given_bindings(iface))
    throw std::invalid_argument(kernel_label(iface) + " expects " +
                                std::to_string(given_bindings(iface)) + " bindings (" +
                                describe_bindings(iface) + ") but the dispatch passed " +
                                std::to_string(given.size()));
  // Every binding in the kernel's order; the parameters one (bound at finish) stays empty here.
  std::vector<BufferSlice> bindings;
  size_t next = 0;
  for (const BindingInfo& info : iface.bindings) bindings.push_back(info.parameters ? BufferSlice{} : given[next++]);
  Op op{.name = iface.name, .barrier = {}, .stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT};
  op.pipeline = pipeline.handle();
  op.layout = pipeline.layout();
  op.set_layout = pipeline.set_layout();
  op.push = pack_push(iface, push_constants);
  if (indirect_word)
    op.indirect_word = indirect_word;
  else
    check_grid(kernel_label(iface), grid, ctx_.info());
  op.grid = grid;
  for (uint32_t i : disjoint)
    if (i >= bindings.size())
      throw std::invalid_argument(kernel_label(iface) + ": disjoint binding " + std::to_string(i) + " of " +
                                  std::to_string(bindings.size()));
  check_aliasing(iface, bindings, disjoint);
  std::vector<RangeAccess> accesses;
  for (size_t i = 0; i < bindings.size(); ++i) {
    const BindingInfo& info = iface.bindings[i];
    const BufferSlice& s = bindings[i];
    if (info.parameters) {  // host-written between replays only: nothing to order on the device
      op.bindings.push_back({info.binding, VK_NULL_HANDLE, 0, 0});
      continue;
    }
    check_binding(iface, info, s, ctx_.info());
    op.bindings.push_back({info.binding, s.handle(), s.vk_offset(), s.bytes});
    const bool vouched = std::find(disjoint.begin(), disjoint.end(), i) != disjoint.end();
    for (bool write : {false, true}) {
      if (write ? !writes(info.access) : !reads(info.access)) continue;
      accesses.push_back(range_of(s, write, op.stage));
      accesses.back().disjoint = vouched;
    }
  }
  ++stats_.dispatches;
  add(std::move(op), accesses);
}

std::vector<BufferSlice> Graph::ordered(const KernelInterface& iface, std::span<const Arg> args) const {
  std::vector<BufferSlice> bindings(iface.bindings.size());
  std::vector<bool> given(iface.bindings.size(), false);
  for (const Arg& a : args) {
    const auto it = std::find_if(iface.bindings.begin(), iface.bindings.end(),
                                 [&](const BindingInfo& b) { return b.name == a.name; });
    if (it == iface.bindings.end())
      throw std::invalid_argument(kernel_label(iface) + " has no binding '" + a.name + "' (its bindings: " +
                                  describe_bindings(iface) + ")");
    if (it->parameters)
      throw std::invalid_argument(kernel_label(iface) + ": binding '" + a.name +
                                  "' holds the graph's parameters; the graph binds it itself");
    const size_t i = size_t(it - iface.bindings.begin());
    if (given[i]) throw std::invalid_argument(kernel_label(iface) + ": binding '" + a.name + "' given twice");
    given[i] = true;
    bindings[i] = a.slice;
  }
  std::vector<BufferSlice> out;
  for (size_t i = 0; i < given.size(); ++i) {
    if (iface.bindings[i].parameters) continue;
    if (!given[i])
      throw std::invalid_argument(kernel_label(iface) + ": no buffer for binding '" + iface.bindings[i].name +
                                  "' (its bindings: " + describe_bindings(iface) + ")");
    out.push_back(bindings[i]);
  }
  return out;
}

void Graph::dispatch(const Pipeline& pipeline, std::span<const Arg> args, const PushConstants& push_constants,
                     Grid grid) {
  dispatch(pipeline, std::span<const BufferSlice>(ordered(pipeline.iface(), args)), push_constants, grid);
}

void Graph::dispatch(const Pipeline& pipeline, std::initializer_list<Arg> args, const PushConstants& push_constants,
                     const GridParameter& grid) {
  const auto bindings = ordered(pipeline.iface(), std::span<const Arg>(args.begin(), args.size()));
  dispatch(pipeline, std::span<const BufferSlice>(bindings), push_constants, grid);
}

uint32_t Graph::add_parameter_words(std::initializer_list<uint32_t> values) {
  check_open("a new parameter");
  const auto word = static_cast<uint32_t>(parameter_values_.size());
  parameter_values_.insert(parameter_values_.end(), values);
  return word;
}

GridParameter Graph::grid_parameter(Grid initial) {
  check_grid("graph '" + options_.name + "'", initial, ctx_.info(), 0);
  return GridParameter(*this, add_parameter_words({initial.x, initial.y, initial.z}));
}

uint32_t Graph::parameter_word(uint32_t word) const {
  if (word >= parameter_values_.size())
    throw std::out_of_range("graph '" + options_.name + "': parameter word " + std::to_string(word) + " of " +
                            std::to_string(parameter_values_.size()));
  return parameter_values_[word];
}

void Graph::set_parameter_words(uint32_t word, std::span<const uint32_t> values) {
  if (uint64_t{word} + values.size() > parameter_values_.size())
    throw std::out_of_range("graph '" + options_.name + "': parameter words " + std::to_string(word) + ".." +
                            std::to_string(word + values.size() - 1) + " of " + std::to_string(parameter_values_.size()));
  std::copy(values.begin(), values.end(), parameter_values_.begin() + word);
  if (!parameters_) return;
  wait(submitted_);  // replays in flight read the words
  std::copy(values.begin(), values.end(), parameters_->host_words().begin() + word);
}

Grid GridParameter::get() const {
  return Grid{graph_->parameter_word(word_), graph_->parameter_word(word_ + 1), graph_->parameter_word(word_ + 2)};
}

void GridParameter::set(Grid grid) {
  check_grid("graph '" + graph_->options_.name + "'", grid, graph_->ctx_.info(), 0);
  const uint32_t words[] = {grid.x, grid.y, grid.z};
  graph_->set_parameter_words(word_, words);
}

void Graph::fill(BufferSlice dst, uint32_t word) {
  check_open("fill");
  if (!dst.buffer || dst.offset % 4 || dst.bytes % 4)
    throw std::invalid_argument("graph '" + options_.name +
                                "': fill needs a buffer range whose offset and size are "
                                "multiples of 4");
  dst.buffer->check_writable("fill");
  Op op{.name = "fill", .barrier = {}, .stage = VK_PIPELINE_STAGE_TRANSFER_BIT};
  op.dst = dst.handle();
  op.dst_offset = dst.vk_offset();
  op.bytes = dst.bytes;
  op.word = word;
  const RangeAccess access[] = {range_of(dst, true, op.stage)};
  ++stats_.transfers;
  add(std::move(op), access);
}

void Graph::copy(BufferSlice src, BufferSlice dst) {
  check_open("copy");
  if (!src.buffer || !dst.buffer || src.bytes != dst.bytes)
    throw std::invalid_argument("graph '" + options_.name + "': copy of " +
                                std::to_string(src.bytes) + " bytes into a range of " +
                                std::to_string(dst.bytes) + " bytes");
  dst.buffer->check_writable("copy");
  Op op{.name = "copy", .barrier = {}, .stage = VK_PIPELINE_STAGE_TRANSFER_BIT};
  op.src = src.handle();
  op.src_offset = src.vk_offset();
  op.dst = dst.handle();
  op.dst_offset = dst.vk_offset();
  op.bytes = src.bytes;
  const RangeAccess accesses[] = {range_of(src, false, op.stage), range_of(dst, true, op.stage)};
  ++stats_.transfers;
  add(std::move(op), accesses);
}

// One pool sized exactly for the recorded dispatches; each gets its own set, written once.
void Graph::allocate_descriptor_sets() {
  uint32_t sets = 0, descriptors = 0;
  for (const Op& op : ops_)
    if (!op.bindings.empty()) ++sets, descriptors += static_cast<uint32_t>(op.bindings.size());
  if (sets == 0) return;
  const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
  VkDescriptorPoolCreateInfo pool{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool.maxSets = sets;
  pool.poolSizeCount = 1;
  pool.pPoolSizes = &size;
  vk_check(vkCreateDescriptorPool(ctx_.device(), &pool, nullptr, &pool_), "vkCreateDescriptorPool");
  for (Op& op : ops_) {
    if (op.bindings.empty()) continue;
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = pool_;
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &op.set_layout;
    vk_check(vkAllocateDescriptorSets(ctx_.device(), &alloc, &op.set), "vkAllocateDescriptorSets");
    std::vector<VkDescriptorBufferInfo> infos;
    for (const Binding& b : op.bindings) infos.push_back({b.buffer, b.offset, b.bytes});
    std::vector<VkWriteDescriptorSet> writes;
    for (size_t i = 0; i < op.bindings.size(); ++i) {
      VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      w.dstSet = op.set;
      w.dstBinding = op.bindings[i].binding;
      w.descriptorCount = 1;
      w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      w.pBufferInfo = &infos[i];
      writes.push_back(w);
    }
    vkUpdateDescriptorSets(ctx_.device(), static_cast<uint32_t>(writes.size()), writes.data(), 0,
                           nullptr);
  }
}

void Graph::record_op(VkCommandBuffer cmd, const Op& op) const {
  // The tracker forgets every pending access at a barrier, so it must order them before every
  // later operation of any stage the graph uses, not only this one's (a dump's copy between two
  // dispatches would otherwise leave the second unordered against the first).
  if (op.barrier.needed)
    memory_barrier(cmd, op.barrier.src_stages, op.barrier.src_access, used_stages_,
                   accesses_of(used_stages_));
  if (op.stage == VK_PIPELINE_STAGE_TRANSFER_BIT) {
    if (op.src) {
      const VkBufferCopy region{op.src_offset, op.dst_offset, op.bytes};
      vkCmdCopyBuffer(cmd, op.src, op.dst, 1, &region);
    } else {
      vkCmdFillBuffer(cmd, op.dst, op.dst_offset, op.bytes, op.word);
    }
    return;
  }
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, op.pipeline);
  if (op.set)
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, op.layout, 0, 1, &op.set, 0,
                            nullptr);
  if (!op.push.empty())
    vkCmdPushConstants(cmd, op.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<uint32_t>(op.push.size()), op.push.data());
  if (op.indirect_word)
    vkCmdDispatchIndirect(cmd, parameters_->handle(), parameters_->origin() + uint64_t{*op.indirect_word} * 4);
  else
    vkCmdDispatch(cmd, op.grid.x, op.grid.y, op.grid.z);
}

void Graph::record(VkCommandBuffer cmd) const {
  if (queries_)
    vkCmdResetQueryPool(cmd, queries_, 0, static_cast<uint32_t>(2 * ops_.size()));
  for (size_t i = 0; i < ops_.size(); ++i) {
    const auto query = static_cast<uint32_t>(2 * i);
    if (queries_) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, query);
    record_op(cmd, ops_[i]);
    if (queries_)
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, query + 1);
  }
  // The next submit, a download or the host must see this one's writes.
  if (!ops_.empty()) barrier_to_everything(cmd, used_stages_, used_writes_);
}

void Graph::finish() {
  check_open("finish");
  if (!parameter_values_.empty()) {
    parameters_.emplace(ctx_, parameter_values_.size() * 4,
                        BufferOptions{.host_visible = true, .name = "graph '" + options_.name + "' parameters",
                                      .gpu_reads_often = true, .holds = {}, .indirect = true});
    std::copy(parameter_values_.begin(), parameter_values_.end(), parameters_->host_words().begin());
    for (Op& op : ops_)
      for (Binding& b : op.bindings)
        if (b.buffer == VK_NULL_HANDLE) b = {b.binding, parameters_->handle(), parameters_->origin(), parameters_->size()};
  }
  allocate_descriptor_sets();
  if (options_.timestamps && !ops_.empty()) {
    VkQueryPoolCreateInfo query{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    query.queryType = VK_QUERY_TYPE_TIMESTAMP;
    query.queryCount = static_cast<uint32_t>(2 * ops_.size());
    vk_check(vkCreateQueryPool(ctx_.device(), &query, nullptr, &queries_), "vkCreateQueryPool");
  }
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  for (uint32_t i = 0; i < kInFlight; ++i) {
    vk_check(vkCreateFence(ctx_.device(), &fence, nullptr, &fence_[i]), "vkCreateFence");
    VkCommandBuffer cmd = ctx_.allocate_command_buffer();
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if (vkBeginCommandBuffer(cmd, &begin) != VK_SUCCESS) {
      ctx_.free_command_buffer(cmd);
      throw std::runtime_error("graph '" + options_.name + "': vkBeginCommandBuffer failed");
    }
    record(cmd);
    const VkResult ended = vkEndCommandBuffer(cmd);
    cmd_[i] = cmd;  // owned from here on, freed by the destructor
    vk_check(ended, "vkEndCommandBuffer");
  }
}

void Graph::submit_and_wait() { wait(submit()); }

uint64_t Graph::submit() {
  if (!finished()) finish();
  const uint64_t ticket = submitted_ + 1;
  // The slot's previous replay must be done; with timestamps, every replay before.
  wait(queries_ ? submitted_ : ticket > kInFlight ? ticket - kInFlight : 0);
  ctx_.submit(cmd_[ticket % kInFlight], fence_[ticket % kInFlight]);
  submitted_ = ticket;
  return ticket;
}

void Graph::wait(uint64_t ticket) {
  if (ticket > submitted_) throw std::logic_error("graph '" + options_.name + "': waiting for a replay not submitted");
  for (; waited_ < ticket; ++waited_) ctx_.wait(fence_[(waited_ + 1) % kInFlight]);
}

std::vector<double> Graph::timestamps_ns() const {
  if (!queries_ || !waited_) return {};
  std::vector<uint64_t> ticks(2 * ops_.size());
  vk_check(vkGetQueryPoolResults(ctx_.device(), queries_, 0, static_cast<uint32_t>(ticks.size()),
                                 ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                 VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
           "vkGetQueryPoolResults");
  const uint32_t bits = ctx_.info().timestamp_valid_bits;
  const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  std::vector<double> ns;
  for (size_t i = 0; i < ops_.size(); ++i)
    ns.push_back(static_cast<double>((ticks[2 * i + 1] - ticks[2 * i]) & mask) *
                 ctx_.info().timestamp_period_ns);
  return ns;
}

double Graph::span_ns() const {
  if (!queries_ || !waited_) return 0;
  uint64_t ticks[2] = {0, 0};
  const uint32_t last = static_cast<uint32_t>(2 * ops_.size() - 1);
  for (uint32_t i = 0; i < 2; ++i)
    vk_check(vkGetQueryPoolResults(ctx_.device(), queries_, i ? last : 0, 1, sizeof(uint64_t), &ticks[i],
                                   sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
             "vkGetQueryPoolResults");
  const uint32_t bits = ctx_.info().timestamp_valid_bits;
  const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  return static_cast<double>((ticks[1] - ticks[0]) & mask) * ctx_.info().timestamp_period_ns;
}

std::vector<std::string> Graph::operation_names() const {
  std::vector<std::string> names;
  for (const Op& op : ops_) names.push_back(op.name);
  return names;
}

}  // namespace bdsl::rt
