#include "runtime/validation_log.h"

namespace bdsl::rt {

void ValidationLog::keep(std::string message) {
  last_.push_back(std::move(message));
  if (last_.size() > kKept) last_.pop_front();
}

void ValidationLog::add_error(std::string message) {
  std::lock_guard lock(mutex_);
  ++errors_;
  keep("error: " + std::move(message));
}

void ValidationLog::add_warning(std::string message) {
  std::lock_guard lock(mutex_);
  ++warnings_;
  keep("warning: " + std::move(message));
}

size_t ValidationLog::errors() const {
  std::lock_guard lock(mutex_);
  return errors_;
}

size_t ValidationLog::warnings() const {
  std::lock_guard lock(mutex_);
  return warnings_;
}

std::vector<std::string> ValidationLog::last_messages() const {
  std::lock_guard lock(mutex_);
  return {last_.begin(), last_.end()};
}

std::string ValidationLog::summary() const {
  std::lock_guard lock(mutex_);
  std::string out = std::to_string(errors_) + " validation errors, " + std::to_string(warnings_) +
                    " warnings";
  for (const auto& m : last_) out += "\n  " + m;
  return out;
}

}  // namespace bdsl::rt
