#include "dsl/builder.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "dsl/glsl_names.h"

namespace bdsl::dsl {

namespace {
thread_local BuilderCore* g_current = nullptr;
std::atomic<uint64_t> g_next_id{1};

// Every builder's kernel name by id, for messages about a handle used in the wrong kernel (its
// builder may be gone by then). A few dozen bytes a kernel.
std::mutex g_names_mutex;
std::unordered_map<uint64_t, std::string>& builder_names() {
  static std::unordered_map<uint64_t, std::string> names;
  return names;
}

// Identity of a pure node for sharing: everything that defines its value.
std::string intern_key(Op op, Type type, const std::vector<const Node*>& args, uint64_t literal,
                       uint32_t ref) {
  std::string key;
  auto put = [&](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  put(&op, sizeof op);
  put(&type.kind, sizeof type.kind);
  put(&type.lanes, sizeof type.lanes);
  put(&literal, sizeof literal);
  put(&ref, sizeof ref);
  for (const Node* a : args) put(&a, sizeof a);
  return key;
}
}  // namespace

BuilderCore::BuilderCore(std::string name) : ir_(std::make_unique<KernelIR>()), id_(g_next_id++) {
  ir_->name = check_name(std::move(name), "kernel");
  {
    std::lock_guard lock(g_names_mutex);
    builder_names()[id_] = ir_->name;
  }
  ir_->blocks.push_back(Block{});
  scopes_.push_back(Scope{0, {}});
  previous_ = g_current;
  g_current = this;
}

BuilderCore::~BuilderCore() { g_current = previous_; }

BuilderCore& BuilderCore::current() {
  if (!g_current) throw DslError("DSL expression built outside a kernel: create a KernelBuilder first");
  return *g_current;
}

void BuilderCore::fail(const std::string& what) const {
  throw DslError("kernel '" + kernel_name(id_) + "': " + what);
}

std::string BuilderCore::kernel_name(uint64_t id) {
  std::lock_guard lock(g_names_mutex);
  const auto it = builder_names().find(id);
  return it == builder_names().end() ? "?" : it->second;
}

void BuilderCore::handle_error(uint64_t owner, const char* kind, int64_t id) const {
  const std::string what = std::string(kind) + (id >= 0 ? " " + std::to_string(id) : "");
  if (owner != id_)
    fail(what + " of kernel '" + kernel_name(owner) +
         "' used here: a handle or expression works only in the kernel whose builder made it");
  fail(what + " used after build()");
}

void BuilderCore::check_node(const Node* n, const char* what) const {
  if (n && n->owner != id_) handle_error(n->owner, what, -1);
}

std::string BuilderCore::check_name(std::string name, const char* what) const {
  if (!is_valid_glsl_identifier(name))
    throw DslError(std::string("invalid ") + what + " name '" + name +
                   "': use up to 128 letters, digits and '_', not starting with a digit, 'gl_' or containing '__'");
  return name;  // a GLSL keyword ("out", "input") is fine: the printer renames it
}

bool BuilderCore::op_is_pure(Op op, uint32_t ref) const {
  switch (op) {
    case Op::VarRead:
    case Op::SharedLoad:
    case Op::Let:
    case Op::MatrixElement:  // the matrix changes under it
      return false;
    case Op::Load:
      // Read-only data cannot change, unless another dispatch writes it while this one runs
      // (a coherent or handoff buffer, e.g. a phase of ops/experimental/decode_layer.h): then a load
      // stays where it was written.
      return ir_->buffers[ref].info.access == Access::Read && !ir_->buffers[ref].written_meanwhile();
    default:
      return true;
  }
}

const Node* BuilderCore::make(Op op, Type type, std::vector<const Node*> args, uint64_t literal,
                              uint32_t ref) {
  if (finished_) fail("an expression built after build()");
  for (const Node* a : args) check_node(a, "an expression");
  bool pure = op_is_pure(op, ref);
  if (op == Op::Call) pure = fn_is_pure(static_cast<Fn>(ref));
  for (const Node* a : args) pure = pure && a->pure;
  std::string key;
  if (pure) {
    key = intern_key(op, type, args, literal, ref);
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
      if (auto it = s->interned.find(key); it != s->interned.end()) return it->second;
  }
  auto node = std::make_unique<Node>();
  node->op = op;
  node->type = type;
  node->args = std::move(args);
  node->literal = literal;
  node->ref = ref;
  node->seq = static_cast<uint32_t>(ir_->nodes.size());
  node->loc = {current_block(), static_cast<uint32_t>(ir_->blocks[current_block()].stmts.size())};
  node->pure = pure;
  node->owner = id_;
  const Node* result = node.get();
  ir_->nodes.push_back(std::move(node));
  if (pure) scopes_.back().interned.emplace(std::move(key), result);
  return result;
}

const Node* BuilderCore::make_call(Fn fn, Type type, std::vector<const Node*> args) {
  const Node* n = make(Op::Call, type, std::move(args), 0, static_cast<uint32_t>(fn));
  if (fn_is_atomic(fn)) {  // side effects happen exactly once, where the author wrote them
    const_cast<Node*>(n)->has_stmt = true;
    append(Stmt{StmtKind::Eval, 0, nullptr, n});
  }
  return n;
}

const Node* BuilderCore::make_let(const Node* value, std::string name, bool precise) {
  const Node* n = make(Op::Let, value->type, {value});
  auto* mutable_node = const_cast<Node*>(n);
  mutable_node->precise = precise;
  mutable_node->name = check_name(std::move(name), "let");
  mutable_node->has_stmt = true;
  append(Stmt{StmtKind::Eval, 0, nullptr, n});
  return n;
}

uint32_t BuilderCore::append(Stmt s) {
  if (finished_) fail("a statement added after build()");
  check_node(s.index, "an expression");
  check_node(s.node, "an expression");
  check_node(s.step, "an expression");
  auto& stmts = ir_->blocks[current_block()].stmts;
  stmts.push_back(std::move(s));
  return static_cast<uint32_t>(stmts.size() - 1);
}

uint32_t BuilderCore::in_child_block(uint32_t owner, bool loop_body, const std::function<void()>& body) {
  const uint32_t parent = current_block();
  const auto id = static_cast<uint32_t>(ir_->blocks.size());
  ir_->blocks.push_back(Block{id, parent, owner, loop_body, {}});
  ir_->blocks[parent].stmts[owner].blocks.push_back(id);
  scopes_.push_back(Scope{id, {}});
  try {
    body();
  } catch (...) {
    scopes_.pop_back();
    throw;
  }
  scopes_.pop_back();
  return id;
}

bool BuilderCore::inside_loop() const {
  return std::any_of(scopes_.begin(), scopes_.end(),
                     [&](const Scope& s) { return ir_->blocks[s.block].is_loop_body; });
}

uint32_t BuilderCore::add_buffer(std::string name, Access access, Type element, bool coherent, bool is_volatile,
                                 bool handoff) {
  if (element.lanes == 3) fail("buffer '" + name + "': 3-lane vectors pad to 16 bytes in std430; use vec4");
  name = check_name(std::move(name), "buffer");
  const auto binding = static_cast<uint32_t>(ir_->buffers.size());
  names_.push_back(name);
  ir_->buffers.push_back(BufferDecl{BindingInfo{binding, name, access, element}, coherent || is_volatile, is_volatile, handoff});
  return binding;
}

uint32_t BuilderCore::add_push(std::string name, Type type, std::optional<Type> parameter) {
  name = check_name(std::move(name), parameter ? "parameter" : "push constant");
  const uint32_t offset = (ir_->push_bytes + type.align() - 1) / type.align() * type.align();
  ir_->push_fields.push_back(PushField{name, type, offset, parameter});
  ir_->push_bytes = offset + type.bytes();
  return static_cast<uint32_t>(ir_->push_fields.size() - 1);
}

uint32_t BuilderCore::parameter_binding() {
  for (const BufferDecl& b : ir_->buffers)
    if (b.info.parameters) return b.info.binding;
  const uint32_t binding = add_buffer("parameters", Access::Read, Type{ScalarKind::U32, 1});
  ir_->buffers[binding].info.parameters = true;
  return binding;
}

uint32_t BuilderCore::add_shared(std::string name, Type element, uint32_t count) {
  return add_shared_slot(std::move(name), element, count, false);
}

uint32_t BuilderCore::add_shared_slot(std::string name, Type element, uint32_t count, bool broadcast) {
  if (count == 0) fail("shared array '" + name + "' has no elements");
  ir_->shared.push_back(SharedDecl{check_name(std::move(name), "shared array"), element, count, broadcast});
  return static_cast<uint32_t>(ir_->shared.size() - 1);
}

uint32_t BuilderCore::add_var(std::string name, Type type) {
  ir_->vars.push_back(VarDecl{check_name(std::move(name), "var"), type});
  return static_cast<uint32_t>(ir_->vars.size() - 1);
}

uint32_t BuilderCore::add_matrix(std::string name, Type element, uint32_t rows, uint32_t cols, MatrixUse use) {
  if (rows == 0 || cols == 0) fail("matrix '" + name + "' has no elements");
  ir_->matrices.push_back(MatrixDecl{check_name(std::move(name), "matrix"), element, rows, cols, use});
  return static_cast<uint32_t>(ir_->matrices.size() - 1);
}

uint32_t BuilderCore::add_loop(std::string name, Type type) {
  ir_->loops.push_back(LoopDecl{check_name(std::move(name), "loop index"), type});
  return static_cast<uint32_t>(ir_->loops.size() - 1);
}

Kernel BuilderCore::finish() {
  if (finished_) fail("finish() called twice");
  if (scopes_.size() != 1) fail("finish() called inside a block");
  finished_ = true;
  return Kernel(std::shared_ptr<const KernelIR>(std::move(ir_)));
}

}  // namespace bdsl::dsl
