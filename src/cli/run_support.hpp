#pragma once
// What `dtsim run` and `dtsim validate` print and check the same way on
// either backend (run_command.cpp: MPI ranks; gpu_run_command.cpp: a GPU).
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "dtsim/exec/executor.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"

namespace dtsim::cli {

/// --trace: the measured timeline as a Chrome trace, when a path was given.
void write_trace(const std::optional<std::string>& path, const plan::TaskGraph& graph, const plan::Timeline& measured);

/// Every timed step's time, in seconds.
nlohmann::json step_times_json(const exec::Execution& e);

/// --max-error ("15%"); throws InputError unless it is positive.
double parse_max_error(const std::string& text);

/// The step-time error against the slowest and the fastest timed step.
std::pair<double, double> error_range(core::Seconds predicted, const exec::Execution& e);

}  // namespace dtsim::cli
