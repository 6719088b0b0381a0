#pragma once
/// Capacity planning: for each GPU type and GPU count, the fastest strategy
/// that fits (a strategy search over a reduced space), the days to train a
/// number of tokens, GPU-hours and cost. Each device gets the cluster shape
/// its vendors sell: nodes of 8 on its scale-up fabric (NVSwitch at the
/// datasheet's NVLink rate), 8 NICs per node on a non-blocking fat-tree
/// (200 Gb/s for A100 and older, 400 Gb/s otherwise).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtsim/hw/device.hpp"
#include "dtsim/model/graph.hpp"

namespace dtsim::search {

/// Example prices per GPU-hour (USD, on-demand cloud, late 2025) to make the
/// cost column concrete; they are examples, not facts: pass your own.
std::map<std::string, double> example_prices_per_gpu_hour();

struct PlanOptions {
  double tokens = 0;  ///< to train
  int global_batch = 0;
  std::vector<std::string> devices;  ///< catalog names
  std::vector<int> gpu_counts;
  std::map<std::string, double> price_per_gpu_hour;
  int threads = 0;
};

struct PlanRow {
  std::string device;
  int gpus = 0;
  std::optional<std::string> strategy;  ///< none when nothing fits
  double tokens_per_s = 0;
  double mfu = 0;
  double days = 0;
  double gpu_hours = 0;
  std::optional<double> cost;  ///< when a price is known
};

std::vector<PlanRow> plan_capacity(const model::Graph& graph, const hw::DeviceCatalog& catalog, const PlanOptions& options);

}  // namespace dtsim::search
