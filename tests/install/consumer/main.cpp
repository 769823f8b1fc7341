// A project outside the tree: builds a kernel of the installed op library and prints its GLSL
// (headers, the libraries and their dependencies all come from the installed package).
#include <iostream>

#include "codegen/glsl_printer.h"
#include "ops/examples.h"

int main() { std::cout << bdsl::codegen::print_glsl(bdsl::ops::saxpy()); }
