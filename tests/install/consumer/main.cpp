// A project outside the tree: defines a kernel with the installed headers and prints its GLSL.
#include <iostream>

#include "codegen/glsl_printer.h"
#include "dsl/dsl.h"

using namespace bdsl::dsl;

int main() {
  KernelBuilder k("saxpy", {256, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto n = k.push<u32>("n");
  auto a = k.push<f32>("a");
  auto i = k.global_id().x();
  if_(i < n, [&] { y[i] = a * x[i] + y[i]; });
  std::cout << bdsl::codegen::print_glsl(k.build());
}
