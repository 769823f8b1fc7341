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
// Its fallback (see hint:: in dsl/expr.h): a number for a condition.
template <class C>
  requires hint::Operand<C> && (!OperandOf<C, boolean>)
IfBuilder if_(const C&, const std::function<void()>&) {
  static_assert(hint::dependent_false<C>, "if_ takes a condition, not a number: compare first, e.g. if_(x != 0u, ...)");
  return hint::result<IfBuilder>();
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
// Its fallback (see hint:: in dsl/expr.h): a condition given as a value, or one that gives a number.
template <class C, class B>
  requires(!std::is_convertible_v<const C&, std::function<Expr<boolean>()>>) &&
          (hint::Operand<C> || (std::invocable<const C&> && hint::Operand<std::invoke_result_t<const C&>>))
void while_(const C&, const B&) {
  if constexpr (hint::Operand<C>)
    static_assert(hint::dependent_false<C>,
                  "while_ takes its condition as a function, rebuilt before every iteration: while_([&] { return i < n; }, body)");
  else
    static_assert(hint::dependent_false<C>,
                  "while_'s condition must give a condition, not a number: compare first, e.g. [&] { return x != 0u; }");
}
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
// Workgroup execution barrier with acquire and release at device scope, on buffer and shared
// memory (Vulkan memory model; the kernel then needs vulkanMemoryModel): this workgroup's writes
// before it are made available to every workgroup, and writes another workgroup released with its
// own device_barrier() before an atomic this workgroup has read are made visible to the loads
// after it (handoff buffers', dsl/kernel_builder.h). Must be reached by every invocation.
void device_barrier();
// Subgroup execution barrier that also makes the subgroup's shared-memory writes visible to its
// own invocations: where each subgroup writes and reads back a region of shared memory no other
// subgroup touches meanwhile (a tensor-core result read by lanes), cheaper than barrier(). Placed
// as barrier() is (control flow the same for the whole workgroup; checked before printing).
void subgroup_barrier();

}  // namespace bdsl::dsl
