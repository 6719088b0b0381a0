#include "dtsim/search/strategy_search.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/plan/lower.hpp"
#include "dtsim/plan/memory.hpp"
#include "dtsim/plan/strategy.hpp"

namespace dtsim::search {
namespace {

std::vector<int> values(const SearchOptions& o, const std::string& key, std::vector<int> choices) {
  if (auto it = o.fixed.find(key); it != o.fixed.end()) return {it->second};
  if (auto it = o.at_most.find(key); it != o.at_most.end()) {
    std::erase_if(choices, [&](int v) { return v > it->second; });
  }
  return choices;
}

std::vector<int> powers_of_two_up_to(int limit) {
  std::vector<int> out;
  for (int v = 1; v <= limit; v *= 2) out.push_back(v);
  return out;
}

std::vector<int> divisors_up_to(std::int64_t of, int limit) {
  std::vector<int> out;
  for (int v = 1; v <= limit; ++v) {
    if (of % v == 0) out.push_back(v);
  }
  return out;
}

// Weights, gradients and optimizer state of the heaviest stage: when they
// alone exceed the device, no schedule or recomputation can save the config.
bool static_memory_fits(const model::Graph& g, const topo::Cluster& c, const plan::ResolvedStrategy& r) {
  const auto stages = plan::stage_layers(g, r.s);
  core::Bytes heaviest;
  for (int p = 0; p < r.s.pp; ++p) {
    double dense = 0, experts = 0;
    for (int chunk = 0; chunk < r.s.vpp; ++chunk) {
      for (int layer : stages[static_cast<std::size_t>(chunk * r.s.pp + p)]) {
        for (const model::Op& op : g.layers[static_cast<std::size_t>(layer)].ops) {
          (op.expert ? experts : dense) += plan::params_on_rank(op, r.s);
        }
      }
    }
    heaviest = std::max(heaviest, plan::static_memory(dense, experts, r).total());
  }
  return heaviest <= c.device().hbm_capacity;
}

}  // namespace

// The (ep, etp) pairs a stage of tp*cp*dp ranks admits. Experts split over
// the tp ranks as the attention is (etp = tp; ep carved out of dp, as
// Megatron-Core does), or for MoE with tp > 1 whole (Megatron-Core
// --expert-tensor-parallel-size 1) on an ep group spanning the tp ranks.
std::vector<std::pair<int, int>> expert_layouts(const SearchOptions& o, const model::TransformerShape& t, int tp,
                                                int cp, int dp) {
  std::vector<std::pair<int, int>> out;
  const bool moe = t.experts > 0;
  for (int ep : values(o, "ep", moe ? powers_of_two_up_to(static_cast<int>(t.experts)) : std::vector<int>{1})) {
    for (int etp : values(o, "etp", moe && tp > 1 ? std::vector<int>{tp, 1} : std::vector<int>{tp})) {
      const bool fits = etp == tp ? dp % ep == 0 : (tp * cp * dp) % (etp * ep) == 0 && t.ffn_hidden % etp == 0;
      if (fits) out.emplace_back(ep, etp);
    }
  }
  return out;
}

std::vector<std::string> enumerate(const model::Graph& graph, const topo::Cluster& cluster, const SearchOptions& o) {
  if (!graph.transformer) throw core::InputError("--model", "", "strategy search needs a transformer model");
  const auto& t = *graph.transformer;
  const int gpus = cluster.gpu_count();
  // Selective recomputation drops the attention scores, which fused attention
  // (the default) never keeps: under it, selective equals none.
  const std::vector<std::string> recomputes{"none", "full"};
  std::vector<std::string> out;
  for (int tp : values(o, "tp", powers_of_two_up_to(std::min(cluster.gpus_per_node(), static_cast<int>(t.heads))))) {
    for (int pp : values(o, "pp", divisors_up_to(t.layers, gpus / tp))) {
      for (int cp : values(o, "cp", graph.seq_len >= 8192 ? std::vector<int>{1, 2, 4} : std::vector<int>{1})) {
        const int model_parallel = tp * pp * cp;
        if (gpus % model_parallel != 0) continue;
        const int dp = gpus / model_parallel;
        if (o.fixed.count("dp") && o.fixed.at("dp") != dp) continue;
        for (const auto& [ep, etp] : expert_layouts(o, t, tp, cp, dp)) {
          const bool grid = etp != tp;
          for (int mbs : values(o, "mbs", {1, 2, 4, 8})) {
            if (o.global_batch % (dp * mbs) != 0) continue;
            const int m = o.global_batch / (dp * mbs);
            for (int vpp : values(o, "vpp", pp > 1 ? std::vector<int>{1, 2, 4} : std::vector<int>{1})) {
              if (t.layers % (pp * vpp) != 0 || (vpp > 1 && m % pp != 0)) continue;
              // GPipe only differs from 1F1B without interleaving (it holds every micro-batch).
              std::vector<std::string> schedules{vpp > 1 ? "interleaved" : "1f1b"};
              if (pp > 1 && vpp == 1) schedules.push_back("gpipe");
              for (const std::string& schedule : schedules) {
                const int sharded_over = (grid ? dp : dp / ep) * cp;
                for (int zero : values(o, "zero", sharded_over > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0})) {
                  if (zero > 0 && dp * cp == 1) continue;  // nothing to shard over, even when zero is fixed
                  for (const std::string& recompute : recomputes) {
                    out.push_back(fmt::format("dp={},tp={},pp={},cp={},ep={},mbs={},gbs={},schedule={},vpp={},zero={},"
                                              "recompute={}{}{}",
                                              dp, tp, pp, cp, ep, mbs, o.global_batch, schedule, vpp, zero, recompute,
                                              tp > 1 ? ",sp=on" : "", grid ? fmt::format(",etp={}", etp) : ""));
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

SearchResult run_search(const model::Graph& graph, const topo::Cluster& cluster, const SearchOptions& o) {
  SearchResult result;
  std::vector<std::string> all = enumerate(graph, cluster, o);
  result.enumerated = all.size();
  std::vector<std::string> worth;
  for (const std::string& s : all) {
    plan::ResolvedStrategy r = plan::resolve(plan::parse_strategy(s), graph, cluster);
    if (static_memory_fits(graph, cluster, r)) worth.push_back(s);
  }
  result.pruned_by_memory = all.size() - worth.size();

  std::vector<std::size_t> mine;
  const int shards = std::max(1, o.shards);
  for (std::size_t i = static_cast<std::size_t>(o.shard); i < worth.size(); i += static_cast<std::size_t>(shards)) mine.push_back(i);
  std::vector<std::optional<report::Report>> reports(worth.size());
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex progress_lock;
  auto work = [&] {
    for (std::size_t k = next++; k < mine.size(); k = next++) {
      const std::size_t i = mine[k];
      if (o.stop && o.stop->load()) break;
      driver::SimulationRequest request{"", "", worth[i], std::nullopt, std::nullopt, std::nullopt, false, {}, {}};
      driver::Prediction p = driver::predict(graph, cluster, request, o.profile.get());
      if (p.report.fits_in_memory) reports[i] = std::move(p.report);
      std::size_t finished = ++done;
      if (o.progress) {
        std::lock_guard lock(progress_lock);
        o.progress(finished, mine.size());
      }
    }
  };
  const unsigned threads = o.threads > 0 ? static_cast<unsigned>(o.threads) : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::jthread> pool;
  for (unsigned k = 0; k < threads; ++k) pool.emplace_back(work);
  pool.clear();  // joins
  result.simulated = done.load();
  result.stopped = result.simulated < mine.size();

  for (std::size_t i = 0; i < worth.size(); ++i) {
    if (reports[i]) result.ranked.push_back({worth[i], std::move(*reports[i]), false, i});
  }
  // Fastest first, and among equally fast ones the smallest: a candidate is on
  // the front when it needs less memory than every candidate before it.
  std::stable_sort(result.ranked.begin(), result.ranked.end(), [](const Candidate& a, const Candidate& b) {
    if (a.report.samples_per_s != b.report.samples_per_s) return a.report.samples_per_s > b.report.samples_per_s;
    return a.report.peak_bytes < b.report.peak_bytes;
  });
  core::Bytes smallest(std::numeric_limits<double>::infinity());
  for (Candidate& c : result.ranked) {
    if (c.report.peak_bytes < smallest) {
      c.pareto = true;
      smallest = c.report.peak_bytes;
    }
  }
  return result;
}

}  // namespace dtsim::search
