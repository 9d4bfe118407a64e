// The figures simba-bench aims at, and whether a run met them. Each target comes from the
// issue or the promise that set it; judge() adds to a workload's JSON line one entry per figure
// with a target: {"targets": {"p50_us": {"max": 0.5, "met": false, "why": "..."}}}.
#pragma once

#include <nlohmann/json.hpp>

namespace simba::bench {

// Adds "targets" to `line` (a workload's JSON line, with "backend" and "workload") if any
// target applies to it; a figure the line lacks (a skipped workload) is not judged.
void judge(nlohmann::json& line);

}  // namespace simba::bench
