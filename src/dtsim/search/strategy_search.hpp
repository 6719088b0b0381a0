#pragma once
/// Strategy search: every valid combination of dp, tp, pp, vpp, cp, ep, mbs,
/// ZeRO stage, recomputation and schedule for a model, a cluster and a global
/// batch; those whose weights and optimizer state cannot fit are dropped
/// before simulation, the rest simulated on all cores, ranked by throughput,
/// with the Pareto front of throughput against memory marked.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtsim/hw/profile.hpp"
#include "dtsim/model/graph.hpp"
#include "dtsim/report/report.hpp"
#include "dtsim/topo/cluster.hpp"

namespace dtsim::search {

struct SearchOptions {
  int global_batch = 0;
  /// Dimensions fixed to one value ("tp" -> 8) or bounded from above.
  std::map<std::string, int> fixed;
  std::map<std::string, int> at_most;
  int threads = 0;  ///< 0: all cores
  /// A calibration profile, as `simulate --profile` (driver::apply_profile has applied it to the cluster).
  std::shared_ptr<const hw::Profile> profile;
  /// Called after each simulated configuration with (done, total).
  std::function<void(std::size_t, std::size_t)> progress;
  /// When set and true, no further configuration starts: the result ranks
  /// those simulated so far (Ctrl-C in the CLI).
  const std::atomic<bool>* stop = nullptr;
  /// One MPI rank's share: only the configurations worth simulating whose
  /// position i has i % shards == shard are simulated and ranked.
  int shard = 0;
  int shards = 1;
};

struct Candidate {
  std::string strategy;  ///< as `simulate --strategy` takes it
  report::Report report;
  bool pareto = false;   ///< no other candidate is both faster and smaller
  std::size_t order = 0; ///< position among those worth simulating: equal ranks keep it
};

struct SearchResult {
  std::size_t enumerated = 0;        ///< valid combinations
  std::size_t pruned_by_memory = 0;  ///< dropped before simulation
  std::size_t simulated = 0;         ///< of those that were worth simulating (all, unless stopped)
  bool stopped = false;              ///< SearchOptions::stop ended it early
  std::vector<Candidate> ranked;     ///< those that fit, fastest first
};

/// The strategy strings of every valid combination (checked as `resolve` would).
std::vector<std::string> enumerate(const model::Graph& graph, const topo::Cluster& cluster, const SearchOptions& options);

SearchResult run_search(const model::Graph& graph, const topo::Cluster& cluster, const SearchOptions& options);

}  // namespace dtsim::search
