#pragma once
/// `--report out.html`: one self-contained page (no network, no scripts) with
/// the summary, the per-stage timeline as SVG (compute and each kind of
/// communication in their own colours, bubbles as gaps), memory over time per
/// stage, the breakdown, the bottlenecks and, when given, the verdict.
#include <string>

#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"
#include "dtsim/report/report.hpp"

namespace dtsim::report {

std::string html_report(const Report& report, const plan::TaskGraph& graph, const plan::Timeline& timeline,
                        const std::string& verdict = "");

}  // namespace dtsim::report
