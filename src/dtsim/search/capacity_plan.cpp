#include "dtsim/search/capacity_plan.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtsim/core/input_error.hpp"
#include "dtsim/search/strategy_search.hpp"
#include "dtsim/topo/cluster_loader.hpp"

namespace dtsim::search {
namespace {

nlohmann::json cluster_for(const hw::Device& device, int gpus) {
  const bool older = device.name.rfind("A100", 0) == 0 || device.name.rfind("V100", 0) == 0;
  const int nodes = (gpus + 7) / 8;
  return {{"name", fmt::format("{}x8 {}", nodes, device.name)},
          {"device", device.name},
          {"nodes", nodes},
          {"gpus_per_node", 8},
          {"intra_node", {{"kind", "nvswitch"},
                          {"bandwidth", fmt::format("{} GB/s", device.scale_up_bandwidth.value() / 1e9)},
                          {"latency", "0.7 us"}}},
          {"inter_node", {{"kind", "fat_tree"}, {"nics_per_node", 8}, {"nic_bandwidth", older ? "200 Gb/s" : "400 Gb/s"},
                          {"latency", "1 us"}, {"nodes_per_leaf", 32}}}};
}

}  // namespace

std::map<std::string, double> example_prices_per_gpu_hour() {
  return {{"V100-SXM2-32GB", 0.90}, {"A100-SXM-40GB", 1.30}, {"A100-SXM-80GB", 1.80}, {"H100-SXM", 2.50},
          {"H100-PCIe", 2.00},      {"H200-SXM", 3.50},      {"B200", 5.00},          {"MI300X", 2.50}};
}

std::vector<PlanRow> plan_capacity(const model::Graph& graph, const hw::DeviceCatalog& catalog, const PlanOptions& o) {
  if (graph.seq_len <= 0) throw core::InputError("--model", "", "capacity planning counts tokens; it needs a sequence model");
  std::vector<PlanRow> rows;
  for (const std::string& name : o.devices) {
    const hw::Device* device = catalog.find(name);
    if (!device) throw core::InputError("--devices", "", fmt::format("expected devices among {}, got \"{}\"", catalog.names(), name));
    if (device->scale_up_bandwidth.value() <= 0 || device->peak_for(hw::Dtype::kBf16).value() <= 0) {
      throw core::InputError("--devices", "", fmt::format("{} has no NVLink-class fabric or no bf16; plan it with simulate", name));
    }
    for (int gpus : o.gpu_counts) {
      if (gpus < 8 || gpus % 8 != 0) throw core::InputError("--gpus", "", fmt::format("expected multiples of 8 GPUs, got {}", gpus));
      topo::Cluster cluster = topo::build_cluster(cluster_for(*device, gpus), "(planned cluster)", catalog);
      // A reduced space keeps a plan fast: one micro-batch size, ZeRO-1, no context parallelism.
      SearchOptions s;
      s.global_batch = o.global_batch;
      s.fixed = {{"mbs", 1}, {"zero", 1}, {"cp", 1}};
      s.threads = o.threads;
      SearchResult r = run_search(graph, cluster, s);
      PlanRow row{device->name, gpus, std::nullopt, 0, 0, 0, 0, std::nullopt};
      if (!r.ranked.empty()) {
        const auto& best = r.ranked.front();
        row.strategy = best.strategy;
        row.tokens_per_s = best.report.tokens_per_s;
        row.mfu = best.report.mfu;
        row.days = o.tokens / row.tokens_per_s / 86400.0;
        row.gpu_hours = row.days * 24.0 * gpus;
        if (auto p = o.price_per_gpu_hour.find(device->name); p != o.price_per_gpu_hour.end()) row.cost = row.gpu_hours * p->second;
      }
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace dtsim::search
