#pragma once
/// One prediction end to end: load the model and cluster, parse and resolve
/// the strategy, lower to a TaskGraph, replay, analyze. The CLI, the tests
/// and the benchmarks all go through here.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtsim/hw/profile.hpp"
#include "dtsim/model/graph.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/plan/task_graph.hpp"
#include "dtsim/plan/timeline.hpp"
#include "dtsim/report/report.hpp"
#include "dtsim/sim/replay.hpp"
#include "dtsim/topo/cluster.hpp"

namespace dtsim::driver {

/// Where bundled inputs live: $DTSIM_DATA_DIR if set, else the source tree
/// the binary was built from.
std::filesystem::path data_dir();

/// A name of a bundled file ("llama2-7b") or a path. Throws InputError naming
/// the flag and the bundled choices when neither exists.
std::filesystem::path resolve_input(const std::string& name_or_path, const std::string& folder, const std::string& flag);

/// Names of the bundled files in data_dir()/folder, without ".json".
std::vector<std::string> bundled(const std::string& folder);

/// Multipliers for what-if studies (2 = twice as fast; latency 0.5 = half).
struct WhatIf {
  double compute = 1.0;          ///< peak FLOP/s
  double hbm = 1.0;              ///< HBM bandwidth
  double intra_node = 1.0;       ///< NVLink / PCIe bandwidth inside nodes
  double inter_node = 1.0;       ///< network bandwidth between nodes
  double latency = 1.0;          ///< link latencies and kernel launch overheads
};

struct SimulationRequest {
  std::string model;
  std::string cluster;
  std::string strategy;
  std::optional<int> nodes;
  std::optional<std::int64_t> seq_len;
  std::optional<std::string> profile;
  bool full = false;
  /// Relative speed of each GPU used (1 = nominal); implies simulating every rank.
  std::vector<double> worker_speed;
  WhatIf what_if;
  /// kFlow shares links among concurrent collectives by max-min fairness
  /// (the ranks not simulated put their copies' traffic on the links too).
  sim::NetworkMode network = sim::NetworkMode::kAnalytic;
  /// Memory the plan may take; unset: what the kernel says is available
  /// (MemAvailable). A plan that would need more is refused before it is built.
  std::optional<core::Bytes> memory_budget = std::nullopt;
  /// With `full`: lower every rank's tasks, for a trace or report that shows
  /// them all. Otherwise the graph holds one rank's tasks per stage and the
  /// replay runs every rank from them (the same prediction in a fraction of
  /// the memory).
  bool every_rank_tasks = false;
  /// Predict the step as dtsim's own executor runs it (dtsim run and
  /// validate): its GEMMs' layout (hw::GemmLayout::kExecutor) instead of
  /// PyTorch's, which every framework dtsim models runs.
  bool own_executor = false;
};

struct Simulation {
  model::Graph graph;
  topo::Cluster cluster;
  plan::ResolvedStrategy strategy;
  plan::TaskGraph tasks;
  plan::Timeline timeline;
  report::Report report;
  sim::TaskCosts costs;
  std::optional<hw::Profile> profile;  ///< the request's, loaded once
};

Simulation simulate(const SimulationRequest& request);

/// The device name of the request's cluster ("CPU", "H100-SXM", ...).
std::string cluster_device(const SimulationRequest& request);

/// The number of ranks the request's strategy uses (no simulation, no profile needed).
int resolve_world(const SimulationRequest& request);

/// Loads a calibration profile and checks that it measured the cluster's device.
hw::Profile load_checked_profile(const std::string& path, const topo::Cluster& cluster);

/// The profile's measured collectives, keyed as net::NetworkOptions::measured wants them.
std::map<std::pair<net::CollectiveOp, int>, net::CalibratedCollective> measured_collectives(const hw::Profile& profile);

/// The same on a model and cluster already loaded (a search runs many
/// strategies on one pair); `strategy` and the options come from `request`.
struct Prediction {
  plan::ResolvedStrategy strategy;
  plan::TaskGraph tasks;
  plan::Timeline timeline;
  report::Report report;
  sim::TaskCosts costs;
};
Prediction predict(const model::Graph& graph, const topo::Cluster& cluster, const SimulationRequest& request);
/// The same with the profile already loaded (request.profile is not read); null for none.
Prediction predict(const model::Graph& graph, const topo::Cluster& cluster, const SimulationRequest& request,
                   const hw::Profile* profile);

/// Loads the profile at `path`, if any, and makes the cluster's device what it
/// measured. Without one, a device that only a profile describes (the CPU) is
/// an InputError naming --profile.
std::optional<hw::Profile> apply_profile(topo::Cluster& cluster, const std::optional<std::string>& path);

}  // namespace dtsim::driver
