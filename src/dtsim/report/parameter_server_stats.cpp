#include <algorithm>
#include <vector>

#include "dtsim/report/report.hpp"

namespace dtsim::report {

ParameterServerStats parameter_server_stats(const plan::TaskGraph& g, const plan::Timeline& tl, bool synchronous) {
  ParameterServerStats stats;
  stats.shards = g.ps_shards;
  stats.synchronous = synchronous;
  stats.iterations = g.iterations;
  const int shard0 = g.world - g.ps_shards;
  auto at_shard0 = [&](const plan::Task& t) {
    return t.stream == plan::Stream::kServer &&
           g.groups[static_cast<std::size_t>(g.calls[static_cast<std::size_t>(t.payload)].group)].ranks.back() == shard0;
  };
  // Shard 0's version counts the pushes it has applied.
  std::vector<std::int64_t> push_ends;
  std::vector<std::pair<std::int64_t, std::int64_t>> pulls_of;  // (worker * iterations + iteration) -> pull end
  std::vector<std::int64_t> pull_end(static_cast<std::size_t>(shard0 * g.iterations), -1);
  std::vector<std::pair<std::size_t, std::int64_t>> pushes;  // (worker * iterations + iteration, push end)
  for (std::size_t id = 0; id < g.tasks.size(); ++id) {
    const plan::Task& t = g.tasks[id];
    if (!at_shard0(t)) continue;
    const std::size_t slot = static_cast<std::size_t>(t.rank) * static_cast<std::size_t>(g.iterations) + static_cast<std::size_t>(t.tag);
    if (t.phase == plan::Phase::kPull) pull_end[slot] = tl.spans[id].end.count;
    if (t.phase == plan::Phase::kPush) {
      push_ends.push_back(tl.spans[id].end.count);
      pushes.emplace_back(slot, tl.spans[id].end.count);
    }
  }
  std::sort(push_ends.begin(), push_ends.end());
  auto applied_by = [&](std::int64_t time) {  // pushes that ended at or before `time`
    return static_cast<int>(std::upper_bound(push_ends.begin(), push_ends.end(), time) - push_ends.begin());
  };
  double total = 0;
  for (auto [slot, end] : pushes) {
    // Synchronous shards apply one aggregated update per step: never stale.
    int staleness = synchronous ? 0 : std::max(0, applied_by(end) - 1 - applied_by(pull_end[slot]));
    if (static_cast<std::size_t>(staleness) >= stats.staleness_histogram.size()) {
      stats.staleness_histogram.resize(static_cast<std::size_t>(staleness) + 1, 0);
    }
    ++stats.staleness_histogram[static_cast<std::size_t>(staleness)];
    stats.max_staleness = std::max(stats.max_staleness, staleness);
    total += staleness;
  }
  stats.mean_staleness = pushes.empty() ? 0 : total / static_cast<double>(pushes.size());
  return stats;
}

}  // namespace dtsim::report
