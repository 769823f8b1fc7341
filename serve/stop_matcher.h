// Stop strings at the text level: text passes through unless it could be the start of a stop
// string, which is held back until the next text decides. When a stop string appears, the text
// before it is released and generation ends; the stop string and anything after it are dropped.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace bdsl::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string was found: `text` is the last of the output
  };
  Result push(std::string_view text);
  std::string flush();  // the text held back, at the end of generation (no stop string came)

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace bdsl::serve
