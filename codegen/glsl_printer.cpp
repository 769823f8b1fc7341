#include "codegen/glsl_printer.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "codegen/interface_of.h"
#include "codegen/materialize.h"
#include "dsl/glsl_names.h"

namespace bdsl::codegen {
using namespace bdsl::dsl;

namespace {

std::string float_literal(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  if (!std::isfinite(f)) return "uintBitsToFloat(" + std::to_string(bits) + "u)";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);  // shortest text that reads back exactly
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A double's exact value: the shortest text that reads back exactly, with GLSL's lf suffix
// (without it GLSL reads a float, rounding it).
std::string double_literal(uint64_t bits) {
  const double d = std::bit_cast<double>(bits);
  if (!std::isfinite(d)) return "uint64BitsToDouble(" + std::to_string(bits) + "ul)";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "lf";
}

std::string literal(const Node& n) {
  const auto bits = static_cast<uint32_t>(n.literal);
  switch (n.type.kind) {
    case ScalarKind::Bool: return n.literal ? "true" : "false";
    case ScalarKind::U32: return std::to_string(bits) + "u";
    case ScalarKind::I32: {
      const auto v = static_cast<int32_t>(bits);
      return v == INT32_MIN ? "(-2147483647 - 1)" : std::to_string(v);
    }
    case ScalarKind::F32: return float_literal(bits);
    case ScalarKind::F16: return "float16_t(" + float_literal(bits) + ")";
    case ScalarKind::I8: return "int8_t(" + std::to_string(static_cast<int8_t>(bits)) + ")";
    case ScalarKind::U64: return std::to_string(n.literal) + "ul";
    case ScalarKind::F64: return double_literal(n.literal);
    case ScalarKind::I64: {
      const auto v = static_cast<int64_t>(n.literal);
      return v == INT64_MIN ? "(-9223372036854775807l - 1l)" : std::to_string(v) + "l";
    }
  }
  return "?";
}

const char* builtin_name(BuiltinVar b) {
  static const char* names[] = {"gl_GlobalInvocationID", "gl_LocalInvocationID", "gl_WorkGroupID",
                                "gl_NumWorkGroups",      "gl_LocalInvocationIndex", "gl_SubgroupSize",
                                "gl_SubgroupInvocationID", "gl_SubgroupID", "gl_NumSubgroups"};
  return names[static_cast<int>(b)];
}

std::string temp_name(int i) {
  std::string s = std::to_string(i);
  s.insert(s.begin(), 't');
  return s;
}

// Cooperative-matrix spellings (GL_NV_cooperative_matrix): data, so another extension is a row.
struct MatrixSpelling {
  const char* int_type;
  const char* float_type;
  const char* load;
  const char* store;
  const char* mul_add;
};
constexpr MatrixSpelling kMatrixNV{"icoopmatNV", "fcoopmatNV", "coopMatLoadNV", "coopMatStoreNV", "coopMatMulAddNV"};

// icoopmatNV<8, gl_ScopeSubgroup, 16, 32>
std::string matrix_type(const MatrixDecl& m) {
  const bool is_float = m.element.is_float();
  return std::string(is_float ? kMatrixNV.float_type : kMatrixNV.int_type) + "<" + std::to_string(8 * m.element.bytes()) +
         ", gl_ScopeSubgroup, " + std::to_string(m.rows) + ", " + std::to_string(m.cols) + ">";
}

bool is_operator(Op op) { return op_spelling(op)[0] != '\0' || op == Op::Select; }

class Printer {
 public:
  explicit Printer(const Kernel& k) : ir_(k.ir()), iface_(interface_of(k)), m_(materialize(ir_)) {}

  std::string run() {
    name_declarations();
    header();
    out_ << "void main() {\n";
    block(0, 1);
    out_ << "}\n";
    return out_.str();
  }

 private:
  // A name not yet used; a GLSL keyword gets a trailing '_' ("out" -> "out_").
  std::string unique(std::string base) {
    if (is_glsl_reserved_word(base)) base += "_";
    std::string name = base;
    for (int i = 1; used_.count(name); ++i) name = base + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

  void name_declarations() {
    used_ = {"pc", "main"};
    for (const auto& f : ir_.push_fields) push_names_.push_back(is_glsl_reserved_word(f.name) ? f.name + "_" : f.name);
    for (const auto& b : ir_.buffers) buffer_names_.push_back(unique(b.info.name));
    for (const auto& s : ir_.shared) shared_names_.push_back(unique(s.name));
    for (const auto& v : ir_.vars) var_names_.push_back(unique(v.name));
    for (const auto& l : ir_.loops) loop_names_.push_back(unique(l.name));
    for (const auto& m : ir_.matrices) matrix_names_.push_back(unique(m.name));
    temp_names_.resize(ir_.nodes.size());
  }

  void extensions() {
    const KernelFeatures& f = iface_.features;
    auto ext = [&](const char* name) { out_ << "#extension " << name << " : require\n"; };
    if (f.float16) ext("GL_EXT_shader_explicit_arithmetic_types_float16");
    if (f.storage16) ext("GL_EXT_shader_16bit_storage");
    if (f.int8) ext("GL_EXT_shader_explicit_arithmetic_types_int8");
    if (f.int64) ext("GL_EXT_shader_explicit_arithmetic_types_int64");
    if (f.float_atomic_add_buffer || f.float_atomic_add_shared) ext("GL_EXT_shader_atomic_float");
    if (f.storage8) ext("GL_EXT_shader_8bit_storage");
    if (f.cooperative_matrix_nv || f.memory_model) ext("GL_KHR_memory_scope_semantics");
    // glslang (12) leaves NonPrivate off every access unless asked: without it a handoff buffer's
    // loads are private, which the memory model lets the compiler keep from before the acquire.
    if (f.memory_model) out_ << "#pragma use_vulkan_memory_model\n";
    if (f.cooperative_matrix_nv) {
      ext("GL_NV_cooperative_matrix");
      const auto& ms = ir_.matrices;
      if (std::any_of(ms.begin(), ms.end(), [](const MatrixDecl& m) { return m.element.is_int() || m.element.kind == ScalarKind::I8; }))
        ext("GL_NV_integer_cooperative_matrix");
    }
    if (f.subgroup_basic) ext("GL_KHR_shader_subgroup_basic");
    if (f.subgroup_arithmetic) ext("GL_KHR_shader_subgroup_arithmetic");
    if (f.subgroup_shuffle) ext("GL_KHR_shader_subgroup_shuffle");
    if (f.subgroup_shuffle_relative) ext("GL_KHR_shader_subgroup_shuffle_relative");
    if (f.subgroup_ballot) ext("GL_KHR_shader_subgroup_ballot");
    if (f.int_dot_product) {
      ext("GL_EXT_spirv_intrinsics");
      // OpSDotKHR (4450) with the packed 4x8-bit format; capabilities DotProductKHR (6019) and
      // DotProductInput4x8BitPackedKHR (6018).
      out_ << "spirv_instruction(extensions = [\"SPV_KHR_integer_dot_product\"], capabilities = [6019, 6018], "
              "id = 4450)\nint bdsl_sdot4x8(uint a, uint b, spirv_literal int format);\n";
    }
  }

  // How other workgroups' accesses to a buffer are seen: polled, coherent, handed off, or not.
  static const char* memory_qualifier(const BufferDecl& b) {
    if (b.is_volatile) return "volatile coherent ";
    if (b.coherent) return "coherent ";
    if (b.handoff) return "nonprivate ";
    return "";
  }

  void header() {
    out_ << "#version 460\n";
    out_ << "// kernel: " << ir_.name << "\n";
    extensions();
    const auto& wg = ir_.workgroup_size;
    out_ << "layout(local_size_x = " << wg[0] << ", local_size_y = " << wg[1] << ", local_size_z = " << wg[2]
         << ") in;\n";
    for (size_t i = 0; i < ir_.buffers.size(); ++i) {
      const auto& b = ir_.buffers[i].info;
      const char* q = b.access == Access::Read ? "readonly " : b.access == Access::Write ? "writeonly " : "";
      out_ << "layout(std430, set = 0, binding = " << b.binding << ") " << memory_qualifier(ir_.buffers[i])
           << q << "buffer " << buffer_names_[i]
           << "_block { " << glsl_name(b.element) << " " << buffer_names_[i] << "[]; };\n";
    }
    if (!ir_.push_fields.empty()) {
      out_ << "layout(push_constant, std430) uniform PushConstants {";
      for (const auto& f : ir_.push_fields)
        out_ << " layout(offset = " << f.offset << ") " << glsl_name(f.type) << " " << push_names_[&f - &ir_.push_fields[0]] << ";";
      out_ << " } pc;\n";
    }
    for (size_t i = 0; i < ir_.shared.size(); ++i)
      out_ << "shared " << glsl_name(ir_.shared[i].element) << " " << shared_names_[i] << "["
           << ir_.shared[i].count << "];\n";
  }

  void indent(int depth) { out_ << std::string(2 * depth, ' '); }

  void block(uint32_t id, int depth) {
    const Block& b = ir_.blocks[id];
    for (uint32_t i = 0; i < b.stmts.size(); ++i) {
      for (const Node* n : m_.before[id][i]) define(*n, depth);
      statement(b.stmts[i], depth);
    }
  }

  void define(const Node& n, int depth) {
    const std::string value = inline_expr(n);
    temp_names_[n.seq] = unique(n.op == Op::Let ? n.name : temp_name(temp_count_++));
    indent(depth);
    out_ << (n.precise ? "precise " : "const ") << glsl_name(n.type) << " " << temp_names_[n.seq] << " = " << value
         << ";\n";
  }

  void statement(const Stmt& s, int depth) {
    switch (s.kind) {
      case StmtKind::Eval:
        if (s.node->op == Op::Let || m_.uses[s.node->seq] > 1) {
          define(*s.node, depth);
        } else {  // an atomic whose result nobody reads
          temp_names_[s.node->seq] = "";
          indent(depth);
          out_ << inline_expr(*s.node) << ";\n";
        }
        return;
      case StmtKind::DeclareVar:
        indent(depth);
        out_ << glsl_name(ir_.vars[s.ref].type) << " " << var_names_[s.ref] << " = " << expr(s.node) << ";\n";
        return;
      case StmtKind::Assign:
        indent(depth);
        out_ << var_names_[s.ref] << " = " << expr(s.node) << ";\n";
        return;
      case StmtKind::Store:
      case StmtKind::SharedStore: {
        const auto& names = s.kind == StmtKind::Store ? buffer_names_ : shared_names_;
        indent(depth);
        out_ << names[s.ref] << "[" << expr(s.index) << "] = " << expr(s.node) << ";\n";
        return;
      }
      case StmtKind::If:
        indent(depth);
        out_ << "if (" << expr(s.node) << ") {\n";
        block(s.blocks[0], depth + 1);
        if (s.blocks.size() > 1) {
          indent(depth);
          out_ << "} else {\n";
          block(s.blocks[1], depth + 1);
        }
        indent(depth);
        out_ << "}\n";
        return;
      case StmtKind::ForRange: {
        const std::string& i = loop_names_[s.ref];
        indent(depth);
        out_ << "for (" << glsl_name(ir_.loops[s.ref].type) << " " << i << " = " << expr(s.index) << "; " << i
             << " < " << expr(s.node) << "; " << i << " += " << expr(s.step) << ") {\n";
        block(s.blocks[0], depth + 1);
        indent(depth);
        out_ << "}\n";
        return;
      }
      case StmtKind::Loop:
        indent(depth);
        out_ << "while (true) {\n";
        block(s.blocks[0], depth + 1);
        indent(depth);
        out_ << "}\n";
        return;
      case StmtKind::BreakUnless:
        indent(depth);
        out_ << "if (!(" << expr(s.node) << ")) break;\n";
        return;
      case StmtKind::Break:
        indent(depth);
        out_ << "break;\n";
        return;
      case StmtKind::Continue:
        indent(depth);
        out_ << "continue;\n";
        return;
      case StmtKind::Barrier:
        indent(depth);
        switch (BarrierKind(s.ref)) {
          case BarrierKind::BufferMemory: out_ << "memoryBarrierBuffer();\n"; break;
          case BarrierKind::WorkgroupAndBuffer: out_ << "memoryBarrierBuffer(); memoryBarrierShared(); barrier();\n"; break;
          case BarrierKind::Workgroup: out_ << "memoryBarrierShared(); barrier();\n"; break;
          case BarrierKind::Subgroup: out_ << "subgroupMemoryBarrierShared(); subgroupBarrier();\n"; break;
          case BarrierKind::Device:
            out_ << "controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared, "
                    "gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible);\n";
            break;
        }
        return;
      case StmtKind::DeclareMatrix:
      case StmtKind::FillMatrix:
      case StmtKind::LoadMatrix:
      case StmtKind::StoreMatrix:
      case StmtKind::MulAddMatrix:
      case StmtKind::SetMatrixElement:
        indent(depth);
        out_ << matrix_statement(s) << ";\n";
        return;
    }
  }

  std::string matrix_statement(const Stmt& s) {
    const std::string& m = matrix_names_[s.ref];
    const std::string type = matrix_type(ir_.matrices[s.ref]);
    switch (s.kind) {
      case StmtKind::DeclareMatrix: return type + " " + m + (s.node ? " = " + type + "(" + expr(s.node) + ")" : "");
      case StmtKind::FillMatrix: return m + " = " + type + "(" + expr(s.node) + ")";
      case StmtKind::SetMatrixElement: return m + "[" + expr(s.index) + "] = " + expr(s.node);
      case StmtKind::MulAddMatrix:
        return m + " = " + kMatrixNV.mul_add + "(" + matrix_names_[s.matrix.operands[0]] + ", " +
               matrix_names_[s.matrix.operands[1]] + ", " + m + ")";
      default: {  // load or store: (matrix, array, first element, stride, column-major)
        const auto& arrays = s.matrix.shared ? shared_names_ : buffer_names_;
        return std::string(s.kind == StmtKind::LoadMatrix ? kMatrixNV.load : kMatrixNV.store) + "(" + m + ", " +
               arrays[s.matrix.memory] + ", " + expr(s.index) + ", " + expr(s.node) + ", " +
               (s.matrix.layout == MatrixLayout::ColumnMajor ? "true" : "false") + ")";
      }
    }
  }

  // A use of a node: its temporary's name, or its text inline.
  std::string expr(const Node* n) {
    if (m_.named[n->seq] && !temp_names_[n->seq].empty()) return temp_names_[n->seq];
    return inline_expr(*n);
  }

  // An operand inside a larger expression: parenthesised when it is itself an operator.
  std::string operand(const Node* n) {
    std::string s = expr(n);
    const bool is_name = m_.named[n->seq] && !temp_names_[n->seq].empty();
    if (!is_name && (is_operator(n->op) || (n->op == Op::Const && s[0] == '-'))) return "(" + s + ")";
    return s;
  }

  std::string lvalue(const Node& n) {
    const auto& names = n.op == Op::Load ? buffer_names_ : shared_names_;
    return names[n.ref] + "[" + expr(n.args[0]) + "]";
  }

  std::string call(const Node& n) {
    const auto fn = static_cast<Fn>(n.ref);
    std::string s = std::string(fn_spelling(fn)) + "(";
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i) s += ", ";
      s += is_lvalue_arg(n, i) ? lvalue(*n.args[i]) : expr(n.args[i]);
    }
    if (fn == Fn::SDot4x8) s += ", 0";  // PackedVectorFormat4x8Bit
    if (fn == Fn::AtomicLoad)
      s += n.args[0]->op == Op::SharedLoad ? ", gl_ScopeWorkgroup, gl_StorageSemanticsShared, gl_SemanticsRelaxed"
                                          : ", gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed";
    return s + ")";
  }

  std::string inline_expr(const Node& n) {
    switch (n.op) {
      case Op::Const: return literal(n);
      case Op::PushField: return "pc." + push_names_[n.ref];
      case Op::Builtin: return builtin_name(static_cast<BuiltinVar>(n.ref));
      case Op::LoopIndex: return loop_names_[n.ref];
      case Op::VarRead: return var_names_[n.ref];
      case Op::MatrixElement: return matrix_names_[n.ref] + "[" + expr(n.args[0]) + "]";
      case Op::Load:
      case Op::SharedLoad: return lvalue(n);
      case Op::Convert: return glsl_name(n.type) + "(" + expr(n.args[0]) + ")";
      case Op::Select:
        return operand(n.args[0]) + " ? " + operand(n.args[1]) + " : " + operand(n.args[2]);
      case Op::Component: return operand(n.args[0]) + "." + "xyzw"[n.ref];
      case Op::Construct: {
        std::string s = glsl_name(n.type) + "(";
        for (size_t i = 0; i < n.args.size(); ++i) s += (i ? ", " : "") + expr(n.args[i]);
        return s + ")";
      }
      case Op::Call: return call(n);
      case Op::Let: return expr(n.args[0]);
      case Op::Neg:
      case Op::Not:
      case Op::BitNot: return op_spelling(n.op) + operand(n.args[0]);
      default:  // binary operators
        return operand(n.args[0]) + " " + op_spelling(n.op) + " " + operand(n.args[1]);
    }
  }

  const KernelIR& ir_;
  KernelInterface iface_;
  Materialization m_;
  std::ostringstream out_;
  std::set<std::string> used_;
  std::vector<std::string> push_names_, buffer_names_, shared_names_, var_names_, loop_names_, matrix_names_, temp_names_;
  int temp_count_ = 0;
};

}  // namespace

std::string print_glsl(const Kernel& kernel) { return Printer(kernel).run(); }

}  // namespace bdsl::codegen
