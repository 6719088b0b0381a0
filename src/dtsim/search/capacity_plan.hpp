#pragma once
/// Capacity planning: for each GPU type, GPU count and cluster shape, the
/// fastest strategy that fits (a strategy search over a reduced space), the
/// days to train a number of tokens, GPU-hours and cost. A shape says how
/// the GPUs are wired: the size of the NVLink domain (a node on NVSwitch at
/// the datasheet's NVLink rate) and the network between domains.
#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtsim/hw/device.hpp"
#include "dtsim/model/graph.hpp"

namespace dtsim::search {

/// Example prices per GPU-hour (USD, on-demand cloud, late 2025) to make the
/// cost column concrete; they are examples, not facts: pass your own.
std::map<std::string, double> example_prices_per_gpu_hour();

/// How a cluster of a device is built. NIC rates of 0 mean the generation's
/// InfiniBand: 200 Gb/s HDR for A100 and older, 400 Gb/s NDR otherwise.
struct ClusterShape {
  std::string name;
  std::string description;
  int domain = 8;            ///< GPUs per NVLink domain (at most; fewer when the count is smaller)
  int nics_per_node = 8;
  double nic_gbps = 0;
  double oversubscription = 1;
  /// Least NVLink bandwidth per GPU the device needs for this shape (NVL72 racks are Blackwell only).
  double min_scale_up_gbps = 0;
};

/// The shapes `dtsim plan --shapes` offers, the default (a DGX SuperPOD-style
/// fabric) first.
std::vector<ClusterShape> cluster_shapes();

/// The cluster JSON (topo::build_cluster) of `gpus` devices in a shape.
nlohmann::json cluster_for(const hw::Device& device, int gpus, const ClusterShape& shape);

/// The share of wall-clock time a large run trains: failures, restarts and
/// checkpoints take the rest. Meta reports "higher than 90% effective
/// training time" over 54 days of Llama 3 405B pre-training on 16k H100s
/// (Dubey et al., The Llama 3 Herd of Models, 2024, section 3.3.4).
inline constexpr double kDefaultGoodput = 0.9;

struct PlanOptions {
  double tokens = 0;  ///< to train
  /// Days, GPU-hours and cost are the simulated step's over this share.
  double goodput = kDefaultGoodput;
  /// Called after each (device, shape, GPU count) with (done, total).
  std::function<void(std::size_t, std::size_t)> progress;
  /// When set and true, no further cluster is planned and the one being
  /// searched is left out: the rows are those finished (Ctrl-C in the CLI).
  const std::atomic<bool>* stop = nullptr;
  int global_batch = 0;
  std::vector<std::string> devices;  ///< catalog names
  std::vector<int> gpu_counts;
  std::vector<std::string> shapes{"nvswitch8-ib"};  ///< names from cluster_shapes()
  std::map<std::string, double> price_per_gpu_hour;
  int threads = 0;
  /// Spreading a plan over processes (MPI ranks): only the clusters whose
  /// position i in (device, shape, GPU count) order has i % shards == shard
  /// are planned; rows keep i in `order`, so merging them restores the order.
  int shard = 0;
  int shards = 1;
};

struct PlanRow {
  std::string device;
  std::string shape;
  int gpus = 0;
  std::optional<std::string> strategy;  ///< none when nothing fits
  double tokens_per_s = 0;
  double mfu = 0;
  double days = 0;
  double gpu_hours = 0;
  std::optional<double> cost;  ///< when a price is known
  std::size_t order = 0;       ///< the cluster's position among all those planned
  /// The best strategy's pipeline: stages, micro-batches each replica runs a
  /// step, and the share of the step its busiest GPU sat idle.
  int pipeline_stages = 0;
  int micro_batches = 0;
  double bubble_fraction = 0;
  /// Fewer micro-batches than stages: the global batch, not the hardware,
  /// holds the row back (a 1F1B pipeline never fills: each stage idles
  /// pp - 1 of its m + pp - 1 slots a pass, at least half of them).
  [[nodiscard]] bool batch_limited() const { return strategy && micro_batches < pipeline_stages; }
};

std::vector<PlanRow> plan_capacity(const model::Graph& graph, const hw::DeviceCatalog& catalog, const PlanOptions& options);

/// The (device, shape) pairs plan_capacity skips, each with why: a shape is
/// built only with devices whose scale-up fabric it needs (nvl72: NVLink 5).
std::vector<std::string> skipped_shapes(const hw::DeviceCatalog& catalog, const PlanOptions& options);

}  // namespace dtsim::search
