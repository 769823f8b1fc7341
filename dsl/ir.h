// The DSL's intermediate representation: small immutable expression nodes and a tree of statements.
// Node kinds are listed once (BDSL_NODE_OPS); the printer's spellings are data beside them.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsl/interface.h"
#include "dsl/type.h"

namespace bdsl::dsl {

// X(name, spelling, arity): binary and unary operators print as infix/prefix with that spelling.
#define BDSL_NODE_OPS(X)                                             \
  X(Const, "", 0)            /* literal: bits in Node::literal */    \
  X(PushField, "", 0)        /* push-constant field Node::ref */     \
  X(Builtin, "", 0)          /* built-in id, BuiltinVar in ref */    \
  X(LoopIndex, "", 0)        /* counter of loop Node::ref */         \
  X(VarRead, "", 0)          /* current value of var Node::ref */    \
  X(Load, "", 1)             /* buffer ref at index arg0 */          \
  X(SharedLoad, "", 1)       /* shared array ref at index arg0 */    \
  X(Add, "+", 2)                                                     \
  X(Sub, "-", 2)                                                     \
  X(Mul, "*", 2)                                                     \
  X(Div, "/", 2)                                                     \
  X(Mod, "%", 2)                                                     \
  X(BitAnd, "&", 2)                                                  \
  X(BitOr, "|", 2)                                                   \
  X(BitXor, "^", 2)                                                  \
  X(Shl, "<<", 2)                                                    \
  X(Shr, ">>", 2)                                                    \
  X(Lt, "<", 2)                                                      \
  X(Le, "<=", 2)                                                     \
  X(Gt, ">", 2)                                                      \
  X(Ge, ">=", 2)                                                     \
  X(Eq, "==", 2)                                                     \
  X(Ne, "!=", 2)                                                     \
  X(And, "&&", 2)                                                    \
  X(Or, "||", 2)                                                     \
  X(Neg, "-", 1)                                                     \
  X(Not, "!", 1)                                                     \
  X(BitNot, "~", 1)                                                  \
  X(Convert, "", 1)          /* value conversion to Node::type */    \
  X(Select, "", 3)           /* arg0 ? arg1 : arg2 */                \
  X(Component, "", 1)        /* lane Node::ref of a vector */        \
  X(Construct, "", -1)       /* vector from scalars */               \
  X(Call, "", -1)            /* builtin function Fn(ref) */          \
  X(Let, "", 1)              /* arg0, named and evaluated here */ \
  X(MatrixElement, "", 1)    /* element arg0 of this invocation's share of matrix ref */

enum class Op : uint8_t {
#define BDSL_ENUM(name, spelling, arity) name,
  BDSL_NODE_OPS(BDSL_ENUM)
#undef BDSL_ENUM
};
const char* op_name(Op op);
const char* op_spelling(Op op);

enum class BuiltinVar : uint8_t {
  GlobalId, LocalId, WorkgroupId, NumWorkgroups, LocalIndex,
  SubgroupSize, SubgroupInvocation, SubgroupId, NumSubgroups
};

// Builtin functions and their kind: Pure may be shared and moved (no side effects, no convergence
// rules); Subgroup ones run with the subgroup; Atomic ones write memory.
#define BDSL_FUNCTIONS(X)                                    \
  X(Min, "min", Pure) X(Max, "max", Pure) X(Abs, "abs", Pure) \
  X(Clamp, "clamp", Pure) X(Fma, "fma", Pure)                 \
  X(Exp, "exp", Pure) X(Exp2, "exp2", Pure) X(Log, "log", Pure) \
  X(Sqrt, "sqrt", Pure) X(InverseSqrt, "inversesqrt", Pure)   \
  X(Pow, "pow", Pure) X(Sin, "sin", Pure) X(Cos, "cos", Pure) \
  X(Floor, "floor", Pure) X(RoundEven, "roundEven", Pure)     \
  X(Ceil, "ceil", Pure) X(Sign, "sign", Pure) X(Tanh, "tanh", Pure) \
  X(Mix, "mix", Pure)                                         \
  X(Dot, "dot", Pure)                                         \
  X(PackHalf2x16, "packHalf2x16", Pure)                       \
  X(UnpackHalf2x16, "unpackHalf2x16", Pure)                   \
  X(BitfieldExtract, "bitfieldExtract", Pure)                 \
  X(FloatBitsToUint, "floatBitsToUint", Pure)                 \
  X(FloatBitsToInt, "floatBitsToInt", Pure)                   \
  X(UintBitsToFloat, "uintBitsToFloat", Pure)                 \
  X(IntBitsToFloat, "intBitsToFloat", Pure)                   \
  X(SDot4x8, "bdsl_sdot4x8", Pure)                            \
  X(SubgroupAdd, "subgroupAdd", Subgroup)                        \
  X(SubgroupMin, "subgroupMin", Subgroup)                        \
  X(SubgroupMax, "subgroupMax", Subgroup)                        \
  X(SubgroupInclusiveAdd, "subgroupInclusiveAdd", Subgroup)      \
  X(SubgroupInclusiveMin, "subgroupInclusiveMin", Subgroup)      \
  X(SubgroupInclusiveMax, "subgroupInclusiveMax", Subgroup)      \
  X(SubgroupExclusiveAdd, "subgroupExclusiveAdd", Subgroup)      \
  X(SubgroupBallot, "subgroupBallot", Subgroup)                  \
  X(SubgroupBallotBitCount, "subgroupBallotBitCount", Pure)      \
  X(SubgroupShuffleUp, "subgroupShuffleUp", Subgroup)            \
  X(SubgroupShuffleDown, "subgroupShuffleDown", Subgroup)        \
  X(SubgroupShuffle, "subgroupShuffle", Subgroup)                \
  X(SubgroupShuffleXor, "subgroupShuffleXor", Subgroup)          \
  X(SubgroupBroadcast, "subgroupBroadcast", Subgroup)            \
  X(SubgroupBroadcastFirst, "subgroupBroadcastFirst", Subgroup)  \
  X(SubgroupElect, "subgroupElect", Subgroup)                    \
  X(AtomicAdd, "atomicAdd", Atomic) X(AtomicMin, "atomicMin", Atomic) \
  X(AtomicMax, "atomicMax", Atomic) X(AtomicAnd, "atomicAnd", Atomic) \
  X(AtomicOr, "atomicOr", Atomic) X(AtomicXor, "atomicXor", Atomic)   \
  X(AtomicExchange, "atomicExchange", Atomic)                  \
  X(AtomicCompSwap, "atomicCompSwap", Atomic)                  \
  X(AtomicLoad, "atomicLoad", Atomic)

// What a Barrier statement (Stmt::ref) waits for and orders.
enum class BarrierKind : uint32_t {
  Workgroup = 0,           // every invocation of the workgroup; shared memory
  WorkgroupAndBuffer = 1,  // the same, buffer memory too
  BufferMemory = 2,        // buffer memory only: no execution barrier (may diverge)
  Device = 3,              // every invocation; acquire and release of buffer and shared memory at
                           // device scope (Vulkan memory model): dsl/control.h's device_barrier()
  Subgroup = 4,            // the invocations of one subgroup; shared memory: subgroup_barrier()
};

enum class FnKind : uint8_t { Pure, Subgroup, Atomic };
enum class Fn : uint8_t {
#define BDSL_ENUM(name, spelling, kind) name,
  BDSL_FUNCTIONS(BDSL_ENUM)
#undef BDSL_ENUM
};
const char* fn_spelling(Fn fn);
FnKind fn_kind(Fn fn);
bool fn_is_pure(Fn fn);
bool fn_is_atomic(Fn fn);
bool fn_is_subgroup(Fn fn);

// Where a node was created: block id and the index of the next statement in that block.
struct Location {
  uint32_t block = 0;
  uint32_t index = 0;
};

struct Node {
  Op op;
  Type type;
  std::vector<const Node*> args;
  uint64_t literal = 0;  // Const: the value's bits (f32 bits, i32/u32 value, bool 0/1)
  uint32_t ref = 0;      // PushField/LoopIndex/VarRead/Load/SharedLoad/Component/Call/MatrixElement target
  uint32_t seq = 0;      // creation order
  Location loc;
  bool pure = true;      // may be shared between uses and moved past statements
  bool has_stmt = false; // evaluated by its own Eval statement (atomics, let)
  std::string name;      // Let: the name the author gave
  bool precise = false;  // Let: computed exactly as written (no fma contraction or reassociation)
  uint64_t owner = 0;    // the builder (BuilderCore::id) that made it
};

enum class StmtKind : uint8_t {
  Eval,        // node: an atomic or a let, evaluated here into a named temporary
  DeclareVar,  // ref = var, node = initial value
  Assign,      // ref = var, node = value
  Store,       // ref = binding, index, node = value
  SharedStore, // ref = shared array, index, node = value
  If,          // node = condition, blocks[0] = then, blocks[1] = else (optional)
  ForRange,    // ref = loop, index = begin, node = end, step = step; blocks[0] = body
  Loop,        // blocks[0] = body (runs until break)
  BreakUnless, // node = condition: leave the loop when false
  Break,
  Continue,
  Barrier,     // ref: a BarrierKind
  // Cooperative matrices (ref = the matrix; its whole subgroup runs each one together):
  DeclareMatrix,  // node = value every element starts with, or null (undefined until loaded)
  FillMatrix,     // node = value for every element
  LoadMatrix,     // index = first element, node = stride (elements); matrix.memory is read
  StoreMatrix,    // index = first element, node = stride (elements); matrix.memory is written
  MulAddMatrix,   // matrix.operands = a, b: ref = a * b + ref
  SetMatrixElement,  // index = element of this invocation's share, node = value (per invocation)
};

enum class MatrixUse : uint8_t { A, B, Accumulator };  // A (M x K) * B (K x N) + Accumulator (M x N)
enum class MatrixLayout : uint8_t { RowMajor, ColumnMajor };

// What a cooperative-matrix statement reads or writes besides its matrix.
struct MatrixAccess {
  uint32_t memory = 0;  // Load/StoreMatrix: buffer binding, or shared array id when `shared`
  bool shared = false;
  MatrixLayout layout = MatrixLayout::RowMajor;
  std::array<uint32_t, 2> operands{};  // MulAddMatrix: matrices a and b
};

struct Stmt {
  StmtKind kind;
  uint32_t ref = 0;
  const Node* index = nullptr;
  const Node* node = nullptr;
  const Node* step = nullptr;
  std::vector<uint32_t> blocks;  // child block ids
  MatrixAccess matrix;           // cooperative-matrix statements only
};

struct Block {
  uint32_t id = 0;
  uint32_t parent = 0;     // the root block is its own parent
  uint32_t parent_stmt = 0;  // index of the statement in the parent that owns this block
  bool is_loop_body = false;
  std::vector<Stmt> stmts;
};

struct BufferDecl {
  BindingInfo info;
  bool coherent = false;  // other workgroups' writes become visible after a buffer memory barrier
  bool is_volatile = false;  // every load reads memory again (implies coherent): for polling
  bool handoff = false;  // other workgroups write it before a device_barrier(): plain cached
                         // accesses the Vulkan memory model orders (NonPrivate), not coherent ones
  // Whether another workgroup may write it while this one runs (its loads stay where written).
  bool written_meanwhile() const { return coherent || handoff; }
};
struct SharedDecl {
  std::string name;
  Type element;
  uint32_t count = 0;
  bool broadcast = false;  // KernelBuilder::broadcast's slot: its loads are workgroup-uniform
};
struct VarDecl {
  std::string name;
  Type type;
};
// A subgroup-scope cooperative matrix variable: rows x cols elements of `element`.
struct MatrixDecl {
  std::string name;
  Type element;
  uint32_t rows = 0, cols = 0;
  MatrixUse use = MatrixUse::Accumulator;
};
struct LoopDecl {
  std::string name;
  Type type;
};

// A finished kernel: immutable, cheap to copy (shares its nodes).
struct KernelIR {
  std::string name;
  std::array<uint32_t, 3> workgroup_size{1, 1, 1};
  std::vector<BufferDecl> buffers;
  std::vector<PushField> push_fields;
  uint32_t push_bytes = 0;
  std::vector<SharedDecl> shared;
  std::vector<VarDecl> vars;
  std::vector<MatrixDecl> matrices;
  std::vector<LoopDecl> loops;
  std::vector<Block> blocks;  // blocks[0] is the body of main()
  std::vector<std::unique_ptr<Node>> nodes;
  std::string source_location;  // where the author built it, for error messages
};

}  // namespace bdsl::dsl
