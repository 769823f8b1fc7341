#include "dsl/control.h"

namespace bdsl::dsl {

void IfBuilder::else_(const std::function<void()>& body) const {
  auto& b = BuilderCore::current();
  if (b.current_block() != block_) b.fail("else_() must follow its if_() in the same block");
  auto& s = b.stmt(block_, stmt_);
  if (s.blocks.size() != 1) b.fail("if_() already has an else_()");
  b.in_child_block(stmt_, false, body);
}

IfBuilder if_impl(const Node* cond, const std::function<void()>& then) {
  auto& b = BuilderCore::current();
  const uint32_t block = b.current_block();
  const uint32_t stmt = b.append(Stmt{StmtKind::If, 0, nullptr, cond});
  b.in_child_block(stmt, false, then);
  return IfBuilder(block, stmt);
}

void for_range_impl(const Node* begin, const Node* end, const Node* step, Type type, const char* name,
                    const std::function<void(const Node*)>& body) {
  auto& b = BuilderCore::current();
  const uint32_t loop = b.add_loop(name, type);
  const uint32_t stmt = b.append(Stmt{StmtKind::ForRange, loop, begin, end, step});
  b.in_child_block(stmt, true, [&] { body(b.make(Op::LoopIndex, type, {}, 0, loop)); });
}

void while_(const std::function<Expr<boolean>()>& cond, const std::function<void()>& body) {
  auto& b = BuilderCore::current();
  const uint32_t stmt = b.append(Stmt{StmtKind::Loop});
  b.in_child_block(stmt, true, [&] {
    const Expr<boolean> c = cond();
    b.append(Stmt{StmtKind::BreakUnless, 0, nullptr, c.node()});
    body();
  });
}

void loop(const std::function<void()>& body) {
  auto& b = BuilderCore::current();
  const uint32_t stmt = b.append(Stmt{StmtKind::Loop});
  b.in_child_block(stmt, true, body);
}

void break_() {
  auto& b = BuilderCore::current();
  if (!b.inside_loop()) b.fail("break_() outside a loop");
  b.append(Stmt{StmtKind::Break});
}

void continue_() {
  auto& b = BuilderCore::current();
  if (!b.inside_loop()) b.fail("continue_() outside a loop");
  b.append(Stmt{StmtKind::Continue});
}

void barrier(bool with_buffers) {
  const auto kind = with_buffers ? BarrierKind::WorkgroupAndBuffer : BarrierKind::Workgroup;
  BuilderCore::current().append(Stmt{StmtKind::Barrier, static_cast<uint32_t>(kind)});
}

}  // namespace bdsl::dsl

namespace bdsl::dsl {

void memory_barrier_buffer() {
  BuilderCore::current().append(Stmt{StmtKind::Barrier, static_cast<uint32_t>(BarrierKind::BufferMemory)});
}

void device_barrier() {
  BuilderCore::current().append(Stmt{StmtKind::Barrier, static_cast<uint32_t>(BarrierKind::Device)});
}

void subgroup_barrier() {
  BuilderCore::current().append(Stmt{StmtKind::Barrier, static_cast<uint32_t>(BarrierKind::Subgroup)});
}

}  // namespace bdsl::dsl
