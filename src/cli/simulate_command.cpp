#include <fstream>
#include <optional>

#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/explain.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/core/json_reader.hpp"
#include "dtsim/plan/launch_config.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/report/html_writer.hpp"
#include "dtsim/report/writers.hpp"

namespace dtsim::cli {

void add_simulate(CLI::App& app, SimulateOptions& o) {
  CLI::App* cmd = app.add_subcommand("simulate", "predict one training step");
  // Required: a prediction for a model, cluster or strategy the user did not name answers another question.
  cmd->add_option("--model,-m", o.model, "workload: a bundled name (dtsim list) or a path; HF config.json works too")
      ->required();
  cmd->add_option("--cluster,-c", o.cluster, "cluster: a bundled name or a path")->required();
  cmd->add_option("--strategy,-s", o.strategy,
                  "preset and/or key=value,...; with a launch config, keys that override it. Keys: " +
                      std::string(plan::strategy_keys()));
  cmd->add_option("--megatron-args", o.megatron_args,
                  "the strategy from Megatron-LM's arguments (\"--tensor-model-parallel-size 8 ...\", or @file)");
  cmd->add_option("--deepspeed-config", o.deepspeed_config, "the strategy from a DeepSpeed config (ds_config.json)");
  cmd->add_option("--nodes", o.nodes, "override the cluster file's node count");
  cmd->add_option("--seq-len", o.seq_len, "override the model's sequence length");
  cmd->add_option("--profile", o.profile, "calibration profile (dtsim.profile/1)");
  cmd->add_option("--trace", o.trace, "write a Chrome trace-event file (open it in Perfetto)");
  cmd->add_option("--worker-speed", o.worker_speed, "relative speed of each GPU used, e.g. 1,1,1,0.5 (a straggler)")
      ->delimiter(',');
  cmd->add_option("--report", o.html, "write a self-contained HTML report (timeline, memory, breakdown)");
  cmd->add_flag("--json", o.json, "print the report as JSON (schema dtsim.report/1)");
  cmd->add_flag("--full", o.full, "simulate every rank instead of one per pipeline stage");
  cmd->add_option("--network", o.network,
                  "analytic (each collective costed alone) or flow (concurrent collectives share links "
                  "max-min fairly; simulates every rank)")
      ->capture_default_str();
  cmd->add_flag("--explain", o.explain, "add the critical path, what-if sensitivities and a verdict (5 more simulations)");
}

namespace {

// The strategy of a launch config, with --strategy's keys over it; what was
// mapped and what was not goes to stderr, so that nothing is dropped unseen.
std::string launch_strategy(const SimulateOptions& o, std::optional<std::int64_t>& seq_len) {
  if (o.megatron_args && o.deepspeed_config) {
    throw core::InputError("--deepspeed-config", "", "expected one launch config, got --megatron-args as well");
  }
  if (!o.megatron_args && !o.deepspeed_config) {
    if (o.strategy.empty()) throw core::InputError("--strategy", "", "expected a strategy (or --megatron-args, --deepspeed-config)");
    return o.strategy;
  }
  if (!o.strategy.empty() && o.strategy.substr(0, o.strategy.find(',')).find('=') == std::string::npos) {
    throw core::InputError("--strategy", "", "a launch config sets the strategy; --strategy may only override keys, not name a preset");
  }
  plan::LaunchStrategy launch;
  std::string option;
  if (o.megatron_args) {
    option = "--megatron-args";
    std::string text = *o.megatron_args, source = option;
    if (!text.empty() && text.front() == '@') {
      source = text.substr(1);
      std::ifstream in(source);
      if (!in) throw core::InputError(source, "", "cannot read the Megatron-LM arguments");
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    launch = plan::from_megatron_args(text, source);
  } else {
    option = "--deepspeed-config";
    launch = plan::from_deepspeed_config(core::load_json_file(*o.deepspeed_config), *o.deepspeed_config);
  }
  if (launch.seq_len && !seq_len) seq_len = launch.seq_len;
  auto join = [](const std::vector<std::string>& items) {
    std::string s;
    for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
    return s;
  };
  fmt::print(stderr, "dtsim: {} maps to {}\n", option, launch.strategy);
  if (!launch.not_modelled.empty()) fmt::print(stderr, "dtsim: {}: not modelled: {}\n", option, join(launch.not_modelled));
  if (!launch.ignored.empty()) fmt::print(stderr, "dtsim: {}: no effect on a step: {}\n", option, join(launch.ignored));
  return plan::merge_strategies(launch.strategy, o.strategy);
}

}  // namespace

int run_simulate(const SimulateOptions& o, std::ostream& out) {
  if (o.network != "analytic" && o.network != "flow") {
    throw core::InputError("--network", "", fmt::format("expected analytic or flow, got \"{}\"", o.network));
  }
  std::optional<std::int64_t> seq_len = o.seq_len;
  const std::string strategy = launch_strategy(o, seq_len);
  driver::SimulationRequest request{o.model, o.cluster, strategy, o.nodes, seq_len, o.profile, o.full, o.worker_speed, {}};
  request.network = o.network == "flow" ? sim::NetworkMode::kFlow : sim::NetworkMode::kAnalytic;
  // A trace or report of --full shows every rank, so it needs their tasks.
  request.every_rank_tasks = o.trace.has_value() || o.html.has_value();
  driver::Simulation sim = driver::simulate(request);
  if (o.trace) {
    std::ofstream file(*o.trace);
    if (!file) throw core::InputError("--trace", "", fmt::format("cannot write \"{}\"", *o.trace));
    file << report::chrome_trace(sim.tasks, sim.timeline).dump();
  }
  std::optional<driver::Explanation> why;
  if (o.explain) why = driver::explain(sim, request);
  if (o.html) {
    std::ofstream file(*o.html);
    if (!file) throw core::InputError("--report", "", fmt::format("cannot write \"{}\"", *o.html));
    file << report::html_report(sim.report, sim.tasks, sim.timeline, why ? why->verdict : std::string());
  }
  if (o.json) {
    nlohmann::json j = report::to_json(sim.report);
    if (why) {
      nlohmann::json path = nlohmann::json::array(), what_if = nlohmann::json::array();
      for (const auto& s : why->critical_path.shares) path.push_back({{"kind", s.kind}, {"time_s", s.time.value()}});
      for (const auto& s : why->what_if) {
        what_if.push_back({{"resource", s.resource}, {"step_time_s", s.step_time.value()}, {"saving", s.saving}});
      }
      nlohmann::json links = nlohmann::json::array();
      for (const auto& l : why->busiest_links) {
        links.push_back({{"link", l.link}, {"bytes", l.bytes.value()}, {"utilization", l.utilization}});
      }
      j["explain"] = {{"critical_path", path}, {"what_if_2x", what_if}, {"busiest_links", links}, {"verdict", why->verdict}};
    }
    out << j.dump(2) << "\n";
  } else {
    report::write_table(out, sim.report);
    if (why) {
      double total = 0;
      for (const auto& s : why->critical_path.shares) total += s.time.value();
      fmt::print(out, "\n  critical path ({} tasks)\n", why->critical_path.tasks);
      for (const auto& s : why->critical_path.shares) {
        fmt::print(out, "    {:<26} {:>10.4f} s  {:5.1f}%\n", s.kind, s.time.value(), 100 * s.time.value() / total);
      }
      fmt::print(out, "\n  what if one resource were twice as good (re-simulated)\n");
      for (const auto& s : why->what_if) {
        fmt::print(out, "    {:<26} step {:>9.4f} s  saves {:5.1f}%\n", s.resource, s.step_time.value(), 100 * s.saving);
      }
      fmt::print(out, "\n  busiest links (traffic of the simulated ranks' groups over the step)\n");
      for (const auto& l : why->busiest_links) {
        fmt::print(out, "    {:<40} {:>10.2f} GB  {:5.1f}% busy\n", l.link, l.bytes.value() / 1e9, 100 * l.utilization);
      }
      fmt::print(out, "\n  verdict: {}\n", why->verdict);
    }
    if (o.trace) out << fmt::format("\n  trace written to {} (open in https://ui.perfetto.dev)\n", *o.trace);
  }
  return 0;
}

}  // namespace dtsim::cli
