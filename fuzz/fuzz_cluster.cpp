// Cluster files: shape, node and fabric descriptions, explicit topologies.
#include <vector>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/topo/cluster_loader.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const dtsim::hw::DeviceCatalog catalog;
  dtsim::fuzz::expect_only_input_errors([&] {
    const nlohmann::json doc = dtsim::core::parse_json_text(dtsim::fuzz::as_text(data, size), "cluster.json");
    const dtsim::topo::Cluster cluster = dtsim::topo::build_cluster(doc, "cluster.json", catalog);
    // Routing is where a disconnected fabric or a zero bandwidth surfaced.
    if (cluster.gpu_count() <= 4096) {
      const dtsim::net::Network network(cluster, {});
      const std::vector<int> ends{0, cluster.gpu_count() - 1};
      (void)dtsim::core::to_nanoseconds(
          network.cost(dtsim::net::CollectiveOp::kAllReduce, ends, dtsim::core::Bytes(1 << 20)).time);
    }
  });
  return 0;
}
