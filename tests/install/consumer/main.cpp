// A project outside the tree: builds a kernel of the installed op library and prints its GLSL
// (headers, the libraries and their dependencies all come from the installed package; headers
// only under the project's prefix).
#include <bitnet_dsl/codegen/glsl_printer.h>
#include <bitnet_dsl/ops/examples.h>

#include <iostream>

int main() { std::cout << bdsl::codegen::print_glsl(bdsl::ops::saxpy()); }
