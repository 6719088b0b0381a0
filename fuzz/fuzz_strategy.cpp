// Strategy strings, parsed and resolved against a small model on one DGX H100
// (resolve is where products of degrees and batches wrapped).
#include <string>

#include "dtsim/hw/device.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/topo/cluster_loader.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const dtsim::hw::DeviceCatalog catalog;
  static const dtsim::model::Graph graph = dtsim::model::load_workload(dtsim::fuzz::source_dir() + "/workloads/tiny-gpt.json");
  static const dtsim::topo::Cluster cluster =
      dtsim::topo::load_cluster(dtsim::fuzz::source_dir() + "/topologies/dgx-h100.json", catalog);
  dtsim::fuzz::expect_only_input_errors([&] {
    (void)dtsim::plan::resolve(dtsim::plan::parse_strategy(dtsim::fuzz::as_text(data, size)), graph, cluster);
  });
  return 0;
}
