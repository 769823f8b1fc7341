// Keeps every intermediate a forward call reports (see ForwardObserver), in the order reported:
// what golden data, --dump-layers and the per-layer checker are made from.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "golden/reference_model.h"

namespace bdsl::golden {

class TensorRecorder {
 public:
  // An observer that stores into this recorder; valid while the recorder lives. A name reported
  // twice (a second forward call) replaces the first value.
  ForwardObserver observer();

  const std::vector<std::string>& names() const { return names_; }  // float tensors, in order
  const std::vector<std::string>& accumulator_names() const { return acc_names_; }
  const MatrixF& tensor(const std::string& name) const;       // std::out_of_range naming it
  const MatrixI& accumulators(const std::string& name) const;
  bool contains(const std::string& name) const { return tensors_.count(name) || accumulators_.count(name); }

 private:
  std::vector<std::string> names_;
  std::vector<std::string> acc_names_;
  std::map<std::string, MatrixF> tensors_;
  std::map<std::string, MatrixI> accumulators_;
};

}  // namespace bdsl::golden
