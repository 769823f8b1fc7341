// Decides which IR nodes the printer names as temporaries (computed once, where they were
// created) and which it writes inline at their single use. A node is named when it is used twice,
// when its use is in another block (hoisting it out of loops and branches), or when it reads
// mutable memory and a statement runs between its creation and its use (value semantics).
#pragma once
#include <vector>

#include "dsl/ir.h"

namespace bdsl::codegen {

struct Materialization {
  std::vector<bool> reachable;  // by node seq: printed somewhere
  std::vector<bool> named;      // by node seq: printed as `const T tN = ...;` at its location
  std::vector<uint32_t> uses;   // by node seq
  // Named nodes without their own statement, grouped by where they are printed: before
  // statement `index` of block `block`. In creation order.
  std::vector<std::vector<std::vector<const dsl::Node*>>> before;  // [block][index]
};

// Throws DslError (naming the kernel) when a value is used outside the block that created it.
Materialization materialize(const dsl::KernelIR& ir);

bool is_trivial(const dsl::Node& n);  // constants, ids, push fields: never worth a temporary

// Calls f(node) for every expression operand of a statement, in printing order.
template <class F>
void for_each_operand(const dsl::Stmt& s, F&& f) {
  if (s.index) f(s.index);
  if (s.node) f(s.node);
  if (s.step) f(s.step);
}

// An atomic's first argument is the memory it updates: an lvalue, printed as `name[index]`.
bool is_lvalue_arg(const dsl::Node& parent, size_t arg);

}  // namespace bdsl::codegen
