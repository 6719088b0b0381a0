#pragma once
/// `simulate --explain`: the critical path, what-if sensitivities (each a real
/// re-simulation with one resource twice as good), and a plain-language verdict.
#include <string>
#include <vector>

#include "dtsim/driver/simulation.hpp"
#include "dtsim/report/critical_path.hpp"

namespace dtsim::driver {

struct Sensitivity {
  std::string resource;  ///< "compute", "HBM bandwidth", "intra-node links", "inter-node links", "latency"
  core::Seconds step_time;
  double saving = 0;     ///< fraction of today's step time saved
};

struct LinkLoad {
  std::string link;       ///< "node0.nic0 -> leaf0"
  core::Bytes bytes;      ///< carried over the step
  double utilization = 0; ///< bytes / (rate x step time)
};

struct Explanation {
  report::CriticalPath critical_path;
  std::vector<LinkLoad> busiest_links;  ///< the five busiest, by utilization
  std::vector<Sensitivity> what_if;  ///< largest saving first
  std::string verdict;
};

Explanation explain(const Simulation& today, const SimulationRequest& request);

}  // namespace dtsim::driver
