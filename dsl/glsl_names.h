// Which names a kernel author may give to buffers, variables and the kernel itself.
#pragma once
#include <string_view>

namespace bdsl::dsl {

bool is_valid_glsl_identifier(std::string_view name);
bool is_glsl_reserved_word(std::string_view name);  // keywords and reserved words of GLSL 4.60

}  // namespace bdsl::dsl
