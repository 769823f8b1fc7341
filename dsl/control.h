// Structured control flow: if_/else_, counted loops, while loops, break/continue and barriers.
// Bodies are C++ lambdas; whatever they build lands inside the block.
#pragma once
#include <functional>

#include "dsl/memory.h"

namespace bdsl::dsl {

class IfBuilder {
 public:
  IfBuilder(uint32_t block, uint32_t stmt) : block_(block), stmt_(stmt) {}
  void else_(const std::function<void()>& body) const;

 private:
  uint32_t block_, stmt_;
};

IfBuilder if_impl(const Node* cond, const std::function<void()>& then);

template <class C>
  requires OperandOf<C, boolean>
IfBuilder if_(const C& cond, const std::function<void()>& then) {
  return if_impl(as_node<boolean>(cond), then);
}

void for_range_impl(const Node* begin, const Node* end, const Node* step, Type type, const char* name,
                    const std::function<void(const Node*)>& body);

// The index type of a loop from its bounds: a DSL value's type, or the type of two equal literals.
template <class B, class E>
struct loop_index {};
template <class B, class E>
  requires SameOperands<B, E>
struct loop_index<B, E> {
  using type = operand_t<B, E>;
};
template <class B, class E>
  requires(!DslValue<B> && !DslValue<E> && std::same_as<B, E> && requires { typename dsl_type_of_literal<B>::type; })
struct loop_index<B, E> {
  using type = typename dsl_type_of_literal<B>::type;
};
template <class B, class E>
using loop_index_t = typename loop_index<std::remove_cvref_t<B>, std::remove_cvref_t<E>>::type;

// for (T i = begin; i < end; i += step) body(i). The index is read-only inside the body.
template <class B, class E, class S, class F>
  requires Integer<loop_index_t<B, E>> && Scalar<loop_index_t<B, E>> && OperandOf<S, loop_index_t<B, E>>
void for_range(const B& begin, const E& end, const S& step, F&& body, const char* name = "i") {
  using T = loop_index_t<B, E>;
  for_range_impl(as_node<T>(begin), as_node<T>(end), as_node<T>(step), type_of<T>(), name,
                 [&](const Node* index) { body(Expr<T>(index)); });
}
template <class B, class E, class F>
  requires Integer<loop_index_t<B, E>> && Scalar<loop_index_t<B, E>> && std::invocable<F, Expr<loop_index_t<B, E>>>
void for_range(const B& begin, const E& end, F&& body, const char* name = "i") {
  using T = loop_index_t<B, E>;
  for_range(begin, end, Expr<T>(literal_node<T>(1)), std::forward<F>(body), name);
}

// while (cond()) body(): the condition is rebuilt and re-evaluated before every iteration.
void while_(const std::function<Expr<boolean>()>& cond, const std::function<void()>& body);
// Runs body until a break_().
void loop(const std::function<void()>& body);
void break_();
void continue_();

// Workgroup execution barrier that also makes shared-memory writes visible; with_buffers = also
// buffer writes by the workgroup. Must be reached by every invocation (checked before printing).
void barrier(bool with_buffers = false);
// Orders this invocation's buffer writes before its later ones as other invocations see them (no
// execution barrier, so divergent control flow is fine): publish data, then a flag or a ticket.
void memory_barrier_buffer();

}  // namespace bdsl::dsl
