#include "ops/catalog.h"

#include "ops/saxpy.h"
#include "ops/subgroup_softmax.h"
#include "ops/workgroup_sum.h"

namespace bdsl::ops {

const std::vector<CatalogEntry>& catalog() {
  static const std::vector<CatalogEntry> entries = {
      {"saxpy", "y = a * x + y (tutorial)", [](const OpTarget&) { return saxpy(); }},
      {"workgroup_sum", "partial sums through shared memory (tutorial)",
       [](const OpTarget& t) { return workgroup_sum(std::min(256u, t.max_workgroup_invocations)); }},
      {"subgroup_softmax", "row softmax, one subgroup per row (tutorial)",
       [](const OpTarget& t) { return subgroup_softmax(std::max(64u, t.subgroup_size)); }},
  };
  return entries;
}

}  // namespace bdsl::ops
