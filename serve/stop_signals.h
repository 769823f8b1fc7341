// SIGINT and SIGTERM as a graceful stop. block_stop_signals() must run before any thread starts
// (Vulkan drivers start their own): threads inherit the mask, so the signals never interrupt or
// kill them and are taken only by the watcher's sigtimedwait.
#pragma once
#include <atomic>
#include <functional>
#include <thread>

namespace bdsl::serve {

// Blocks SIGINT and SIGTERM in the calling thread (and the threads it starts later); ignores
// SIGPIPE (a client that went away is seen as a failed write, not a signal).
void block_stop_signals();

// Calls `on_signal` (on its own thread) with the first SIGINT or SIGTERM.
class StopSignalWatcher {
 public:
  explicit StopSignalWatcher(std::function<void(int)> on_signal);
  ~StopSignalWatcher();
  StopSignalWatcher(const StopSignalWatcher&) = delete;
  StopSignalWatcher& operator=(const StopSignalWatcher&) = delete;

 private:
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

}  // namespace bdsl::serve
