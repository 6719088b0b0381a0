#pragma once
/// Prediction against measurement: the simulated and the measured Timeline
/// of one TaskGraph, compared for the whole step and per task kind.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtsim/core/units.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"

namespace dtsim::report {

struct ValidationRow {
  std::string what;  ///< "step time", or a task_kind ("compute (matmul)", "comm: dp", ...)
  core::Seconds predicted;
  core::Seconds measured;
  /// (predicted - measured) / measured; 0 when nothing was measured.
  [[nodiscard]] double error() const;
};

struct Validation {
  ValidationRow step;
  /// Time each kind of task kept a rank busy, averaged over ranks. A
  /// collective or receive counts its wait for the other members (a
  /// receive's for its sender), predicted as the executor measures it: from
  /// when the tasks it runs before it have ended. A pipeline send, posted
  /// and left, is in neither column.
  std::vector<ValidationRow> kinds;
  core::Bytes predicted_peak_memory;  ///< largest rank's
  core::Bytes measured_peak_memory;   ///< largest rank's allocation, kernel scratch and MPI buffers included
};

Validation validate(const plan::TaskGraph& graph, const plan::Timeline& predicted, const plan::Timeline& measured);

void write_validation_table(std::ostream& out, const Validation& v);
nlohmann::json to_json(const Validation& v);

}  // namespace dtsim::report
