#include "serve/metrics.h"

#include <fmt/format.h>

namespace bdsl::serve {

namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
}

}  // namespace

std::string prometheus_text(const SchedulerStats& s, double uptime_seconds) {
  std::string out;
  metric(out, "bdsl_prompt_tokens_total", "counter", "Prompt tokens read, in prompt chunks or in decode steps.", double(s.prompt_tokens));
  metric(out, "bdsl_prompt_tokens_shared_total", "counter",
         "Prompt tokens a sequence took from another's chunk of the same prompt (n > 1), not read again.",
         double(s.shared_prompt_tokens));
  metric(out, "bdsl_generated_tokens_total", "counter", "Tokens generated (sampled).", double(s.generated_tokens));
  metric(out, "bdsl_requests_finished_total", "counter", "Requests ended, cancellations included.",
         double(s.requests_finished));
  metric(out, "bdsl_requests_cancelled_total", "counter", "Requests whose client went away.",
         double(s.requests_cancelled));
  metric(out, "bdsl_requests_rejected_total", "counter", "Requests refused because the queue was full.",
         double(s.requests_rejected));
  metric(out, "bdsl_busy_seconds_total", "counter", "Seconds spent in prefill and decode steps.", s.busy_seconds);
  metric(out, "bdsl_prefill_seconds_total", "counter", "Seconds spent in prompt chunks (prompts longer than the steps take).", s.prefill_seconds);
  metric(out, "bdsl_prefill_chunks_total", "counter", "Prompt chunks run.", double(s.prefills));
  metric(out, "bdsl_decode_steps_total", "counter", "Decode steps run (each for every generating sequence and the short prompts' tokens).", double(s.decode_steps));
  // Speed while working (idle time left out), and over the server's whole life.
  metric(out, "bdsl_generation_tokens_per_second", "gauge", "Generated tokens per busy second.",
         s.busy_seconds > 0 ? double(s.generated_tokens) / s.busy_seconds : 0.0);
  metric(out, "bdsl_throughput_tokens_per_second", "gauge", "Generated tokens per second since start.",
         uptime_seconds > 0 ? double(s.generated_tokens) / uptime_seconds : 0.0);
  metric(out, "bdsl_active_slots", "gauge", "Slots holding a request.", double(s.active_slots));
  metric(out, "bdsl_slots", "gauge", "Slots (sequences decoded at once).", double(s.slots));
  metric(out, "bdsl_queue_length", "gauge", "Requests waiting for a slot.", double(s.queue_length));
  metric(out, "bdsl_queue_capacity", "gauge", "Requests that may wait before new ones get 503.",
         double(s.queue_capacity));
  metric(out, "bdsl_uptime_seconds", "gauge", "Seconds since the server started.", uptime_seconds);
  return out;
}

}  // namespace bdsl::serve
