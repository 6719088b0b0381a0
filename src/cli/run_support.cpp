#include "cli/run_support.hpp"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/core/quantity_parse.hpp"
#include "dtsim/report/writers.hpp"

namespace dtsim::cli {

void write_trace(const std::optional<std::string>& path, const plan::TaskGraph& graph, const plan::Timeline& measured) {
  if (!path) return;
  std::ofstream file(*path);
  if (!file) throw core::InputError("--trace", "", fmt::format("cannot write \"{}\"", *path));
  file << report::chrome_trace(graph, measured).dump();
}

nlohmann::json step_times_json(const exec::Execution& e) {
  nlohmann::json out = nlohmann::json::array();
  for (core::Seconds t : e.step_times) out.push_back(t.value());
  return out;
}

double parse_max_error(const std::string& text) {
  try {
    const double v = core::parse_fraction(text);
    if (v > 0) return v;
  } catch (const std::invalid_argument&) {
  }
  throw core::InputError("--max-error", "", fmt::format("expected a positive error like 15%, got \"{}\"", text));
}

std::pair<double, double> error_range(core::Seconds predicted, const exec::Execution& e) {
  const auto [fastest, slowest] = std::minmax_element(e.step_times.begin(), e.step_times.end());
  return {predicted / *slowest - 1, predicted / *fastest - 1};
}

}  // namespace dtsim::cli
