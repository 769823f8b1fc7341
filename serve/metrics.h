// GET /metrics: the scheduler's counters in Prometheus' text format (version 0.0.4).
#pragma once
#include <string>

#include "serve/scheduler.h"

namespace bdsl::serve {

std::string prometheus_text(const SchedulerStats& stats, double uptime_seconds);

}  // namespace bdsl::serve
