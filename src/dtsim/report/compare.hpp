#pragma once
/// Field-by-field comparison of two reports (`schema: dtsim.report/1`), for
/// performance regression checks: every numeric leaf is compared by its
/// relative change, every other leaf for equality. Direction matters: a time
/// or a size (a leaf ending in _s or _bytes) regresses when it grows, a rate
/// (throughput, TFLOP/s, MFU, HFU) when it shrinks; a change the other way
/// is an improvement, reported but never failed. Any other number (GPUs,
/// parameters, batch) fails past the tolerance either way.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::report {

struct FieldDifference {
  std::string pointer;   ///< JSON pointer of the field, e.g. /memory/peak_bytes
  std::string before;    ///< as printed from the first report ("(missing)" if absent)
  std::string after;
  double relative = 0;   ///< (after - before) / |before| for numbers; 0 otherwise
  bool beyond_tolerance = false;  ///< a regression (or, for a field with no direction, any change) past the tolerance
  bool improvement = false;       ///< past the tolerance in the better direction
};

struct Comparison {
  int fields = 0;  ///< leaves compared
  std::vector<FieldDifference> differences;
  [[nodiscard]] bool within_tolerance() const;
};

/// `tolerance` is a relative fraction (0.05 = 5%); numbers that both are
/// within 1e-12 of zero are equal.
Comparison compare_reports(const nlohmann::json& before, const nlohmann::json& after, double tolerance);

}  // namespace dtsim::report
