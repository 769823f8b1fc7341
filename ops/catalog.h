// Every op of the library by name, built for a target at a representative shape (the 2B-4T model's
// where the op belongs to BitNet), so `bitnet-dsl shaders` can list them and print their GLSL.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dsl/builder.h"
#include "ops/target.h"

namespace bdsl::ops {

struct CatalogEntry {
  std::string name;
  std::string summary;
  std::function<dsl::Kernel(const OpTarget&)> build;
};

const std::vector<CatalogEntry>& catalog();

}  // namespace bdsl::ops
