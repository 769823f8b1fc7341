#include "codegen/interface_of.h"

#include <algorithm>

namespace bdsl::codegen {
using namespace bdsl::dsl;

namespace {

void note_function(Fn fn, KernelFeatures& f) {
  switch (fn) {
    case Fn::SDot4x8: f.int_dot_product = true; break;
    case Fn::SubgroupAdd:
    case Fn::SubgroupMin:
    case Fn::SubgroupMax:
    case Fn::SubgroupInclusiveAdd:
    case Fn::SubgroupInclusiveMin:
    case Fn::SubgroupInclusiveMax:
    case Fn::SubgroupExclusiveAdd: f.subgroup_basic = f.subgroup_arithmetic = true; break;
    case Fn::SubgroupShuffleUp:
    case Fn::SubgroupShuffleDown: f.subgroup_basic = f.subgroup_shuffle_relative = true; break;
    case Fn::SubgroupShuffle:
    case Fn::SubgroupShuffleXor: f.subgroup_basic = f.subgroup_shuffle = true; break;
    case Fn::SubgroupBallot:
    case Fn::SubgroupBallotBitCount:
    case Fn::SubgroupBroadcast:
    case Fn::SubgroupBroadcastFirst: f.subgroup_basic = f.subgroup_ballot = true; break;
    case Fn::SubgroupElect: f.subgroup_basic = true; break;
    default:
      if (fn_is_atomic(fn)) f.atomics = true;
      if (fn == Fn::AtomicLoad) f.memory_model = true;
      break;
  }
}

// What a value of type t needs to be computed (a node's or a variable's).
void note_value_type(Type t, KernelFeatures& f) {
  if (t.kind == ScalarKind::F16) f.float16 = true;
  if (t.kind == ScalarKind::I8) f.int8 = true;
  if (t.is_64bit()) f.int64 = true;
  if (t.kind == ScalarKind::F64) f.float64 = true;
}

void note_node(const Node& n, KernelFeatures& f) {
  note_value_type(n.type, f);
  if (n.op == Op::Call) note_function(static_cast<Fn>(n.ref), f);
  if (n.op == Op::Call && static_cast<Fn>(n.ref) == Fn::AtomicAdd && n.type.kind == ScalarKind::F32)
    (n.args[0]->op == Op::SharedLoad ? f.float_atomic_add_shared : f.float_atomic_add_buffer) = true;
  if (n.op == Op::Builtin) {
    const auto b = static_cast<BuiltinVar>(n.ref);
    if (b >= BuiltinVar::SubgroupSize) f.subgroup_basic = true;
  }
}

// Cooperative matrices and the shapes of their multiply-adds.
void note_matrices(const KernelIR& ir, KernelFeatures& f) {
  for (const MatrixDecl& m : ir.matrices) {
    f.cooperative_matrix_nv = true;
    if (m.element.kind == ScalarKind::I8) f.int8 = true;
    if (m.element.kind == ScalarKind::F16) f.float16 = true;
  }
  for (const Block& b : ir.blocks)
    for (const Stmt& s : b.stmts) {
      if (s.kind != StmtKind::MulAddMatrix) continue;
      const MatrixDecl &a = ir.matrices[s.matrix.operands[0]], &c = ir.matrices[s.ref];
      const MatrixShape shape{c.rows, c.cols, a.cols, a.element.kind, c.element.kind};
      if (std::find(f.matrix_shapes.begin(), f.matrix_shapes.end(), shape) == f.matrix_shapes.end())
        f.matrix_shapes.push_back(shape);
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
    if (b.info.element.kind == ScalarKind::I8) k.features.storage8 = k.features.int8 = true;
    if (b.info.element.is_64bit()) k.features.int64 = true;
    if (b.info.element.kind == ScalarKind::F64) k.features.float64 = true;
    if (b.handoff) k.features.memory_model = true;
  }
  for (const Block& b : ir.blocks)
    for (const Stmt& s : b.stmts)
      if (s.kind == StmtKind::Barrier && BarrierKind(s.ref) == BarrierKind::Device) k.features.memory_model = true;
      else if (s.kind == StmtKind::Barrier && BarrierKind(s.ref) == BarrierKind::Subgroup) k.features.subgroup_basic = true;
  k.push_fields = ir.push_fields;
  k.push_bytes = ir.push_bytes;
  k.workgroup_size = ir.workgroup_size;
  for (const auto& s : ir.shared) {
    k.shared_bytes += s.element.bytes() * s.count;
    if (s.element.kind == ScalarKind::I8) k.features.int8 = true;
    if (s.element.is_64bit()) k.features.int64 = true;
    if (s.element.kind == ScalarKind::F64) k.features.float64 = true;
  }
  for (const auto& n : ir.nodes) note_node(*n, k.features);
  for (const auto& v : ir.vars) note_value_type(v.type, k.features);
  note_matrices(ir, k.features);
  return k;
}

}  // namespace bdsl::codegen
