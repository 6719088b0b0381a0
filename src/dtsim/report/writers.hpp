#pragma once
/// Writers of a Report: the readable summary table, the JSON object of the
/// output contract, and a Chrome trace-event file (one process per simulated
/// rank, one thread per stream, a memory counter per rank) that Perfetto and
/// chrome://tracing open.
#include <ostream>

#include <nlohmann/json.hpp>

#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"
#include "dtsim/report/report.hpp"

namespace dtsim::report {

void write_table(std::ostream& out, const Report& report);
nlohmann::json to_json(const Report& report);
nlohmann::json chrome_trace(const plan::TaskGraph& graph, const plan::Timeline& timeline);

}  // namespace dtsim::report
