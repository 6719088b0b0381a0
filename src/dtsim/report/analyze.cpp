#include "dtsim/report/report.hpp"

#include <algorithm>
#include <array>
#include <map>

#include <fmt/format.h>

namespace dtsim::report {
namespace {

using core::Nanoseconds;
using core::Seconds;

// Interval layers of one rank: compute, and each communication kind.
enum Layer { kCompute = 0, kTp = 1, kEp = 2, kCp = 3, kPp = 4, kDp = 5, kLayers = 6 };

Layer layer_of(const plan::TaskGraph& g, const plan::Task& t) {
  if (t.kind == plan::TaskKind::kCompute) return kCompute;
  switch (g.groups[static_cast<std::size_t>(g.calls[static_cast<std::size_t>(t.payload)].group)].kind) {
    case plan::GroupKind::kTp: return kTp;
    case plan::GroupKind::kEp:
    case plan::GroupKind::kExpertTp: return kEp;  // both move the routed tokens of the MoE dispatcher
    case plan::GroupKind::kCp: return kCp;
    case plan::GroupKind::kPp: return kPp;
    default: return kDp;
  }
}

// Sweeps a rank's task intervals: time covered by compute, and the time each
// communication kind runs while no compute does (tp, ep, cp, pp, dp in that
// order when several overlap: the earlier ones block the next kernel outright).
Breakdown sweep(const plan::TaskGraph& g, const plan::Timeline& tl, int rank, const std::vector<std::uint32_t>& ids,
                Nanoseconds step) {
  // Edges (time, +/-(layer+1)) in time order. A stream runs its tasks one
  // after another, so each stream's edges come nearly sorted: sorting each
  // (a no-op check for most) and merging them is the full sort's order at a
  // fraction of its cost (a strategy search spent a tenth of its time here).
  using Edge = std::pair<std::int64_t, int>;
  std::array<std::vector<Edge>, plan::kStreamCount> by_stream;
  for (std::uint32_t id : ids) {
    const plan::Task& t = g.tasks[id];
    const int layer = layer_of(g, t) + 1;
    auto& list = by_stream[static_cast<std::size_t>(t.stream)];
    list.emplace_back(tl.spans[id].start.count, layer);
    list.emplace_back(tl.spans[id].end.count, -layer);
  }
  std::vector<Edge> edges;
  edges.reserve(2 * ids.size());
  for (auto& list : by_stream) {
    if (!std::is_sorted(list.begin(), list.end())) std::sort(list.begin(), list.end());
    const auto middle = static_cast<std::ptrdiff_t>(edges.size());
    edges.insert(edges.end(), list.begin(), list.end());
    std::inplace_merge(edges.begin(), edges.begin() + middle, edges.end());
  }
  std::array<int, kLayers> active{};
  std::array<std::int64_t, kLayers> covered{};
  std::int64_t previous = 0;
  for (auto [time, delta] : edges) {
    std::int64_t span = time - previous;
    if (span > 0) {
      for (int l = 0; l < kLayers; ++l) {
        if (active[static_cast<std::size_t>(l)] > 0) {
          covered[static_cast<std::size_t>(l)] += span;
          break;
        }
      }
    }
    previous = time;
    active[static_cast<std::size_t>(std::abs(delta) - 1)] += delta > 0 ? 1 : -1;
  }
  Breakdown b;
  b.rank = rank;
  b.compute = core::to_seconds({covered[kCompute]});
  b.exposed_comm.tp = core::to_seconds({covered[kTp]});
  b.exposed_comm.cp = core::to_seconds({covered[kCp]});
  b.exposed_comm.ep = core::to_seconds({covered[kEp]});
  b.exposed_comm.pp = core::to_seconds({covered[kPp]});
  b.exposed_comm.dp = core::to_seconds({covered[kDp]});
  // Sums of rounded spans can leave a few ulps below zero.
  b.bubble = std::max(Seconds(0), core::to_seconds(step) - b.compute - b.exposed_comm.total());
  return b;
}

// A breakdown of `steps` steps as the mean step's.
Breakdown mean_step(Breakdown b, int steps) {
  if (steps <= 1) return b;
  const double per = 1.0 / steps;
  b.compute = b.compute * per;
  b.compute_slowed = b.compute_slowed * per;
  for (core::Seconds* exposed : {&b.exposed_comm.tp, &b.exposed_comm.cp, &b.exposed_comm.ep, &b.exposed_comm.dp,
                                 &b.exposed_comm.pp}) {
    *exposed = *exposed * per;
  }
  b.bubble = b.bubble * per;
  b.host_wait = b.host_wait * per;
  return b;
}

std::vector<Bottleneck> rank_bottlenecks(const Report& r) {
  const Seconds step = r.step_time;
  std::vector<Bottleneck> out;
  auto add = [&](std::string kind, Seconds t, std::string what) {
    double f = t / step;
    // A share that prints as 0.0% is no bottleneck: it is what is left of
    // sums of rounded spans, and its sign follows the compiler's rounding.
    if (t.value() <= 0 || f < 0.0005) return;
    out.push_back({std::move(kind), t, f, fmt::format("{}: {:.1f}% of the step", what, 100 * f)});
  };
  add("compute", r.breakdown.compute, "compute kernels");
  add("exposed_comm.tp", r.breakdown.exposed_comm.tp, "tensor-parallel communication not hidden by compute");
  add("exposed_comm.cp", r.breakdown.exposed_comm.cp, "context-parallel KV exchange not hidden by attention");
  add("exposed_comm.ep", r.breakdown.exposed_comm.ep, "expert-parallel all-to-all");
  add("exposed_comm.dp", r.breakdown.exposed_comm.dp, "data-parallel gradient communication not hidden by compute");
  add("exposed_comm.pp", r.breakdown.exposed_comm.pp, "pipeline transfers not hidden by compute");
  add("host_wait", r.breakdown.host_wait, "waiting for the host to launch kernels (kernels shorter than their launches)");
  add("bubble", r.breakdown.bubble - r.breakdown.host_wait, "idle time (pipeline bubble and waiting)");
  std::stable_sort(out.begin(), out.end(), [](const Bottleneck& a, const Bottleneck& b) { return a.time > b.time; });
  if (!r.fits_in_memory) {
    out.insert(out.begin(), {"memory", Seconds(0), 0,
                             fmt::format("memory: peak {:.1f} GiB exceeds the {:.1f} GiB of {}", r.peak_bytes.value() / 1073741824.0,
                                         r.info.memory_capacity.value() / 1073741824.0, r.info.device)});
  }
  return out;
}

}  // namespace

Report analyze(const plan::TaskGraph& g, const plan::Timeline& tl, const RunInfo& info, int micro_batches) {
  Report r;
  r.info = info;
  const int gpus = g.world - g.ps_shards;  // parameter-server shards run on host CPUs
  r.gpus = gpus;
  r.micro_batches = micro_batches;
  r.events = tl.events;
  // Parameter-server runs simulate several steps; report the mean step.
  r.step_time = core::to_seconds(tl.makespan) / static_cast<double>(g.iterations);
  if (info.asynchronous) {
    // Each worker processes global_batch / workers samples per step at its own pace.
    std::vector<std::int64_t> finish(static_cast<std::size_t>(g.world), 0);
    for (std::size_t id = 0; id < g.tasks.size(); ++id) {
      auto& f = finish[static_cast<std::size_t>(g.tasks[id].rank)];
      f = std::max(f, tl.spans[id].end.count);
    }
    const double per_worker = static_cast<double>(info.global_batch) * g.iterations / gpus;
    double rate = 0;
    for (int w = 0; w < gpus; ++w) rate += per_worker / core::to_seconds({finish[static_cast<std::size_t>(w)]}).value();
    r.step_time = core::Seconds(info.global_batch / rate);
  }
  const double step_s = r.step_time.value();
  r.samples_per_s = step_s > 0 ? info.global_batch / step_s : 0;
  r.tokens_per_s = r.samples_per_s * static_cast<double>(info.seq_len);

  // Each simulated rank stands for world / simulated ranks of its class.
  const double replicas = static_cast<double>(gpus) / static_cast<double>(g.simulated.size()) / g.iterations;
  for (const plan::Task& t : g.tasks) {
    if (t.kind != plan::TaskKind::kCompute) continue;
    const plan::Kernel& k = g.kernels[static_cast<std::size_t>(t.payload)];
    r.model_flops_per_step += k.model_flops * replicas;
    r.hardware_flops_per_step += k.hardware_flops * replicas;
  }
  const double denominator = step_s * gpus;
  if (denominator > 0) {
    r.model_tflops_per_gpu = r.model_flops_per_step.value() / denominator / 1e12;
    r.hardware_tflops_per_gpu = r.hardware_flops_per_step.value() / denominator / 1e12;
    r.mfu = r.model_tflops_per_gpu * 1e12 / info.peak_per_gpu.value();
    r.hfu = r.hardware_tflops_per_gpu * 1e12 / info.peak_per_gpu.value();
  }

  std::map<int, StageMemory> stages;
  for (std::size_t i = 0; i < g.simulated.size(); ++i) {
    const plan::RankInfo& rank = g.simulated[i];
    StageMemory m{rank.stage, rank.memory.params, rank.memory.grads, rank.memory.optimizer,
                  tl.peak_memory[i] - rank.memory.total(), rank.memory.other, tl.peak_memory[i]};
    auto [it, inserted] = stages.emplace(rank.stage, m);
    if (!inserted && m.peak > it->second.peak) it->second = m;
    r.peak_bytes = std::max(r.peak_bytes, m.peak);
  }
  for (auto& [stage, m] : stages) r.per_stage.push_back(m);
  r.fits_in_memory = r.peak_bytes <= info.memory_capacity;

  std::map<int, std::vector<std::uint32_t>> tasks_of_rank;
  for (std::uint32_t id = 0; id < g.tasks.size(); ++id) tasks_of_rank[g.tasks[id].rank].push_back(id);
  bool first = true;
  for (std::size_t i = 0; i < g.simulated.size(); ++i) {
    const plan::RankInfo& rank = g.simulated[i];
    Breakdown b = sweep(g, tl, rank.rank, tasks_of_rank[rank.rank], tl.makespan);
    if (i < tl.contention_delay.size()) b.compute_slowed = core::to_seconds(tl.contention_delay[i]);
    // The compute stream may wait for the host while communication keeps the GPU busy: only idle time counts.
    // A task of several kernels that waited for its later launches was idle that long inside its span.
    if (i < tl.host_wait.size()) {
      const core::Seconds stretch = std::min(core::to_seconds(tl.host_stretch[i]), b.compute);
      b.host_wait = std::min(core::to_seconds(tl.host_wait[i]), b.bubble) + stretch;
      b.compute -= stretch;
      b.bubble += stretch;
    }
    // The sweep covers the whole makespan: a parameter-server run's several
    // steps. Report the mean step's, as step_time is.
    b = mean_step(b, g.iterations);
    if (first || b.compute > r.breakdown.compute) r.breakdown = b;
    first = false;
  }
  r.bottlenecks = rank_bottlenecks(r);
  return r;
}

}  // namespace dtsim::report
