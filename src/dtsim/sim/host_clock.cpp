#include "dtsim/sim/host_clock.hpp"

#include <algorithm>

namespace dtsim::sim {

using core::Nanoseconds;

namespace {
// Point-to-point and server tasks are not launched in a rank's program order.
bool launched_in_order(const plan::Task& t) {
  return t.stream != plan::Stream::kPointToPoint && t.stream != plan::Stream::kServer;
}
}  // namespace

HostClock::HostClock(const plan::TaskGraph& graph, Nanoseconds host_launch,
                     const std::vector<std::uint32_t>& kernel_launches, const std::vector<int>& sim_of_rank,
                     const std::vector<std::uint32_t>& sim_of_instance)
    : host_launch_(host_launch), sim_of_instance_(sim_of_instance) {
  const std::size_t n = graph.tasks.size(), sims = graph.simulated.size();
  launches_before_.assign(n, 0);
  segment_.assign(n, 0);
  is_sync_.assign(n, 0);
  std::vector<std::uint32_t> issued(sims, 0);
  segment_launches_.assign(sims, {0});
  for (std::uint32_t id = 0; id < n; ++id) {
    const plan::Task& t = graph.tasks[id];
    if (!launched_in_order(t)) continue;
    const auto sim = static_cast<std::size_t>(sim_of_rank[static_cast<std::size_t>(t.rank)]);
    launches_before_[id] = issued[sim];
    segment_[id] = static_cast<std::uint32_t>(segment_launches_[sim].size() - 1);
    const bool compute = t.kind == plan::TaskKind::kCompute;
    issued[sim] += compute ? kernel_launches[static_cast<std::size_t>(t.payload)] : 1;
    if (compute && graph.kernels[static_cast<std::size_t>(t.payload)].host_sync) {
      is_sync_[id] = 1;
      segment_launches_[sim].push_back(issued[sim]);  // the next segment starts after its launches
    }
  }
  segment_start_.assign(sim_of_instance_.size(), {Nanoseconds{0}});
}

std::optional<Nanoseconds> HostClock::launched(std::size_t instance, std::uint32_t id,
                                               std::uint32_t extra_launches) const {
  const std::vector<Nanoseconds>& starts = segment_start_[instance];
  const std::uint32_t k = segment_[id];
  if (k >= starts.size()) return std::nullopt;  // the sync before it has not ended
  const std::uint32_t since = launches_before_[id] + extra_launches - segment_launches_[sim_of_instance_[instance]][k];
  return Nanoseconds{starts[k].count + host_launch_.count * static_cast<std::int64_t>(since)};
}

bool HostClock::ended(std::size_t instance, std::uint32_t id, Nanoseconds now) {
  if (!is_sync_[id]) return false;
  std::vector<Nanoseconds>& starts = segment_start_[instance];
  const std::uint32_t k = segment_[id];
  if (k + 1 != starts.size()) return false;  // a rank's syncs end in its program order
  const std::vector<std::uint32_t>& launches = segment_launches_[sim_of_instance_[instance]];
  // The host has issued everything up to the sync by then, and waits for it.
  const Nanoseconds issued{starts[k].count + host_launch_.count * static_cast<std::int64_t>(launches[k + 1] - launches[k])};
  starts.push_back(std::max(now, issued));
  return true;
}

}  // namespace dtsim::sim
