// A whole program: two DSL kernels (square, then a per-workgroup sum), recorded once into a graph
// and replayed for three problem sizes by setting a parameter, with GPU timestamps. Built against
// the installed package as another project would (tests/install) and run by the tests.
#include <bitnet_dsl/dsl/dsl.h>
#include <bitnet_dsl/runtime/context.h>
#include <bitnet_dsl/runtime/graph.h>
#include <bitnet_dsl/runtime/kernel_pipeline.h>
#include <bitnet_dsl/runtime/typed_buffer.h>

#include <cstdio>
#include <vector>

using namespace bdsl;       // rt:: (runtime) and dsl:: (kernels) live here
using namespace bdsl::dsl;  // KernelBuilder, f32, u32, if_, ...

// squares[i] = x[i] * x[i] for i < n; n is a graph parameter, set between replays.
Kernel square() {
  KernelBuilder k("square", {256, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto squares = k.buffer<f32>("squares", Access::Write);
  auto n = k.param<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] { squares[i] = x[i] * x[i]; });
  return k.build();
}

// sums[g] = the sum of workgroup g's 256 values (0 past n), by halving in shared memory.
Kernel workgroup_sums() {
  KernelBuilder k("workgroup_sums", {256, 1, 1});
  auto values = k.buffer<f32>("values", Access::Read);
  auto sums = k.buffer<f32>("sums", Access::Write);
  auto n = k.param<u32>("n");
  auto partial = k.shared<f32>("partial", 256);
  auto i = k.global_id().x();
  auto lid = k.local_index();
  auto value = k.var<f32>("value", 0.0f);
  if_(i < n, [&] { value = values[i]; });  // select() would read values[i] past n too
  partial[lid] = value;
  barrier();
  for (uint32_t half = 128; half > 0; half /= 2) {
    if_(lid < half, [&] { partial[lid] += partial[lid + half]; });
    barrier();
  }
  if_(lid == 0u, [&] { sums[k.workgroup_id().x()] = partial[0u]; });
  return k.build();
}

int main() {
  rt::Context ctx;  // the fastest Vulkan device, or $BDSL_DEVICE (an index or a name)
  std::printf("device: %s\n", ctx.info().summary().c_str());

  const uint32_t capacity = 1 << 16, groups_max = capacity / 256;
  std::vector<float> host_x(capacity);
  for (uint32_t i = 0; i < capacity; ++i) host_x[i] = float(i % 7) - 3.0f;  // small integers: exact sums
  rt::TypedBuffer<float> x(ctx, host_x, {.name = "x"});  // device-local; uploaded through staging
  rt::TypedBuffer<float> squares(ctx, capacity, {.name = "squares"});
  rt::TypedBuffer<float> sums(ctx, groups_max, {.name = "sums"});

  rt::Pipeline square_pipeline = rt::make_pipeline(ctx, square());  // compiled once, then cached on disk
  rt::Pipeline sums_pipeline = rt::make_pipeline(ctx, workgroup_sums());

  // Record once. The graph puts a barrier between the two dispatches itself: the second reads
  // what the first wrote. The size and the grid are parameters, so replays take new values.
  rt::Graph graph(ctx, {.timestamps = ctx.info().timestamps, .name = "sum of squares"});
  auto n = graph.parameter<uint32_t>(0);
  auto groups = graph.grid_parameter({0, 1, 1});
  graph.dispatch(square_pipeline, {x, squares}, rt::push(n), groups);
  graph.dispatch(sums_pipeline, {squares, sums}, rt::push(n), groups);

  bool ok = true;
  for (uint32_t size : {1000u, 65536u, 300u}) {
    n.set(size);
    groups.set({(size + 255) / 256, 1, 1});
    graph.submit_and_wait();  // or submit() now, wait(ticket) later, to overlap the host
    double total = 0, want = 0;
    for (float s : sums.download(0, (size + 255) / 256)) total += s;
    for (uint32_t i = 0; i < size; ++i) want += double(host_x[i]) * host_x[i];
    std::printf("n = %5u: sum of squares %.0f (CPU %.0f), %.1f us on the GPU\n", size, total, want,
                graph.span_ns() / 1000);
    ok = ok && total == want;
  }
  std::printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
