#include "serve/stop_signals.h"

#include <csignal>
#include <ctime>

namespace bdsl::serve {

namespace {
sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void block_stop_signals() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

StopSignalWatcher::StopSignalWatcher(std::function<void(int)> on_signal) {
  thread_ = std::thread([this, on_signal = std::move(on_signal)] {
    const sigset_t set = stop_set();
    const timespec poll{0, 100'000'000};  // looks at quit_ ten times a second
    while (!quit_) {
      const int sig = sigtimedwait(&set, nullptr, &poll);
      if (sig > 0) {
        on_signal(sig);
        return;
      }
    }
  });
}

StopSignalWatcher::~StopSignalWatcher() {
  quit_ = true;
  thread_.join();
}

}  // namespace bdsl::serve
