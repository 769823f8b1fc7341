#include "ops/pipeline_batch.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace bdsl::ops {

void PipelineBatch::add(Plan plan, PlannedPipeline& into) { entries_.push_back({std::move(plan), &into, nullptr}); }

void PipelineBatch::add(Plan plan, std::optional<PlannedPipeline>& into) {
  entries_.push_back({std::move(plan), nullptr, &into});
}

void PipelineBatch::build(rt::Context& ctx, codegen::ShaderCache& cache, unsigned threads) {
  if (!threads) threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  threads = std::min<unsigned>(threads, unsigned(entries_.size()));
  std::vector<std::optional<PlannedPipeline>> built(entries_.size());
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&] {
    for (size_t i; (i = next++) < entries_.size();) {
      try {
        built[i].emplace(make_pipeline(ctx, entries_[i].plan, cache));
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].into)
      *entries_[i].into = std::move(*built[i]);
    else
      entries_[i].optional_into->emplace(std::move(*built[i]));
  }
  entries_.clear();
}

}  // namespace bdsl::ops
