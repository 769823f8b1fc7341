// Fixture for DSL kernels on a real Vulkan device (lavapipe in CI): a Context with the validation
// layer requested, an in-memory shader cache, and a TearDown that fails the test if the layer
// reported anything. `run_map` runs an element-wise DSL function over host vectors.
#pragma once
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dsl/dsl.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::test {

// Host storage of a DSL type: booleans travel as u32 0/1, vectors as arrays.
template <class T>
struct storage {
  using type = dsl::host_t<T>;
};
template <>
struct storage<dsl::boolean> {
  using type = uint32_t;
};
template <class S, int N>
struct storage<dsl::vec<S, N>> {
  using type = std::array<typename storage<S>::type, N>;
};
template <class T>
using storage_t = typename storage<T>::type;

class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  rt::Context& ctx() { return *ctx_; }
  // Whether workgroups of a dispatch start in index order, so that phases of one dispatch
  // (ops/experimental/phase_sync.h) never wait long: any GPU, and lavapipe with LP_NUM_THREADS=0 (with several
  // threads a wait can give up, and lavapipe also ends long loops early). ctest runs such tests
  // once more with that variable.
  bool workgroups_start_in_order() const;
  rt::Pipeline pipeline(const dsl::Kernel& k) { return rt::make_pipeline(*ctx_, k, shaders_); }
  // Runs one dispatch of `groups` workgroups and waits.
  void run(const dsl::Kernel& k, std::vector<rt::BufferSlice> bindings, uint32_t groups, rt::PushConstants push = {}) {
    rt::Pipeline p = pipeline(k);
    rt::Graph g(*ctx_);
    g.dispatch(p, bindings, push, rt::Grid{groups, 1, 1});
    g.submit_and_wait();
  }

  template <class T>
  rt::Buffer buffer_of(const std::vector<T>& data, const std::string& name) {
    rt::Buffer b(*ctx_, std::max<size_t>(data.size() * sizeof(T), 4), {false, name});
    if (!data.empty()) b.upload(data);
    return b;
  }

  // One dispatch over n = inputs' size invocations: out[i] = f(in0[i], in1[i], ...).
  template <class R, class... Ins>
  std::vector<storage_t<R>> run_map(const std::string& name,
                                    const std::function<dsl::Expr<R>(dsl::Expr<Ins>...)>& f,
                                    const std::vector<storage_t<Ins>>&... inputs);

  codegen::ShaderCache shaders_{std::nullopt};
  std::unique_ptr<rt::Context> ctx_;
  std::shared_ptr<const rt::ValidationLog> log_;
};

template <class R, class... Ins>
std::vector<storage_t<R>> DeviceTest::run_map(const std::string& name,
                                              const std::function<dsl::Expr<R>(dsl::Expr<Ins>...)>& f,
                                              const std::vector<storage_t<Ins>>&... inputs) {
  using namespace dsl;
  using Out = std::conditional_t<std::is_same_v<R, boolean>, u32, R>;
  const auto n = static_cast<uint32_t>(std::get<0>(std::forward_as_tuple(inputs...)).size());
  Kernel kernel = [&] {
    KernelBuilder k(name, {64, 1, 1});
    auto ins = [&]<size_t... I>(std::index_sequence<I...>) {
      return std::tuple<Buffer<Ins>...>{k.buffer<Ins>("in" + std::to_string(I), Access::Read)...};
    }(std::index_sequence_for<Ins...>{});
    auto out = k.buffer<Out>("result", Access::Write);
    auto count = k.push<u32>("n");
    auto i = k.global_id().x();
    if_(i < count, [&] {
      Expr<R> value = std::apply([&](auto&... b) { return f(Expr<Ins>(b[i])...); }, ins);
      if constexpr (std::is_same_v<R, boolean>)
        out[i] = select(value, 1u, 0u);
      else
        out[i] = value;
    });
    return k.build();
  }();
  rt::Pipeline p = pipeline(kernel);
  std::vector<rt::Buffer> buffers;
  (buffers.push_back(buffer_of(inputs, "input")), ...);
  buffers.emplace_back(*ctx_, std::max<size_t>(n * sizeof(storage_t<R>), 4), rt::BufferOptions{false, "result"});
  std::vector<rt::BufferSlice> slices(buffers.begin(), buffers.end());
  rt::Graph g(*ctx_);
  g.dispatch(p, slices, rt::push(n), rt::Grid{(n + 63) / 64, 1, 1});
  g.submit_and_wait();
  return buffers.back().download<storage_t<R>>(0, n);
}

}  // namespace bdsl::test
