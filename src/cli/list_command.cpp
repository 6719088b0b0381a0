#include <fmt/format.h>
#include <fmt/ostream.h>

#include "cli/commands.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/topo/cluster_loader.hpp"

namespace dtsim::cli {

void add_list(CLI::App& app) { app.add_subcommand("list", "show the bundled models, clusters, devices and presets"); }

int run_list(std::ostream& out) {
  hw::DeviceCatalog catalog;
  fmt::print(out, "models (workloads/)\n");
  for (const std::string& name : driver::bundled("workloads")) {
    model::Graph g = model::load_workload(driver::data_dir() / "workloads" / (name + ".json"));
    fmt::print(out, "  {:<16} {:>9.2f} B params  {}\n", name, g.parameter_count() / 1e9,
               g.seq_len > 0 ? fmt::format("seq_len {}", g.seq_len) : std::string("per-sample"));
  }
  fmt::print(out, "\nclusters (topologies/)\n");
  for (const std::string& name : driver::bundled("topologies")) {
    topo::Cluster c = topo::load_cluster(driver::data_dir() / "topologies" / (name + ".json"), catalog);
    // The CPU backend runs one rank per core: its "GPUs" are cores.
    const bool cpu = c.device().needs_profile;
    fmt::print(out, "  {:<20} {:>4} node{} x {:>2} {:<5} = {:>5} {}\n", name, c.nodes(), c.nodes() == 1 ? " " : "s",
               c.gpus_per_node(), cpu ? "cores" : "GPUs", c.gpu_count(), cpu ? "CPU ranks" : c.device().name);
  }
  fmt::print(out, "\ndevices\n");
  for (const hw::Device& d : catalog.devices()) {
    // Which cost model its kernels get without a calibration profile.
    const std::string kernels = d.needs_profile                             ? "needs a calibration profile"
                                : catalog.with_kernel_figures(d).kernel_figures ? "kernel model (devices/" + d.name + ".json)"
                                                                            : "roofline";
    if (d.needs_profile) {  // no datasheet: every figure comes from dtsim-calibrate
      fmt::print(out, "  {:<16} {:<54} {}\n", d.name, "(rates, memory and bandwidth measured by dtsim-calibrate)", kernels);
      continue;
    }
    // The 16-bit rate it trains at: bf16, or fp16 where it has no bf16 (V100).
    const hw::Dtype half = d.peak_for(hw::Dtype::kBf16).value() > 0 ? hw::Dtype::kBf16 : hw::Dtype::kFp16;
    fmt::print(out, "  {:<16} {:>7.1f} TFLOP/s {:<4}  {:>6.1f} GiB  {:>6.0f} GB/s HBM  {}\n", d.name,
               d.peak_for(half).value() / 1e12, hw::to_string(half), d.hbm_capacity.value() / 1073741824.0,
               d.hbm_bandwidth.value() / 1e9, kernels);
  }
  fmt::print(out, "\nhosts (devices/hosts.json: what an eager step's CPU spends per kernel it launches)\n");
  for (const hw::Host& h : catalog.hosts()) fmt::print(out, "  {:<16} {:>7.1f} us a kernel\n", h.name, h.kernel_launch.value() * 1e6);
  fmt::print(out, "\nstrategy presets (--strategy NAME[,key=value...]; keys: {})\n", plan::strategy_keys());
  for (const plan::Preset& p : plan::presets()) fmt::print(out, "  {:<22} {:<26} {}\n", p.name, p.expansion, p.description);
  return 0;
}

}  // namespace dtsim::cli
