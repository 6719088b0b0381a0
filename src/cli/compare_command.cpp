// `dtsim compare a.json b.json --tolerance 5%`: a regression check between two
// saved reports. Exit 0 within the tolerance, 1 past it, 2 for bad input.
#include <charconv>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "cli/commands.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/json_reader.hpp"
#include "dtsim/core/quantity_parse.hpp"
#include "dtsim/report/compare.hpp"

namespace dtsim::cli {
namespace {

double parse_tolerance(const std::string& text) {
  try {
    return core::parse_fraction(text);
  } catch (const std::invalid_argument&) {
    throw core::InputError("--tolerance", "", fmt::format("expected a tolerance like 5% or 0.05, got \"{}\"", text));
  }
}

nlohmann::json load_report(const std::string& path) {
  nlohmann::json report = core::load_json_file(path);
  if (!report.is_object() || report.value("schema", "") != "dtsim.report/1") {
    throw core::InputError(path, "/schema", "expected a dtsim report (\"schema\": \"dtsim.report/1\"), as simulate --json writes");
  }
  // A truncated or hand-edited report would otherwise compare as "differences"
  // and exit 1, which reads as a regression rather than a broken file.
  for (const char* key : {"step_time_s", "samples_per_s", "mfu", "gpus"}) {
    if (!report.contains(key) || !report.at(key).is_number()) {
      throw core::InputError(path, std::string("/") + key, "expected a number, as every simulate --json report has");
    }
  }
  for (const char* key : {"memory", "breakdown"}) {
    if (!report.contains(key) || !report.at(key).is_object()) {
      throw core::InputError(path, std::string("/") + key, "expected an object, as every simulate --json report has");
    }
  }
  return report;
}

}  // namespace

void add_compare(CLI::App& app, CompareOptions& o) {
  CLI::App* cmd = app.add_subcommand("compare", "compare two saved reports field by field (a regression check)");
  cmd->add_option("before", o.before, "the reference report (simulate --json)")->required();
  cmd->add_option("after", o.after, "the report to check")->required();
  cmd->add_option("--tolerance", o.tolerance, "largest relative change allowed, like 5% or 0.05")->capture_default_str();
  cmd->add_option("--fields", o.fields,
                  "gate only these fields, each with its own tolerance if given: step_time_s=2%,memory/peak_bytes");
  cmd->add_flag("--json", o.json, "print the comparison as JSON (schema dtsim.compare/1)");
  cmd->add_option("--markdown", o.markdown, "also write a Markdown summary to this file (a CI job's step summary)");
}

int run_compare(const CompareOptions& o, std::ostream& out) {
  report::CompareRules rules;
  rules.tolerance = parse_tolerance(o.tolerance);
  try {
    rules.gated = report::parse_gated_fields(o.fields);
  } catch (const std::invalid_argument& e) {
    throw core::InputError("--fields", "", e.what());
  }
  const double tolerance = rules.tolerance;
  report::Comparison c = report::compare_reports(load_report(o.before), load_report(o.after), rules);
  if (o.markdown) {
    std::ofstream file(*o.markdown, std::ios::app);  // a step summary collects several
    if (!file) throw core::InputError("--markdown", "", fmt::format("cannot write \"{}\"", *o.markdown));
    file << report::comparison_markdown(c, rules);
  }
  if (o.json) {
    out << report::comparison_json(c, rules).dump(2) << "\n";
    return c.within_tolerance() ? 0 : 1;
  }
  if (!c.differences.empty()) {
    fmt::print(out, "{:<44} {:>16} {:>16} {:>9}\n", "field", "before", "after", "change");
  }
  int beyond = 0, improved = 0;
  for (const auto& d : c.differences) {
    beyond += d.beyond_tolerance() ? 1 : 0;
    std::string change = d.relative != 0 ? fmt::format("{:+.2f}%", 100 * d.relative) : "differs";
    improved += d.improvement() ? 1 : 0;
    fmt::print(out, "{:<44} {:>16} {:>16} {:>9}{}\n", d.pointer, d.before.substr(0, 16), d.after.substr(0, 16), change,
               d.beyond_tolerance() ? fmt::format("  <- regression beyond {:g}%", 100 * d.tolerance)
               : d.improvement()    ? std::string("  <- improvement")
               : d.note.empty()     ? std::string()
                                    : "  (" + d.note + ")");
  }
  fmt::print(out, "{} fields compared, {} changed, {} regressed and {} improved beyond the {:g}% tolerance\n", c.fields,
             c.differences.size(), beyond, improved, 100 * tolerance);
  return c.within_tolerance() ? 0 : 1;
}

}  // namespace dtsim::cli
