// The recorder: dispatches (and fills/copies) recorded once into one command buffer, replayed
// any number of times. Barriers are derived from each binding's declared access (HazardTracker);
// every dispatch is checked against its kernel's interface and refused, naming the kernel, when
// it does not match. Descriptor sets are allocated per dispatch at finish(), so replay re-records
// nothing. Buffers and pipelines used must outlive the graph's last submit.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/hazard_tracker.h"
#include "runtime/pipeline.h"
#include "runtime/push_constants.h"

namespace bdsl::rt {

class Context;
class Graph;

// A value a graph's kernels read (KernelBuilder::param) that the host sets between replays without
// recording again: a u32, i32 or float in the graph's parameter words (Graph::parameter). Pass it
// where the kernel's param is in rt::push(...). set() waits for replays in flight first (they
// read the words), so set parameters, then submit. Valid while its graph lives.
template <class T>
class Parameter {
  static_assert(std::is_same_v<T, uint32_t> || std::is_same_v<T, int32_t> || std::is_same_v<T, float>,
                "graph parameters are uint32_t, int32_t or float");

 public:
  T get() const;
  void set(T value);
  uint32_t word() const { return word_; }  // its index in the graph's parameter words
  const Graph& graph() const { return *graph_; }

 private:
  friend class Graph;
  Parameter(Graph& graph, uint32_t word) : graph_(&graph), word_(word) {}
  Graph* graph_;
  uint32_t word_;
};

template <class T>
PushValue push_value(const Parameter<T>& p) {
  PushValue v{push_type_of<T>(), {}};
  v.parameter_graph = &p.graph();
  v.parameter_word = p.word();
  return v;
}

struct Grid {
  uint32_t x = 1, y = 1, z = 1;  // workgroups in each dimension
};

// A grid the host sets between replays (Graph::grid_parameter): three parameter words the
// dispatch reads its workgroup counts from (vkCmdDispatchIndirect). 0 in any dimension skips the
// dispatch. set() checks the device's limits and waits for replays in flight, as Parameter's.
class GridParameter {
 public:
  Grid get() const;
  void set(Grid grid);
  uint32_t word() const { return word_; }  // x; y and z follow

 private:
  friend class Graph;
  GridParameter(Graph& graph, uint32_t word) : graph_(&graph), word_(word) {}
  Graph* graph_;
  uint32_t word_;
};

// A buffer for the kernel binding of that name (the name its DSL buffer was given).
struct Arg {
  std::string name;
  BufferSlice slice;
};

struct GraphOptions {
  bool timestamps = false;  // GPU time per recorded operation (needs device support)
  std::string name = "graph";
};

struct GraphStats {
  uint32_t dispatches = 0;
  uint32_t transfers = 0;  // fills and copies
  uint32_t barriers = 0;   // derived barriers between operations (not the final one)
  uint32_t steps = 0;      // barrier-separated groups of operations
};

class Graph {
 public:
  explicit Graph(Context& ctx, GraphOptions options = {});
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Bindings in binding order; their access comes from the pipeline's interface. Two bindings
  // over overlapping bytes of one buffer, one of them written, are refused (the kernel's reads
  // and writes of them would race), unless one is listed in `disjoint`. `disjoint`: positions of
  // bindings whose elements this dispatch touches are, by construction, not those the operations
  // since the last barrier touch in the same buffers (decode attention reading cache rows
  // 0..pos-1 while the K/V projection beside it writes row pos), nor those another binding of
  // this dispatch touches at the same time (a persistent kernel's phases handing a buffer on):
  // they raise no barrier, so the two may run at once. The caller answers for it; the tracker
  // cannot check it.
  void dispatch(const Pipeline& pipeline, std::span<const BufferSlice> bindings,
                const PushConstants& push_constants, Grid grid, std::span<const uint32_t> disjoint = {});
  void dispatch(const Pipeline& pipeline, std::initializer_list<BufferSlice> bindings,
                const PushConstants& push_constants, Grid grid) {
    dispatch(pipeline, std::span<const BufferSlice>(bindings.begin(), bindings.size()),
             push_constants, grid);
  }
  void dispatch(const Pipeline& pipeline, std::initializer_list<BufferSlice> bindings, Grid grid) {
    dispatch(pipeline, bindings, PushConstants{}, grid);
  }
  // Bindings by name, in any order: each of the kernel's bindings exactly once. A name the kernel
  // does not have, one given twice or one missing is refused, naming the kernel and its bindings;
  // so is a buffer whose kind (BufferOptions::holds) is not what the binding reads.
  void dispatch(const Pipeline& pipeline, std::span<const Arg> args, const PushConstants& push_constants, Grid grid);
  void dispatch(const Pipeline& pipeline, std::initializer_list<Arg> args, const PushConstants& push_constants, Grid grid) {
    dispatch(pipeline, std::span<const Arg>(args.begin(), args.size()), push_constants, grid);
  }
  void dispatch(const Pipeline& pipeline, std::initializer_list<Arg> args, Grid grid) {
    dispatch(pipeline, args, PushConstants{}, grid);
  }
  void dispatch(const Pipeline& pipeline, std::initializer_list<Arg> args, const PushConstants& push_constants,
                const GridParameter& grid);
  // The same with a grid set between replays (indirect dispatch).
  void dispatch(const Pipeline& pipeline, std::initializer_list<BufferSlice> bindings,
                const PushConstants& push_constants, const GridParameter& grid) {
    dispatch(pipeline, std::span<const BufferSlice>(bindings.begin(), bindings.size()), push_constants, grid);
  }
  void dispatch(const Pipeline& pipeline, std::span<const BufferSlice> bindings, const PushConstants& push_constants,
                const GridParameter& grid);

  // Parameters (while recording): words of this graph's small host-visible parameter buffer that
  // kernels read (KernelBuilder::param) and the host sets between replays. A kernel's parameters
  // binding is bound by the graph: the dispatch's bindings leave it out.
  template <class T>
  Parameter<T> parameter(T initial) {
    uint32_t bits;
    std::memcpy(&bits, &initial, 4);
    return Parameter<T>(*this, add_parameter_words({bits}));
  }
  GridParameter grid_parameter(Grid initial);
  // The value words of every parameter (what Parameter::get reads).
  uint32_t parameter_word(uint32_t word) const;
  void set_parameter_words(uint32_t word, std::span<const uint32_t> values);
  // Transfer operations, ordered against dispatches like any other access.
  void fill(BufferSlice dst, uint32_t word);
  void copy(BufferSlice src, BufferSlice dst);

  void finish();           // builds the command buffer; no more recording after it
  void submit_and_wait();  // finishes first if needed; may be called any number of times
  bool finished() const { return cmd_[0] != VK_NULL_HANDLE; }
  // Replays that overlap the host: submit() returns a ticket at once, with up to kInFlight
  // replays queued (it first waits for the oldest when that many are); wait(ticket) returns once
  // that replay and every one before it are done. Replays run one after the other on the device
  // (each ends with a barrier to everything after it), so a replay may read what the one before
  // wrote. With timestamps, one at a time (they share one query pool).
  static constexpr uint32_t kInFlight = 2;
  uint64_t submit();
  void wait(uint64_t ticket);
  uint64_t last_ticket() const { return submitted_; }  // 0 before the first submit

  GraphStats stats() const { return stats_; }
  // GPU nanoseconds of each recorded operation in the last submit (empty without timestamps).
  // Operations that overlap (no barrier between them) share time, so these are approximate.
  std::vector<double> timestamps_ns() const;
  // GPU nanoseconds from the start of the first operation to the end of the last (0 without
  // timestamps): the whole recording's time on the device.
  double span_ns() const;
  std::vector<std::string> operation_names() const;  // kernel names, "fill", "copy"

 private:
  struct Binding {
    uint32_t binding;
    VkBuffer buffer;
    uint64_t offset, bytes;
  };
  struct Op {
    std::string name;
    std::optional<uint32_t> indirect_word;  // the grid's words in parameters_ (GridParameter)
    BarrierNeed barrier;
    VkPipelineStageFlags stage;
    // Dispatch
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    std::vector<Binding> bindings;
    std::vector<std::byte> push;
    Grid grid;
    VkDescriptorSet set = VK_NULL_HANDLE;
    // Fill and copy
    VkBuffer src = VK_NULL_HANDLE, dst = VK_NULL_HANDLE;
    uint64_t src_offset = 0, dst_offset = 0, bytes = 0;
    uint32_t word = 0;
  };

  friend class GridParameter;
  void check_open(const char* what) const;
  std::vector<BufferSlice> ordered(const KernelInterface& iface, std::span<const Arg> args) const;
  uint32_t add_parameter_words(std::initializer_list<uint32_t> values);
  void dispatch_with(const Pipeline& pipeline, std::span<const BufferSlice> bindings, const PushConstants& push_constants,
                     Grid grid, std::optional<uint32_t> indirect_word, std::span<const uint32_t> disjoint);
  std::vector<std::byte> pack_push(const KernelInterface& iface, const PushConstants& push) const;
  void add(Op op, std::span<const RangeAccess> accesses);
  void allocate_descriptor_sets();
  void record(VkCommandBuffer cmd) const;
  void record_op(VkCommandBuffer cmd, const Op& op) const;

  Context& ctx_;
  GraphOptions options_;
  std::vector<Op> ops_;
  std::vector<uint32_t> parameter_values_;  // Graph::parameter's words, copied to parameters_
  std::optional<Buffer> parameters_;         // made at finish() where the graph has parameters
  HazardTracker tracker_;
  GraphStats stats_;
  VkPipelineStageFlags used_stages_ = 0;
  VkAccessFlags used_writes_ = 0;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  // The same recording twice (a command buffer may not be resubmitted while pending), each with
  // its fence; replay t uses slot t % kInFlight.
  VkCommandBuffer cmd_[kInFlight] = {};
  VkFence fence_[kInFlight] = {};
  uint64_t submitted_ = 0;  // replays submitted so far (the last ticket)
  uint64_t waited_ = 0;     // replays known done
};

}  // namespace bdsl::rt

namespace bdsl::rt {

template <class T>
T Parameter<T>::get() const {
  const uint32_t bits = graph_->parameter_word(word_);
  T value;
  std::memcpy(&value, &bits, 4);
  return value;
}

template <class T>
void Parameter<T>::set(T value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  graph_->set_parameter_words(word_, std::span<const uint32_t>(&bits, 1));
}

}  // namespace bdsl::rt
