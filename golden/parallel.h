// Splits [0, n) into contiguous chunks over a few std::threads. Each index is computed by exactly
// one thread with the same arithmetic as the serial loop, so results do not depend on the thread
// count. Small jobs stay on the calling thread (spawning costs more than it saves).
#pragma once
#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace bdsl::golden {

// fn(begin, end) for disjoint ranges covering [0, n). `work_per_item` is a rough cost (e.g. the
// row length of a matrix-vector product) used to decide whether threads are worth it.
template <class Fn>
void parallel_for(std::size_t n, std::size_t work_per_item, Fn&& fn) {
  constexpr std::size_t kMinWorkPerThread = std::size_t(1) << 20;
  const std::size_t hw = std::max<std::size_t>(1, std::thread::hardware_concurrency());
  const std::size_t by_work = (n * std::max<std::size_t>(work_per_item, 1)) / kMinWorkPerThread;
  const std::size_t threads = std::min({hw, by_work, n, std::size_t(16)});
  if (threads <= 1) {
    fn(std::size_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  const std::size_t chunk = (n + threads - 1) / threads;
  for (std::size_t begin = chunk; begin < n; begin += chunk) {
    pool.emplace_back([&fn, begin, end = std::min(n, begin + chunk)] { fn(begin, end); });
  }
  fn(std::size_t(0), std::min(n, chunk));
  for (auto& t : pool) t.join();
}

}  // namespace bdsl::golden
