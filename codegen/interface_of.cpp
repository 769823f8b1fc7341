#include "codegen/interface_of.h"

namespace bdsl::codegen {
using namespace bdsl::dsl;

namespace {

void note_function(Fn fn, KernelFeatures& f) {
  switch (fn) {
    case Fn::SDot4x8: f.int_dot_product = true; break;
    case Fn::SubgroupAdd:
    case Fn::SubgroupMin:
    case Fn::SubgroupMax: f.subgroup_basic = f.subgroup_arithmetic = true; break;
    case Fn::SubgroupShuffle:
    case Fn::SubgroupShuffleXor: f.subgroup_basic = f.subgroup_shuffle = true; break;
    case Fn::SubgroupBroadcast:
    case Fn::SubgroupBroadcastFirst: f.subgroup_basic = f.subgroup_ballot = true; break;
    case Fn::SubgroupElect: f.subgroup_basic = true; break;
    default:
      if (fn_is_atomic(fn)) f.atomics = true;
      break;
  }
}

void note_node(const Node& n, KernelFeatures& f) {
  if (n.type.kind == ScalarKind::F16) f.float16 = true;
  if (n.op == Op::Call) note_function(static_cast<Fn>(n.ref), f);
  if (n.op == Op::Builtin) {
    const auto b = static_cast<BuiltinVar>(n.ref);
    if (b >= BuiltinVar::SubgroupSize) f.subgroup_basic = true;
  }
}

}  // namespace

KernelInterface interface_of(const Kernel& kernel) {
  const KernelIR& ir = kernel.ir();
  KernelInterface k;
  k.name = ir.name;
  for (const auto& b : ir.buffers) {
    k.bindings.push_back(b.info);
    if (b.info.element.kind == ScalarKind::F16) k.features.storage16 = true;
  }
  k.push_fields = ir.push_fields;
  k.push_bytes = ir.push_bytes;
  k.workgroup_size = ir.workgroup_size;
  for (const auto& s : ir.shared) k.shared_bytes += s.element.bytes() * s.count;
  for (const auto& n : ir.nodes) note_node(*n, k.features);
  for (const auto& v : ir.vars)
    if (v.type.kind == ScalarKind::F16) k.features.float16 = true;
  return k;
}

}  // namespace bdsl::codegen
