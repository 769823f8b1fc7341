// Counts the validation layer's warnings and errors and keeps the last few messages, so a test
// can fail on any of them. Thread-safe: the layer may call back from any thread.
#pragma once
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace bdsl::rt {

class ValidationLog {
 public:
  static constexpr size_t kKept = 16;

  void add_error(std::string message);
  void add_warning(std::string message);
  size_t errors() const;
  size_t warnings() const;
  size_t count() const { return errors() + warnings(); }
  std::vector<std::string> last_messages() const;  // oldest first, at most kKept
  std::string summary() const;                     // counts, then the kept messages

 private:
  void keep(std::string message);

  mutable std::mutex mutex_;
  size_t errors_ = 0;
  size_t warnings_ = 0;
  std::deque<std::string> last_;
};

}  // namespace bdsl::rt
