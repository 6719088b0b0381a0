#pragma once
/// The critical path of a simulated (or measured) step: from the task that
/// ended last, back through whichever predecessor (a dependency, the task
/// before it on its stream, or for a collective the member that arrived
/// last) ended last, to the start. Its time is split by what ran on it.
#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"

namespace dtsim::report {

struct PathShare {
  std::string kind;  ///< "compute (matmul)", "compute (memory-bound)", "optimizer", "comm: tp", ..., "waiting"
  core::Seconds time;
};

struct CriticalPath {
  std::vector<PathShare> shares;  ///< largest first
  std::size_t tasks = 0;
};

/// With `kernel_op_share` (sim::TaskCosts::kernel_op_share), compute on the
/// path is split by op kind ("compute: GEMM", "compute: attention",
/// "compute: norm", ...) in proportion to each op's cost in its kernel;
/// without it, into task_kind()'s matmul and memory-bound.
CriticalPath critical_path(const plan::TaskGraph& graph, const plan::Timeline& timeline,
                           std::span<const std::array<double, model::kOpKindCount>> kernel_op_share = {});

/// task_kind() of a task whose kernel runs a GEMM or attention.
inline constexpr std::string_view kMatmulKind = "compute (matmul)";

/// What a task is, in the words of the critical path and the HTML timeline:
/// "compute (matmul)", "compute (memory-bound)", "optimizer" or "comm: <group kind>".
std::string task_kind(const plan::TaskGraph& graph, const plan::Task& task);

}  // namespace dtsim::report
