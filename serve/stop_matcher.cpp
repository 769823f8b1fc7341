#include "serve/stop_matcher.h"

#include <algorithm>

namespace bdsl::serve {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopMatcher::Result StopMatcher::push(std::string_view text) {
  held_ += text;
  // The earliest stop string wins (text before it is the answer).
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    Result r{held_.substr(0, first), true};
    held_.clear();
    return r;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t k = std::min(held_.size(), s.size() - 1); k > keep; --k)
      if (std::string_view(held_).substr(held_.size() - k) == std::string_view(s).substr(0, k)) {
        keep = k;
        break;
      }
  Result r{held_.substr(0, held_.size() - keep), false};
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace bdsl::serve
