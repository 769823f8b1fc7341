#include "golden/recorder.h"

#include <stdexcept>

namespace bdsl::golden {

namespace {

template <class Map, class T>
void store(Map& map, std::vector<std::string>& order, std::string_view name, const T& value) {
  const auto [it, inserted] = map.insert_or_assign(std::string(name), value);
  if (inserted) order.push_back(it->first);
}

template <class Map>
const auto& lookup(const Map& map, const std::string& name) {
  const auto it = map.find(name);
  if (it == map.end()) throw std::out_of_range("recorder: no tensor named '" + name + "'");
  return it->second;
}

}  // namespace

ForwardObserver TensorRecorder::observer() {
  ForwardObserver obs;
  obs.on_tensor = [this](std::string_view name, const MatrixF& m) { store(tensors_, names_, name, m); };
  obs.on_accumulators = [this](std::string_view name, const MatrixI& m) { store(accumulators_, acc_names_, name, m); };
  return obs;
}

const MatrixF& TensorRecorder::tensor(const std::string& name) const { return lookup(tensors_, name); }
const MatrixI& TensorRecorder::accumulators(const std::string& name) const { return lookup(accumulators_, name); }

}  // namespace bdsl::golden
