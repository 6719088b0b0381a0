#include "dtsim/search/capacity_plan.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtsim/core/input_error.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/search/strategy_search.hpp"
#include "dtsim/topo/cluster_loader.hpp"

namespace dtsim::search {
std::vector<ClusterShape> cluster_shapes() {
  return {
      {"nvswitch8-ib", "nodes of 8 on NVSwitch, one InfiniBand NIC per GPU, non-blocking fat-tree (DGX SuperPOD)",
       8, 8, 0, 1, 0},
      {"nvswitch8-ib-2:1", "the same with 2:1 oversubscribed leaf uplinks (a cheaper spine)", 8, 8, 0, 2, 0},
      {"nvswitch8-4x100g", "nodes of 8 on NVSwitch, 4 x 100 Gb/s per node (cloud instances of the A100 era, e.g. "
       "AWS p4d's 400 Gb/s EFA)", 8, 4, 100, 1, 0},
      {"nvl72", "64 GPUs of a 72-GPU NVLink rack (GB200 NVL72; 64 keep parallel degrees powers of two), one "
       "400 Gb/s NIC per GPU; Blackwell (1.8 TB/s NVLink 5) only", 72, 64, 400, 1, 900},
  };
}

nlohmann::json cluster_for(const hw::Device& device, int gpus, const ClusterShape& shape) {
  const bool older = device.name.rfind("A100", 0) == 0 || device.name.rfind("V100", 0) == 0;
  // An NVL72 rack runs 64 of its GPUs as one domain; smaller counts fill one domain.
  const int domain = std::min(shape.domain == 72 ? 64 : shape.domain, gpus);
  const int nodes = gpus / domain;
  const double nic = shape.nic_gbps > 0 ? shape.nic_gbps : (older ? 200 : 400);
  const int nics = std::min(shape.nics_per_node, domain);
  nlohmann::json cluster = {{"name", fmt::format("{}x{} {} ({})", nodes, domain, device.name, shape.name)},
                            {"device", device.name},
                            {"nodes", nodes},
                            {"gpus_per_node", domain},
                            {"intra_node", {{"kind", "nvswitch"},
                                            {"bandwidth", fmt::format("{} GB/s", device.scale_up_bandwidth.value() / 1e9)},
                                            {"latency", "0.7 us"}}}};
  if (nodes > 1) {
    cluster["inter_node"] = {{"kind", "fat_tree"}, {"nics_per_node", nics}, {"nic_bandwidth", fmt::format("{} Gb/s", nic)},
                             {"latency", "1 us"}, {"nodes_per_leaf", 32}, {"oversubscription", shape.oversubscription}};
  }
  return cluster;
}


std::map<std::string, double> example_prices_per_gpu_hour() {
  return {{"V100-SXM2-32GB", 0.90}, {"A100-SXM-40GB", 1.30}, {"A100-SXM-80GB", 1.80}, {"H100-SXM", 2.50},
          {"H100-PCIe", 2.00},      {"H200-SXM", 3.50},      {"B200", 5.00},          {"MI300X", 2.50}};
}

std::vector<PlanRow> plan_capacity(const model::Graph& graph, const hw::DeviceCatalog& catalog, const PlanOptions& o) {
  if (graph.seq_len <= 0) throw core::InputError("--model", "", "capacity planning counts tokens; it needs a sequence model");
  const std::vector<ClusterShape> known = cluster_shapes();
  std::vector<const ClusterShape*> shapes;
  for (const std::string& name : o.shapes) {
    auto it = std::find_if(known.begin(), known.end(), [&](const ClusterShape& c) { return c.name == name; });
    if (it == known.end()) {
      std::string names;
      for (const ClusterShape& c : known) names += (names.empty() ? "" : ", ") + c.name;
      throw core::InputError("--shapes", "", fmt::format("expected shapes among {}, got \"{}\"", names, name));
    }
    shapes.push_back(&*it);
  }
  if (!(o.goodput > 0) || o.goodput > 1) {
    throw core::InputError("--goodput", "", fmt::format("expected a share of the time above 0 and at most 1, got {}", o.goodput));
  }
  if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards) {
    throw std::invalid_argument(fmt::format("plan_capacity: shard {} of {}", o.shard, o.shards));
  }
  std::size_t clusters = 0, done = 0;
  for (const std::string& name : o.devices) {
    const hw::Device* device = catalog.find(name);
    for (const ClusterShape* shape : shapes) {
      if (device && device->scale_up_bandwidth.value() >= shape->min_scale_up_gbps * 1e9) clusters += o.gpu_counts.size();
    }
  }
  const auto shards = static_cast<std::size_t>(o.shards), shard = static_cast<std::size_t>(o.shard);
  const std::size_t total = clusters / shards + (shard < clusters % shards ? 1 : 0);  // this shard's
  std::size_t position = 0;
  std::vector<PlanRow> rows;
  for (const std::string& name : o.devices) {
    const hw::Device* device = catalog.find(name);
    if (!device) throw core::InputError("--devices", "", fmt::format("expected devices among {}, got \"{}\"", catalog.names(), name));
    if (device->scale_up_bandwidth.value() <= 0 || device->peak_for(hw::Dtype::kBf16).value() <= 0) {
      throw core::InputError("--devices", "", fmt::format("{} has no NVLink-class fabric or no bf16; plan it with simulate", name));
    }
    for (const ClusterShape* shape : shapes) {
    if (device->scale_up_bandwidth.value() < shape->min_scale_up_gbps * 1e9) continue;  // not built with this device
    for (int gpus : o.gpu_counts) {
      if (gpus < 8 || gpus % 8 != 0) throw core::InputError("--gpus", "", fmt::format("expected multiples of 8 GPUs, got {}", gpus));
      if (shape->domain == 72 && gpus > 64 && gpus % 64 != 0) {
        throw core::InputError("--gpus", "", fmt::format("expected multiples of 64 GPUs for nvl72, got {}", gpus));
      }
      if (position++ % shards != shard) continue;
      if (o.stop && o.stop->load()) return rows;
      topo::Cluster cluster = topo::build_cluster(cluster_for(*device, gpus, *shape), "(planned cluster)", catalog);
      // A reduced space keeps a plan fast: one micro-batch size, ZeRO-1, no context parallelism.
      SearchOptions s;
      s.global_batch = o.global_batch;
      s.fixed = {{"mbs", 1}, {"zero", 1}, {"cp", 1}};
      s.threads = o.threads;
      s.stop = o.stop;
      SearchResult r = run_search(graph, cluster, s);
      if (r.stopped) return rows;
      PlanRow row{device->name, shape->name, gpus, std::nullopt, 0, 0, 0, 0, std::nullopt, position - 1};
      if (!r.ranked.empty()) {
        const auto& best = r.ranked.front();
        row.strategy = best.strategy;
        row.tokens_per_s = best.report.tokens_per_s;
        row.mfu = best.report.mfu;
        row.days = o.tokens / row.tokens_per_s / 86400.0 / o.goodput;
        row.gpu_hours = row.days * 24.0 * gpus;
        if (auto p = o.price_per_gpu_hour.find(device->name); p != o.price_per_gpu_hour.end()) row.cost = row.gpu_hours * p->second;
        row.pipeline_stages = plan::parse_strategy(best.strategy).pp;
        row.micro_batches = best.report.micro_batches;
        row.bubble_fraction = best.report.breakdown.bubble / best.report.step_time;
      }
      rows.push_back(row);
      if (o.progress) o.progress(++done, total);
    }
    }
  }
  return rows;
}

std::vector<std::string> skipped_shapes(const hw::DeviceCatalog& catalog, const PlanOptions& o) {
  std::vector<std::string> out;
  const std::vector<ClusterShape> known = cluster_shapes();
  for (const std::string& name : o.devices) {
    const hw::Device* device = catalog.find(name);
    if (!device) continue;
    for (const std::string& shape_name : o.shapes) {
      auto shape = std::find_if(known.begin(), known.end(), [&](const ClusterShape& c) { return c.name == shape_name; });
      if (shape == known.end() || device->scale_up_bandwidth.value() >= shape->min_scale_up_gbps * 1e9) continue;
      out.push_back(fmt::format("{} on {}: the shape needs {:.0f} GB/s of scale-up bandwidth a GPU each way, the {} has {:.0f}",
                                name, shape->name, shape->min_scale_up_gbps, name, device->scale_up_bandwidth.value() / 1e9));
    }
  }
  return out;
}

}  // namespace dtsim::search
