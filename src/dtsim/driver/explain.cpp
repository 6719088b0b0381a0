#include "dtsim/driver/explain.hpp"

#include <algorithm>

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
  return kind;
}

}  // namespace

Explanation explain(const Simulation& today, const SimulationRequest& request) {
  Explanation e;
  e.critical_path = report::critical_path(today.tasks, today.timeline);
  const core::Seconds step = today.report.step_time;
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
    const core::Seconds t = predict(today.graph, today.cluster, changed).report.step_time;
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
