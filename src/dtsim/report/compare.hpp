#pragma once
/// Field-by-field comparison of two reports (`schema: dtsim.report/1`), for
/// performance regression checks: every numeric leaf is compared by its
/// relative change, every other leaf for equality. Direction matters: a time
/// or a size (a leaf ending in _s or _bytes) regresses when it grows, a rate
/// (throughput, TFLOP/s, MFU, HFU) when it shrinks; a change the other way
/// is an improvement, reported but never failed. Any other number (GPUs,
/// parameters, batch) fails past the tolerance either way.
///
/// What a CI gate needs besides: only some fields gated, each with its own
/// tolerance; arrays of stages and bottlenecks matched by their stage or
/// kind, not their position; a field a newer dtsim adds, and a changed
/// strategy string, reported without failing.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::report {

enum class Verdict {
  kWithin,       ///< changed, within its tolerance
  kRegression,   ///< past the tolerance the worse way (or any way, for a field without a direction)
  kImprovement,  ///< past the tolerance the better way: reported, never failed
  kNote,         ///< reported, never failed: sentences, a new field, a changed strategy, a field not gated
};
std::string_view to_string(Verdict verdict);

struct FieldDifference {
  std::string pointer;   ///< e.g. /memory/peak_bytes; array elements matched by key read /per_stage[stage=1]/...
  std::string before;    ///< as printed from the first report ("(missing)" if absent)
  std::string after;
  double relative = 0;   ///< (after - before) / |before| for numbers; 0 otherwise
  Verdict verdict = Verdict::kWithin;
  double tolerance = 0;  ///< the one that judged it
  std::string note;      ///< why a kNote does not fail
  [[nodiscard]] bool beyond_tolerance() const { return verdict == Verdict::kRegression; }
  [[nodiscard]] bool improvement() const { return verdict == Verdict::kImprovement; }
};

struct Comparison {
  int fields = 0;  ///< leaves compared
  std::vector<FieldDifference> differences;
  [[nodiscard]] bool within_tolerance() const;
};

/// A gated field: a pointer without its leading slash ("step_time_s",
/// "memory/peak_bytes", or a prefix such as "breakdown"), and its own
/// tolerance if it has one.
struct GatedField {
  std::string pointer;
  std::optional<double> tolerance;
};

struct CompareRules {
  double tolerance = 0.05;          ///< relative fraction (0.05 = 5%)
  std::vector<GatedField> gated{};  ///< empty: every field is gated
};

/// Numbers that both are within 1e-12 of zero are equal.
Comparison compare_reports(const nlohmann::json& before, const nlohmann::json& after, const CompareRules& rules);
inline Comparison compare_reports(const nlohmann::json& before, const nlohmann::json& after, double tolerance) {
  return compare_reports(before, after, CompareRules{tolerance, {}});
}

/// "step_time_s=2%,memory/peak_bytes" as --fields gives it; throws
/// std::invalid_argument naming the item it cannot read.
std::vector<GatedField> parse_gated_fields(std::string_view text);

/// The comparison as JSON (`schema: dtsim.compare/1`) and as a Markdown
/// summary a CI job can post.
nlohmann::json comparison_json(const Comparison& c, const CompareRules& rules);
std::string comparison_markdown(const Comparison& c, const CompareRules& rules);

}  // namespace dtsim::report
