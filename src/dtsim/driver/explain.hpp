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

struct Explanation {
  report::CriticalPath critical_path;
  std::vector<Sensitivity> what_if;  ///< largest saving first
  std::string verdict;
};

Explanation explain(const Simulation& today, const SimulationRequest& request);

}  // namespace dtsim::driver
