#include <fstream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/report/writers.hpp"

namespace dtsim::cli {

void add_simulate(CLI::App& app, SimulateOptions& o) {
  CLI::App* cmd = app.add_subcommand("simulate", "predict one training step");
  cmd->add_option("--model,-m", o.model, "workload: a bundled name (dtsim list) or a path; HF config.json works too")
      ->capture_default_str();
  cmd->add_option("--cluster,-c", o.cluster, "cluster: a bundled name or a path")->capture_default_str();
  cmd->add_option("--strategy,-s", o.strategy, "preset and/or key=value,... (dp, tp, pp, gpus, mbs, gbs, dtype, overlap, zero, bucket)")
      ->capture_default_str();
  cmd->add_option("--nodes", o.nodes, "override the cluster file's node count");
  cmd->add_option("--seq-len", o.seq_len, "override the model's sequence length");
  cmd->add_option("--profile", o.profile, "calibration profile (dtsim.profile/1)");
  cmd->add_option("--trace", o.trace, "write a Chrome trace-event file (open it in Perfetto)");
  cmd->add_option("--worker-speed", o.worker_speed, "relative speed of each GPU used, e.g. 1,1,1,0.5 (a straggler)")
      ->delimiter(',');
  cmd->add_flag("--json", o.json, "print the report as JSON (schema dtsim.report/1)");
  cmd->add_flag("--full", o.full, "simulate every rank instead of one per pipeline stage");
}

int run_simulate(const SimulateOptions& o, std::ostream& out) {
  driver::SimulationRequest request{o.model, o.cluster, o.strategy, o.nodes, o.seq_len, o.profile, o.full, o.worker_speed};
  driver::Simulation sim = driver::simulate(request);
  if (o.trace) {
    std::ofstream file(*o.trace);
    if (!file) throw core::InputError("--trace", "", fmt::format("cannot write \"{}\"", *o.trace));
    file << report::chrome_trace(sim.tasks, sim.timeline).dump();
  }
  if (o.json) {
    out << report::to_json(sim.report).dump(2) << "\n";
  } else {
    report::write_table(out, sim.report);
    if (o.trace) out << fmt::format("\n  trace written to {} (open in https://ui.perfetto.dev)\n", *o.trace);
  }
  return 0;
}

}  // namespace dtsim::cli
