// The kernel author's entry point: declare the interface with typed objects, write the body with
// expressions and control flow, then build().
//
//   KernelBuilder k("saxpy", {256});
//   auto x = k.buffer<f32>("x", Access::Read);
//   auto y = k.buffer<f32>("y", Access::ReadWrite);
//   auto n = k.push<u32>("n");
//   auto a = k.push<f32>("a");
//   auto i = k.global_id().x();
//   if_(i < n, [&] { y[i] = a * x[i] + y[i]; });
//   Kernel saxpy = k.build();
#pragma once
#include <array>

#include "dsl/builtins.h"
#include "dsl/control.h"
#include "dsl/matrix.h"

namespace bdsl::dsl {

class KernelBuilder : public BuilderCore {
 public:
  KernelBuilder(std::string name, std::array<uint32_t, 3> workgroup_size = {64, 1, 1});

  template <class T>
  Buffer<T> buffer(std::string name, Access access) {
    return Buffer<T>(add_buffer(std::move(name), access, type_of<T>()), builder_id());
  }
  // A buffer workgroups use to talk to each other within one dispatch: its loads and stores
  // bypass incoherent caches, so after another workgroup's barrier(true) its writes are seen.
  template <class T>
  Buffer<T> coherent_buffer(std::string name, Access access) {
    return Buffer<T>(add_buffer(std::move(name), access, type_of<T>(), true), builder_id());
  }
  // A coherent buffer whose every load reads memory again, also inside a loop: a flag another
  // workgroup or dispatch sets while this one polls it.
  template <class T>
  Buffer<T> volatile_buffer(std::string name, Access access) {
    return Buffer<T>(add_buffer(std::move(name), access, type_of<T>(), true, true), builder_id());
  }
  // A buffer other workgroups of this dispatch write before a handoff: written, then
  // device_barrier() and a counter the reader waits for (atomic_load), then device_barrier() and
  // read (dsl/control.h). Unlike a coherent buffer its accesses stay plain and cached; the Vulkan
  // memory model (NonPrivate accesses, device-scope acquire and release) orders them. The kernel
  // then needs the device's vulkanMemoryModel.
  template <class T>
  Buffer<T> handoff_buffer(std::string name, Access access) {
    return Buffer<T>(add_buffer(std::move(name), access, type_of<T>(), false, false, true), builder_id());
  }
  template <class T>
  Expr<T> push(std::string name) {
    return Expr<T>(make(Op::PushField, type_of<T>(), {}, 0, add_push(std::move(name), type_of<T>())));
  }
  // A value the graph sets between replays without recording again (rt::Graph::parameter): a
  // u32, i32 or f32 read from the graph's parameter words (a `parameters` binding the graph binds
  // itself), at the word index the dispatch pushes in a push field of this name.
  template <class T>
    requires(std::same_as<T, u32> || std::same_as<T, i32> || std::same_as<T, f32>)
  Expr<T> param(std::string name) {
    const Buffer<u32> words(parameter_binding(), builder_id());
    const uint32_t field = add_push(std::move(name), type_of<u32>(), type_of<T>());
    const Expr<u32> word = words[Expr<u32>(make(Op::PushField, type_of<u32>(), {}, 0, field))];
    if constexpr (std::same_as<T, u32>)
      return word;
    else
      return bitcast<T>(word);
  }
  template <class T>
  Shared<T> shared(std::string name, uint32_t count) {
    return Shared<T>(add_shared(std::move(name), type_of<T>(), count), count, builder_id());
  }
  // rows x cols elements, indexed tile[r][c] (dsl/memory.h).
  template <class T>
  Shared2D<T> shared(std::string name, uint32_t rows, uint32_t cols) {
    if (rows == 0 || cols == 0 || uint64_t{rows} * cols > UINT32_MAX) fail("2-D shared array " + name + ": bad shape");
    return Shared2D<T>(shared<T>(std::move(name), rows * cols), rows, cols);
  }
  // v of invocation 0, in every invocation: written to a shared slot of its own and read back
  // between two barriers (so a loop may broadcast again), as a let named `name`. The uniformity
  // check knows the result is the same in every invocation: control flow on it may hold barriers
  // (a count found by the workgroup bounding a sort's passes). Every invocation must reach it.
  template <class T>
  Expr<T> broadcast(const std::string& name, const Expr<T>& v) {
    Shared<T> slot(add_shared_slot(name + "_slot", type_of<T>(), 1, true), 1, builder_id());
    if_(local_index() == 0u, [&] { slot[0u] = v; });
    barrier();
    auto value = let(name, Expr<T>(slot[0u]));
    barrier();
    return value;
  }
  template <class T, class X>
    requires OperandOf<X, T>
  Var<T> var(std::string name, const X& init) {
    const uint32_t id = add_var(std::move(name), type_of<T>());
    append(Stmt{StmtKind::DeclareVar, id, nullptr, as_node<T>(init)});
    return Var<T>(id, builder_id());
  }
  // Its fallback (see hint:: in dsl/expr.h): an initial value of another type.
  template <class T, class X>
    requires hint::Operand<X> && (!OperandOf<X, T>)
  Var<T> var(std::string, const X&) {
    hint::store<T, X>();
    return hint::result<Var<T>>();
  }

  // A cooperative matrix of the subgroup (dsl/matrix.h), undefined until loaded or filled.
  template <class M>
    requires MatrixType<M>
  M matrix(std::string name) {
    const uint32_t id = add_matrix(std::move(name), type_of<typename M::element_type>(), M::rows, M::cols, M::use);
    append(Stmt{StmtKind::DeclareMatrix, id});
    return M(id, builder_id());
  }
  // ... with every element = fill.
  template <class M, class X>
    requires MatrixType<M> && OperandOf<X, typename M::element_type>
  M matrix(std::string name, const X& fill) {
    const uint32_t id = add_matrix(std::move(name), type_of<typename M::element_type>(), M::rows, M::cols, M::use);
    append(Stmt{StmtKind::DeclareMatrix, id, nullptr, as_node<typename M::element_type>(fill)});
    return M(id, builder_id());
  }
  // Its fallback (see hint:: in dsl/expr.h): a fill value of another type.
  template <class M, class X>
    requires MatrixType<M> && hint::Operand<X> && (!OperandOf<X, typename M::element_type>)
  M matrix(std::string, const X&) {
    hint::store<typename M::element_type, X>();
    return hint::result<M>();
  }

  Expr<uvec3> global_id() { return id<uvec3>(BuiltinVar::GlobalId); }
  Expr<uvec3> local_id() { return id<uvec3>(BuiltinVar::LocalId); }
  Expr<uvec3> workgroup_id() { return id<uvec3>(BuiltinVar::WorkgroupId); }
  Expr<uvec3> num_workgroups() { return id<uvec3>(BuiltinVar::NumWorkgroups); }
  Expr<u32> local_index() { return id<u32>(BuiltinVar::LocalIndex); }
  Expr<u32> subgroup_size() { return id<u32>(BuiltinVar::SubgroupSize); }
  Expr<u32> subgroup_invocation() { return id<u32>(BuiltinVar::SubgroupInvocation); }
  Expr<u32> subgroup_id() { return id<u32>(BuiltinVar::SubgroupId); }
  Expr<u32> num_subgroups() { return id<u32>(BuiltinVar::NumSubgroups); }

  const std::array<uint32_t, 3>& workgroup_size() const { return ir_->workgroup_size; }
  uint32_t workgroup_invocations() const;

  Kernel build() { return finish(); }

 private:
  template <class T>
  Expr<T> id(BuiltinVar which) {
    return Expr<T>(make(Op::Builtin, type_of<T>(), {}, 0, static_cast<uint32_t>(which)));
  }
};

}  // namespace bdsl::dsl
