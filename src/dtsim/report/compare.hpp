#pragma once
/// Field-by-field comparison of two reports (`schema: dtsim.report/1`), for
/// performance regression checks: every numeric leaf is compared by its
/// relative change, every other leaf for equality.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::report {

struct FieldDifference {
  std::string pointer;   ///< JSON pointer of the field, e.g. /memory/peak_bytes
  std::string before;    ///< as printed from the first report ("(missing)" if absent)
  std::string after;
  double relative = 0;   ///< (after - before) / |before| for numbers; 0 otherwise
  bool beyond_tolerance = false;
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
