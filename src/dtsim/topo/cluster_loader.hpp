#pragma once
/// Builds a Cluster from `topologies/*.json`:
///   {"name", "source", "device", "nodes", "gpus_per_node",
///    "host": a devices/hosts.json name        (optional: the device's),
///    "intra_node": {"kind": "nvswitch" | "pcie", "bandwidth", "latency"},
///    "pcie": {"bandwidth", "latency"}                          (optional)
///    "inter_node": {"kind": "fat_tree", "nics_per_node", "nic_bandwidth",
///                   "latency", "oversubscription", "nodes_per_leaf"}}  (optional)
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "dtsim/hw/device.hpp"
#include "dtsim/topo/cluster.hpp"

namespace dtsim::topo {

struct ClusterOptions {
  std::optional<int> nodes;  ///< overrides the file's node count (--nodes)
};

Cluster load_cluster(const std::filesystem::path& path, const hw::DeviceCatalog& catalog,
                     const ClusterOptions& options = {});
Cluster build_cluster(const nlohmann::json& document, const std::string& file, const hw::DeviceCatalog& catalog,
                      const ClusterOptions& options = {});

}  // namespace dtsim::topo
