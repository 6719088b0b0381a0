#include "dtsim/driver/explain.hpp"

#include <algorithm>
#include <map>

#include "dtsim/net/collective.hpp"
#include "dtsim/sim/replay.hpp"

#include <fmt/format.h>

namespace dtsim::driver {
namespace {

std::string plain(const std::string& kind) {
  if (kind == "comm: tp") return "tensor-parallel communication";
  if (kind == "comm: cp") return "context-parallel KV exchange";
  if (kind == "comm: ep") return "expert-parallel all-to-all";
  if (kind == "comm: dp" || kind == "comm: expert-dp") return "data-parallel gradient communication";
  if (kind == "comm: pp") return "pipeline transfers";
  if (kind == "comm: ps") return "parameter-server transfers";
  if (kind == "waiting") return "waiting (pipeline bubble, stragglers, dependencies)";
  if (kind.rfind("compute: ", 0) == 0) return kind.substr(9) + " kernels";
  return kind;
}

// Every collective the simulated ranks ran (with --full, every rank), its
// group's traffic counted once per group and call (all members run it together).
std::vector<LinkLoad> busiest_links(const Simulation& s) {
  net::Network network(s.cluster, {});
  std::map<std::pair<int, std::int64_t>, bool> counted;
  std::map<int, double> bytes_on;
  const auto& g = s.tasks;
  auto add = [&](const plan::Task& t, std::size_t payload) {
    const plan::CommCall& call = g.calls[payload];
    if (!counted.emplace(std::pair{call.group, t.tag * 4096 + static_cast<std::int64_t>(payload)}, true).second) return;
    std::vector<int> gpus;
    for (int r : g.groups[static_cast<std::size_t>(call.group)].ranks) gpus.push_back(g.gpu_of_rank[static_cast<std::size_t>(r)]);
    const net::CollectiveOp op = sim::to_net(call.op);
    for (auto [link, bytes] : network.link_traffic(op, gpus, call.bytes)) bytes_on[link] += bytes.value();
  };
  if (g.spmd_ranks.empty()) {
    for (const plan::Task& t : g.tasks) {
      if (t.kind == plan::TaskKind::kComm) add(t, static_cast<std::size_t>(t.payload));
    }
  } else {
    // Each rank runs its stage's simulated rank's calls on its own groups.
    std::vector<std::vector<const plan::Task*>> comm_of(g.simulated.size());
    for (const plan::Task& t : g.tasks) {
      if (t.kind == plan::TaskKind::kComm) comm_of[static_cast<std::size_t>(g.simulated_index(t.rank))].push_back(&t);
    }
    for (std::size_t k = 0; k < g.spmd_ranks.size(); ++k) {
      const std::uint32_t* calls = g.spmd_calls_of(k);
      for (const plan::Task* t : comm_of[static_cast<std::size_t>(g.spmd_ranks[k].simulated)]) {
        add(*t, calls[static_cast<std::size_t>(t->payload)]);
      }
    }
  }
  std::vector<LinkLoad> loads;
  const double step = core::to_seconds(s.timeline.makespan).value();
  for (auto [link, bytes] : bytes_on) {
    const double rate = s.cluster.links()[static_cast<std::size_t>(link)].bandwidth.value();
    loads.push_back({s.cluster.link_name(link), core::Bytes(bytes), step > 0 ? bytes / (rate * step) : 0});
  }
  std::stable_sort(loads.begin(), loads.end(), [](const LinkLoad& a, const LinkLoad& b) { return a.utilization > b.utilization; });
  if (loads.size() > 5) loads.resize(5);
  return loads;
}

}  // namespace

Explanation explain(const Simulation& today, const SimulationRequest& request) {
  Explanation e;
  e.critical_path = report::critical_path(today.tasks, today.timeline, today.costs.kernel_op_share);
  const core::Seconds step = today.report.step_time;
  e.busiest_links = busiest_links(today);
  struct Knob {
    const char* resource;
    WhatIf what_if;
  };
  const Knob knobs[] = {{"compute", {2, 1, 1, 1, 1}},
                        {"HBM bandwidth", {1, 2, 1, 1, 1}},
                        {"intra-node links", {1, 1, 2, 1, 1}},
                        {"inter-node links", {1, 1, 1, 2, 1}},
                        {"latency", {1, 1, 1, 1, 0.5}}};
  for (const Knob& k : knobs) {
    SimulationRequest changed = request;
    changed.what_if = k.what_if;
    const core::Seconds t =
        predict(today.graph, today.cluster, changed, today.profile ? &*today.profile : nullptr).report.step_time;
    e.what_if.push_back({k.resource, t, 1 - t / step});
  }
  std::stable_sort(e.what_if.begin(), e.what_if.end(), [](const Sensitivity& a, const Sensitivity& b) { return a.saving > b.saving; });

  double path_total = 0;
  for (const auto& s : e.critical_path.shares) path_total += s.time.value();
  const auto& top = e.critical_path.shares.front();
  const auto& best = e.what_if.front();
  e.verdict = fmt::format("Bound by {}: {:.0f}% of the critical path. Making {} twice as good would save {:.0f}% of the "
                          "step ({:.3f} s instead of {:.3f} s){}.",
                          plain(top.kind), 100 * top.time.value() / path_total, best.resource, 100 * best.saving,
                          best.step_time.value(), step.value(),
                          today.report.fits_in_memory ? "" : "; and it does not fit in memory as planned");
  return e;
}

}  // namespace dtsim::driver
