#include "codegen/validate.h"

#include <functional>
#include <optional>

#include "codegen/interface_of.h"

namespace bdsl::codegen {
using namespace bdsl::dsl;

namespace {

[[noreturn]] void fail(const KernelIR& ir, const std::string& what) {
  throw DslError("kernel '" + ir.name + "': " + what);
}

void check_sizes(const Kernel& k, const TargetLimits& limits) {
  const KernelIR& ir = k.ir();
  const auto& wg = ir.workgroup_size;
  for (int d = 0; d < 3; ++d)
    if (wg[d] > limits.max_size[d])
      fail(ir, "workgroup size " + std::to_string(wg[d]) + " in dimension " + "xyz"[d] +
                   " exceeds the device limit " + std::to_string(limits.max_size[d]));
  const uint64_t invocations = uint64_t{wg[0]} * wg[1] * wg[2];
  if (invocations > limits.max_invocations)
    fail(ir, "workgroup of " + std::to_string(invocations) + " invocations exceeds the device limit " +
                 std::to_string(limits.max_invocations));
  const KernelInterface iface = interface_of(k);
  if (iface.shared_bytes > limits.max_shared_bytes)
    fail(ir, "shared memory of " + std::to_string(iface.shared_bytes) + " bytes exceeds the device limit " +
                 std::to_string(limits.max_shared_bytes));
  if (iface.push_bytes > limits.max_push_bytes)
    fail(ir, "push constants of " + std::to_string(iface.push_bytes) + " bytes exceed the device limit " +
                 std::to_string(limits.max_push_bytes));
}

void check_access(const KernelIR& ir) {
  auto name = [&](uint32_t b) { return "'" + ir.buffers[b].info.name + "'"; };
  for (const auto& n : ir.nodes) {
    if (n->op == Op::Load && ir.buffers[n->ref].info.access == Access::Write)
      fail(ir, "reads buffer " + name(n->ref) + ", which is declared write-only");
    if (n->op == Op::Call && fn_is_atomic(static_cast<Fn>(n->ref)) && n->args[0]->op == Op::Load &&
        ir.buffers[n->args[0]->ref].info.access == Access::Read)
      fail(ir, "atomic update of buffer " + name(n->args[0]->ref) + ", which is declared read-only");
  }
  for (const Block& b : ir.blocks)
    for (const Stmt& s : b.stmts) {
      if (s.kind == StmtKind::Store && ir.buffers[s.ref].info.access == Access::Read)
        fail(ir, "writes buffer " + name(s.ref) + ", which is declared read-only");
      const bool in_buffer = !s.matrix.shared;
      if (s.kind == StmtKind::StoreMatrix && in_buffer && ir.buffers[s.matrix.memory].info.access == Access::Read)
        fail(ir, "stores a matrix to buffer " + name(s.matrix.memory) + ", which is declared read-only");
      if (s.kind == StmtKind::LoadMatrix && in_buffer && ir.buffers[s.matrix.memory].info.access == Access::Write)
        fail(ir, "loads a matrix from buffer " + name(s.matrix.memory) + ", which is declared write-only");
    }
}

// Which values are the same in every invocation of a workgroup, and so which control flow every
// invocation takes together. Vars start uniform and lose it until nothing changes.
class Uniformity {
 public:
  explicit Uniformity(const KernelIR& ir)
      : ir_(ir), var_uniform_(ir.vars.size(), true), loop_uniform_(ir.loops.size(), true) {}

  void check_barriers() {
    do {
      changed_ = false;
      memo_.assign(ir_.nodes.size(), std::nullopt);
      walk(0, true);
    } while (changed_);
    report_ = true;
    memo_.assign(ir_.nodes.size(), std::nullopt);
    walk(0, true);
  }

 private:
  bool uniform(const Node* n) {
    if (!n) return true;
    auto& m = memo_[n->seq];
    if (!m) m = compute(*n);
    return *m;
  }

  bool compute(const Node& n) {
    switch (n.op) {
      case Op::Const:
      case Op::PushField: return true;
      case Op::Builtin: {
        const auto b = static_cast<BuiltinVar>(n.ref);
        return b == BuiltinVar::WorkgroupId || b == BuiltinVar::NumWorkgroups || b == BuiltinVar::SubgroupSize ||
               b == BuiltinVar::NumSubgroups;
      }
      case Op::LoopIndex: return loop_uniform_[n.ref];
      case Op::VarRead: return var_uniform_[n.ref];
      case Op::MatrixElement: return false;  // each invocation holds its own elements
      // A coherent or handoff buffer may change while the workgroup reads it (another workgroup writes it).
      case Op::Load:
        return ir_.buffers[n.ref].info.access == Access::Read && !ir_.buffers[n.ref].written_meanwhile() && uniform(n.args[0]);
      // Only a broadcast slot (KernelBuilder::broadcast) holds one value for every invocation.
      case Op::SharedLoad: return ir_.shared[n.ref].broadcast && uniform(n.args[0]);
      case Op::Call: {
        const auto fn = static_cast<Fn>(n.ref);
        if (fn_is_subgroup(fn) || fn_is_atomic(fn)) return false;
        break;
      }
      default: break;
    }
    for (const Node* a : n.args)
      if (!uniform(a)) return false;
    return true;
  }

  void lose(std::vector<bool>& flags, uint32_t i) {
    if (flags[i]) {
      flags[i] = false;
      changed_ = true;
    }
  }

  // Walks a block; returns whether it may leave its loop in a way that differs between invocations.
  bool walk(uint32_t block, bool cf_uniform) {
    bool divergent_exit = false;
    for (const Stmt& s : ir_.blocks[block].stmts) {
      switch (s.kind) {
        case StmtKind::DeclareVar:
        case StmtKind::Assign:
          if (!cf_uniform || !uniform(s.node)) lose(var_uniform_, s.ref);
          break;
        case StmtKind::If: {
          const bool c = cf_uniform && uniform(s.node);
          for (uint32_t child : s.blocks) divergent_exit |= walk(child, c);
          break;
        }
        case StmtKind::ForRange:
        case StmtKind::Loop: {
          bool c = cf_uniform && uniform(s.index) && uniform(s.node) && uniform(s.step);
          if (s.kind == StmtKind::ForRange && !c) lose(loop_uniform_, s.ref);
          const bool saved = report_;
          report_ = false;  // first find out whether the loop's exits diverge
          const bool diverges = walk(s.blocks[0], c);
          report_ = saved;
          if (diverges) {
            c = false;
            if (s.kind == StmtKind::ForRange) lose(loop_uniform_, s.ref);
          }
          walk(s.blocks[0], c);
          break;
        }
        case StmtKind::BreakUnless:
          if (!cf_uniform || !uniform(s.node)) divergent_exit = true;
          break;
        case StmtKind::Break:
        case StmtKind::Continue:
          if (!cf_uniform) divergent_exit = true;
          break;
        case StmtKind::Barrier:
          if (report_ && !cf_uniform && BarrierKind(s.ref) != BarrierKind::BufferMemory)  // a memory barrier alone may diverge
            fail(ir_, "barrier() inside control flow that differs between invocations of a workgroup "
                      "(a condition or loop bound depends on a per-invocation value); every invocation must "
                      "reach it");
          break;
        case StmtKind::DeclareMatrix:
        case StmtKind::FillMatrix:
        case StmtKind::LoadMatrix:
        case StmtKind::StoreMatrix:
        case StmtKind::MulAddMatrix:
          if (report_ && !cf_uniform)  // workgroup-uniform is stricter than the subgroup rule: safe
            fail(ir_, "cooperative-matrix operation on '" + ir_.matrices[s.ref].name +
                          "' inside control flow that differs between invocations; its whole subgroup must run it");
          break;
        default: break;
      }
    }
    return divergent_exit;
  }

  const KernelIR& ir_;
  std::vector<bool> var_uniform_, loop_uniform_;
  std::vector<std::optional<bool>> memo_;
  bool changed_ = false;
  bool report_ = false;
};

}  // namespace

void validate(const Kernel& kernel, const TargetLimits& limits) {
  check_sizes(kernel, limits);
  check_access(kernel.ir());
  Uniformity(kernel.ir()).check_barriers();
}

}  // namespace bdsl::codegen
