// Launch configurations: Megatron-LM arguments (inputs starting with "-") or
// a DeepSpeed config (anything else, as JSON), mapped to a strategy that is
// then parsed and resolved like a user's own.
#include <string>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/plan/launch_config.hpp"
#include "dtsim/plan/strategy.hpp"
#include "dtsim/topo/cluster_loader.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const dtsim::hw::DeviceCatalog catalog;
  static const dtsim::model::Graph graph = dtsim::model::load_workload(dtsim::fuzz::source_dir() + "/workloads/tiny-gpt.json");
  static const dtsim::topo::Cluster cluster =
      dtsim::topo::load_cluster(dtsim::fuzz::source_dir() + "/topologies/dgx-h100.json", catalog);
  const std::string text(dtsim::fuzz::as_text(data, size));
  dtsim::fuzz::expect_only_input_errors([&] {
    const dtsim::plan::LaunchStrategy launch =
        !text.empty() && text.front() == '-'
            ? dtsim::plan::from_megatron_args(text, "args")
            : dtsim::plan::from_deepspeed_config(dtsim::core::parse_json_text(text, "ds.json"), "ds.json");
    (void)dtsim::plan::resolve(dtsim::plan::parse_strategy(launch.strategy), graph, cluster);
  });
  return 0;
}
