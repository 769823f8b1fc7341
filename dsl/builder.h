// KernelBuilder: the object a kernel author builds a kernel with. While it lives it is the
// thread's current builder, so expression handles (Expr, Var, buffer refs) and the control-flow
// functions (if_, for_range, ...) add their nodes and statements to it.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dsl/ir.h"

namespace bdsl::dsl {

// A finished kernel: immutable and cheap to copy.
class Kernel {
 public:
  explicit Kernel(std::shared_ptr<const KernelIR> ir) : ir_(std::move(ir)) {}
  const KernelIR& ir() const { return *ir_; }
  const std::string& name() const { return ir_->name; }

 private:
  std::shared_ptr<const KernelIR> ir_;
};

// Any misuse of the DSL found while building or checking a kernel; the message names the kernel.
struct DslError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class BuilderCore {
 public:
  explicit BuilderCore(std::string name);
  ~BuilderCore();
  BuilderCore(const BuilderCore&) = delete;
  BuilderCore& operator=(const BuilderCore&) = delete;

  static BuilderCore& current();

  // This builder, unique in the process: every node and handle (buffer, shared array, variable,
  // matrix) carries its builder's id, and a builder refuses another's, or any use after build().
  uint64_t builder_id() const { return id_; }
  // Throws DslError, naming both kernels, unless `owner` is this builder and it is not built yet;
  // `kind` and `id` name the handle ("buffer binding", 2; id -1: none).
  void check_handle(uint64_t owner, const char* kind, int64_t id = -1) const {
    if (owner != id_ || finished_) handle_error(owner, kind, id);
  }
  // The kernel name of builder `id` (kept after the builder is gone, for such messages).
  static std::string kernel_name(uint64_t id);

  // Nodes: pure ones are shared when an equal node exists in an enclosing scope.
  const Node* make(Op op, Type type, std::vector<const Node*> args, uint64_t literal = 0,
                   uint32_t ref = 0);
  const Node* make_call(Fn fn, Type type, std::vector<const Node*> args);
  const Node* make_let(const Node* value, std::string name, bool precise = false);

  // Statements go to the innermost open block.
  uint32_t append(Stmt s);
  Stmt& stmt(uint32_t block, uint32_t index) { return ir_->blocks[block].stmts[index]; }
  uint32_t current_block() const { return scopes_.back().block; }
  // Runs `body` with a new child block of statement `owner` of the current block open.
  uint32_t in_child_block(uint32_t owner, bool loop_body, const std::function<void()>& body);
  bool inside_loop() const;

  // Declarations.
  uint32_t add_buffer(std::string name, Access access, Type element, bool coherent = false, bool is_volatile = false,
                      bool handoff = false);
  uint32_t add_push(std::string name, Type type, std::optional<Type> parameter = std::nullopt);
  // The binding of the graph's parameter words (KernelBuilder::param), declared at first use.
  uint32_t parameter_binding();
  uint32_t add_shared(std::string name, Type element, uint32_t count);
  uint32_t add_var(std::string name, Type type);
  uint32_t add_loop(std::string name, Type type);
  uint32_t add_matrix(std::string name, Type element, uint32_t rows, uint32_t cols, MatrixUse use);
  const KernelIR& ir() const { return *ir_; }

  [[noreturn]] void fail(const std::string& what) const;
  Kernel finish();

 protected:
  std::unique_ptr<KernelIR> ir_;

 protected:
  // A shared array; `broadcast`: KernelBuilder::broadcast's slot, whose loads the uniformity check
  // treats as the same in every invocation (so only that function may make one).
  uint32_t add_shared_slot(std::string name, Type element, uint32_t count, bool broadcast);

 private:
  struct Scope {
    uint32_t block;
    std::unordered_map<std::string, const Node*> interned;
  };
  std::string check_name(std::string name, const char* what) const;
  bool op_is_pure(Op op, uint32_t ref) const;

  std::vector<Scope> scopes_;
  std::vector<std::string> names_;
  BuilderCore* previous_ = nullptr;
  bool finished_ = false;
  uint64_t id_ = 0;
  void check_node(const Node* n, const char* what) const;
  [[noreturn]] void handle_error(uint64_t owner, const char* kind, int64_t id) const;
};

}  // namespace bdsl::dsl
