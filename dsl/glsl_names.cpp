#include "dsl/glsl_names.h"

#include <algorithm>
#include <iterator>
#include <cctype>

namespace bdsl::dsl {

bool is_valid_glsl_identifier(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  if (name.starts_with("gl_") || name.find("__") != std::string_view::npos) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool is_glsl_reserved_word(std::string_view name) {
  // Keywords, reserved words and the names the printer itself uses (main, pc, t<N> are avoided
  // by construction: temporaries are printed with a trailing '_').
  static constexpr std::string_view words[] = {
      "attribute", "const", "uniform", "varying", "buffer", "shared", "coherent", "volatile",
      "restrict", "readonly", "writeonly", "atomic_uint", "layout", "centroid", "flat", "smooth",
      "noperspective", "patch", "sample", "invariant", "precise", "break", "continue", "do", "for",
      "while", "switch", "case", "default", "if", "else", "subroutine", "in", "out", "inout", "int",
      "void", "bool", "true", "false", "float", "double", "discard", "return", "vec2", "vec3",
      "vec4", "ivec2", "ivec3", "ivec4", "bvec2", "bvec3", "bvec4", "uint", "uvec2", "uvec3",
      "uvec4", "dvec2", "dvec3", "dvec4", "mat2", "mat3", "mat4", "lowp", "mediump", "highp",
      "precision", "sampler1D", "sampler2D", "sampler3D", "samplerCube", "struct", "common",
      "partition", "active", "asm", "class", "union", "enum", "typedef", "template", "this",
      "resource", "goto", "inline", "noinline", "public", "static", "extern", "external",
      "interface", "long", "short", "half", "fixed", "unsigned", "superp", "input", "output",
      "hvec2", "hvec3", "hvec4", "fvec2", "fvec3", "fvec4", "filter", "sizeof", "cast",
      "namespace", "using", "main", "pc", "image1D", "image2D", "image3D", "texture", "sampler",
      "float16_t", "f16vec2", "f16vec3", "f16vec4", "int8_t", "uint8_t", "int16_t", "uint16_t",
      "int64_t", "uint64_t", "min", "max", "abs", "clamp", "fma", "exp", "exp2", "log", "sqrt",
      "pow", "sin", "cos", "floor", "round", "dot", "mix", "step", "sign", "length", "barrier",
      "mod", "any", "all", "not"};
  return std::find(std::begin(words), std::end(words), name) != std::end(words);
}

}  // namespace bdsl::dsl
