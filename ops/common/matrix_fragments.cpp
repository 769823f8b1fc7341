#include "ops/common/matrix_fragments.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {
constexpr MatrixShape kShape{16, 8, 32, ScalarKind::I8, ScalarKind::I32};
}  // namespace

FragmentElement ptx_fragment_a(uint32_t inv, uint32_t i) {
  return {inv / 4 + 8 * (i / 4 % 2), 4 * (inv % 4) + i % 4 + 16 * (i / 8)};
}
FragmentElement ptx_fragment_b(uint32_t inv, uint32_t i) { return {4 * (inv % 4) + i % 4 + 16 * (i / 4), inv / 4}; }
FragmentElement ptx_fragment_c(uint32_t inv, uint32_t i) { return {inv / 4 + 8 * (i / 2), 2 * (inv % 4) + i % 2}; }

bool target_has_probe_shape(const OpTarget& target) {
  return target.has_matrix_shape(kShape) && target.subgroup_size == 32;
}

Kernel int8_fragments_probe(const OpTarget& target) {
  if (!target_has_probe_shape(target))
    throw std::invalid_argument("int8_fragments_probe: needs the 16x8x32 int8 shape and subgroups of 32");
  KernelBuilder k("int8_fragments_probe_16x8x32", {32, 1, 1});
  auto out = k.buffer<u32>("elements", Access::Write);
  // Row-major A and column-major B, 32 bytes a row (column): 8 words each. One array holds a
  // matrix of row numbers, the other of column numbers; C holds row * 256 + col itself.
  auto a_rows = k.shared<u32>("a_rows", 128), a_cols = k.shared<u32>("a_cols", 128);
  auto b_rows = k.shared<u32>("b_rows", 64), b_cols = k.shared<u32>("b_cols", 64);
  auto c_both = k.shared<u32>("c_both", 128);
  auto lane = k.local_index();
  // The byte j of word w of a 32-byte line holds element 4 * (w % 8) + j of line w / 8.
  auto bytes_of = [](Expr<u32> first) { return first * 0x01010101u + 0x03020100u; };  // first, first + 1, ...
  for_range(lane, 128u, 32u, [&](Expr<u32> w) {
    a_rows[w] = (w / 8u) * 0x01010101u;
    a_cols[w] = bytes_of((w % 8u) * 4u);
    c_both[w] = ((w / 8u) << 8u) | (w % 8u);  // row-major, 8 a row
  }, "w");
  for_range(lane, 64u, 32u, [&](Expr<u32> w) {
    b_rows[w] = bytes_of((w % 8u) * 4u);
    b_cols[w] = (w / 8u) * 0x01010101u;
  }, "w");
  barrier();
  auto ar = k.matrix<MatrixA<i8, 16, 32>>("ar"), ac = k.matrix<MatrixA<i8, 16, 32>>("ac");
  auto br = k.matrix<MatrixB<i8, 32, 8>>("br"), bc = k.matrix<MatrixB<i8, 32, 8>>("bc");
  auto c = k.matrix<MatrixAcc<i32, 16, 8>>("c");
  ar.load(a_rows, 0u, 8u, MatrixLayout::RowMajor);
  ac.load(a_cols, 0u, 8u, MatrixLayout::RowMajor);
  br.load(b_rows, 0u, 8u, MatrixLayout::ColumnMajor);
  bc.load(b_cols, 0u, 8u, MatrixLayout::ColumnMajor);
  c.load(c_both, 0u, 8u, MatrixLayout::RowMajor);
  auto base = let("base", lane * kFragmentProbeWords);
  auto pair = [](Expr<i8> r, Expr<i8> col) { return (cast<u32>(cast<i32>(r)) << 8u) | cast<u32>(cast<i32>(col)); };
  for (uint32_t i = 0; i < 16; ++i) out[base + i] = pair(ar.element(i), ac.element(i));
  for (uint32_t i = 0; i < 8; ++i) out[base + (16 + i)] = pair(br.element(i), bc.element(i));
  for (uint32_t i = 0; i < 4; ++i) out[base + (24 + i)] = cast<u32>(c.element(i));
  return k.build();
}

std::optional<Int8FragmentOrder> int8_fragment_order(const std::vector<uint32_t>& words) {
  if (words.size() < 32 * kFragmentProbeWords) return std::nullopt;
  Int8FragmentOrder order;
  // Element i of invocation inv holds PTX's element p: the same p for every invocation.
  auto place = [&](uint32_t inv, uint32_t i, uint32_t count, FragmentElement (*ptx)(uint32_t, uint32_t), uint8_t& p) {
    const uint32_t w = words[inv * kFragmentProbeWords + i];
    const FragmentElement e{w >> 8, w & 0xffu};
    for (uint32_t q = 0; q < count; ++q)
      if (ptx(inv, q) == e) {
        if (inv == 0) p = uint8_t(q);
        return inv == 0 || p == q;
      }
    return false;
  };
  for (uint32_t inv = 0; inv < 32; ++inv) {
    for (uint32_t i = 0; i < 16; ++i)
      if (!place(inv, i, 16, ptx_fragment_a, order.a[i])) return std::nullopt;
    for (uint32_t i = 0; i < 8; ++i)
      if (!place(inv, 16 + i, 8, ptx_fragment_b, order.b[i])) return std::nullopt;
    for (uint32_t i = 0; i < 4; ++i)
      if (!place(inv, 24 + i, 4, ptx_fragment_c, order.c[i])) return std::nullopt;
  }
  return order;
}

std::optional<Int8FragmentOrder> probe_int8_fragments(rt::Context& ctx, const OpTarget& target) {
  if (!target_has_probe_shape(target)) return std::nullopt;
  static std::mutex mutex;
  static std::map<std::string, std::optional<Int8FragmentOrder>> known;
  std::lock_guard lock(mutex);
  if (auto it = known.find(target.device_name); it != known.end()) return it->second;
  rt::Pipeline p = rt::make_pipeline(ctx, int8_fragments_probe(target));
  rt::Buffer out(ctx, 32 * kFragmentProbeWords * 4, {.host_visible = true});
  rt::Graph g(ctx);
  g.dispatch(p, {out}, rt::Grid{1, 1, 1});
  g.submit_and_wait();
  return known[target.device_name] = int8_fragment_order(out.download<uint32_t>());
}

OpTarget with_probed_fragments(rt::Context& ctx, OpTarget target) {
  target.int8_fragments = probe_int8_fragments(ctx, target);
  return target;
}

}  // namespace bdsl::ops
