#include "codegen/materialize.h"

#include "dsl/builder.h"

namespace bdsl::codegen {
using namespace bdsl::dsl;

bool is_trivial(const Node& n) {
  switch (n.op) {
    case Op::Const:
    case Op::PushField:
    case Op::Builtin:
    case Op::LoopIndex:
      return true;
    case Op::Component:
      return is_trivial(*n.args[0]);
    default:
      return false;
  }
}

bool is_lvalue_arg(const Node& parent, size_t arg) {
  return arg == 0 && parent.op == Op::Call && fn_is_atomic(static_cast<Fn>(parent.ref));
}

namespace {

struct User {
  const Node* node = nullptr;  // the parent node, or null when the user is a statement
  Location stmt;               // the statement's location when node is null
};

class Analyzer {
 public:
  explicit Analyzer(const KernelIR& ir) : ir_(ir), n_(ir.nodes.size()) {
    m_.reachable.assign(n_, false);
    m_.named.assign(n_, false);
    m_.uses.assign(n_, 0);
    user_.resize(n_);
    users_of_.resize(n_);
    eval_.resize(n_);
  }

  Materialization run() {
    collect_statement_uses();
    collect_node_uses();
    decide();
    group_by_location();
    return std::move(m_);
  }

 private:
  void use(const Node* n, User u) {
    m_.uses[n->seq]++;
    users_of_[n->seq].push_back(u);
    user_[n->seq] = u;
    mark(n);
  }
  void mark(const Node* n) {
    if (m_.reachable[n->seq]) return;
    m_.reachable[n->seq] = true;
    for (const Node* a : n->args) mark(a);
  }

  void collect_statement_uses() {
    for (const Block& b : ir_.blocks)
      for (uint32_t i = 0; i < b.stmts.size(); ++i)
        for_each_operand(b.stmts[i], [&](const Node* n) { use(n, User{nullptr, {b.id, i}}); });
  }

  void collect_node_uses() {
    for (const auto& node : ir_.nodes) {
      if (!m_.reachable[node->seq]) continue;
      for (size_t a = 0; a < node->args.size(); ++a) {
        const Node* arg = node->args[a];
        if (is_lvalue_arg(*node, a)) {  // the target's index is what gets evaluated
          for (const Node* idx : arg->args) use(idx, User{node.get(), {}});
        } else {
          use(arg, User{node.get(), {}});
        }
      }
    }
  }

  Location eval_of(const User& u) const { return u.node ? eval_[u.node->seq] : u.stmt; }

  // Users are created after what they use, so walking backwards sees every user decided first.
  void decide() {
    for (size_t s = n_; s-- > 0;) {
      const Node& n = *ir_.nodes[s];
      if (!m_.reachable[s] || m_.uses[s] == 0) {
        eval_[s] = n.loc;
        if (n.has_stmt) m_.named[s] = m_.reachable[s] = true;
        continue;
      }
      for (const User& u : users_of_[s]) check_scope(n, eval_of(u));
      bool name = n.has_stmt || (!is_trivial(n) && m_.uses[s] >= 2);
      if (!name && !is_trivial(n)) {
        const Location at = eval_of(user_[s]);
        name = at.block != n.loc.block || (!n.pure && at.index != n.loc.index);
      }
      m_.named[s] = name;
      eval_[s] = name ? n.loc : eval_of(user_[s]);
    }
  }

  // A value may only be used in the block that created it or in blocks nested inside it.
  void check_scope(const Node& n, Location use_at) const {
    uint32_t b = use_at.block;
    while (b != n.loc.block) {
      if (b == 0) {
        throw DslError("kernel '" + ir_.name + "': a value (" + op_name(n.op) + " of type " +
                       to_string(n.type) + ") is used outside the block that created it");
      }
      b = ir_.blocks[b].parent;
    }
  }

  void group_by_location() {
    m_.before.resize(ir_.blocks.size());
    for (const Block& b : ir_.blocks) m_.before[b.id].resize(b.stmts.size() + 1);
    for (const auto& node : ir_.nodes)
      if (m_.named[node->seq] && !node->has_stmt)
        m_.before[node->loc.block][node->loc.index].push_back(node.get());
  }

  const KernelIR& ir_;
  size_t n_;
  Materialization m_;
  std::vector<User> user_;
  std::vector<std::vector<User>> users_of_;
  std::vector<Location> eval_;
};

}  // namespace

Materialization materialize(const KernelIR& ir) { return Analyzer(ir).run(); }

}  // namespace bdsl::codegen
