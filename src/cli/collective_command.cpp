// `dtsim collective`: one collective over a range of sizes, printed in the
// style of nccl-tests (size, time, algbw, busbw) with the algorithm chosen.
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/quantity_parse.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/topo/cluster_loader.hpp"

namespace dtsim::cli {
namespace {

// nccl-tests' bus-bandwidth factors: what each rank's busiest link carries per byte of the buffer.
double bus_factor(net::CollectiveOp op, double n) {
  switch (op) {
    case net::CollectiveOp::kAllReduce: return 2 * (n - 1) / n;
    case net::CollectiveOp::kReduceScatter:
    case net::CollectiveOp::kAllGather:
    case net::CollectiveOp::kAllToAll: return (n - 1) / n;
    default: return 1;
  }
}

std::pair<core::Bytes, core::Bytes> parse_sizes(const std::string& text) {
  try {
    return core::parse_size_range(text);
  } catch (const std::invalid_argument& e) {
    throw core::InputError("--sizes", "", std::string(e.what()) + " (a range is written 8B:8GiB)");
  }
}

}  // namespace

void add_collective(CLI::App& app, CollectiveOptions& o) {
  CLI::App* cmd = app.add_subcommand("collective", "cost one collective over a range of sizes, like nccl-tests");
  cmd->add_option("--cluster,-c", o.cluster, "cluster: a bundled name or a path")->capture_default_str();
  cmd->add_option("--nodes", o.nodes, "override the cluster file's node count");
  cmd->add_option("--op", o.op, "all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv")->capture_default_str();
  cmd->add_option("--group", o.group, "GPUs in the group, the first ones in placement order (default: all)");
  cmd->add_option("--sizes", o.sizes, "buffer sizes, doubling from the first to the last")->capture_default_str();
  cmd->add_option("--algorithm", o.algorithm, std::string(net::algorithm_names()))->capture_default_str();
  cmd->add_option("--protocol", o.protocol, "auto, simple, ll, ll128 (NCCL's protocols)")->capture_default_str();
  cmd->add_option("--profile", o.profile, "calibration profile: its measured collectives replace the fabric model");
  cmd->add_flag("--json", o.json, "print the rows as JSON");
}

int run_collective(const CollectiveOptions& o, std::ostream& out) {
  hw::DeviceCatalog catalog;
  if (o.nodes && *o.nodes < 1) throw core::InputError("--nodes", "", "expected a positive node count");
  topo::Cluster cluster = topo::load_cluster(driver::resolve_input(o.cluster, "topologies", "--cluster"), catalog, {o.nodes});
  auto op = net::parse_collective_op(o.op);
  if (!op) {
    throw core::InputError("--op", "", fmt::format("expected all_reduce, reduce_scatter, all_gather, broadcast, "
                                                   "reduce, all_to_all or send_recv, got \"{}\"", o.op));
  }
  auto algorithm = net::parse_algorithm(o.algorithm);
  if (!algorithm) {
    throw core::InputError("--algorithm", "", fmt::format("expected one of {}, got \"{}\"", net::algorithm_names(), o.algorithm));
  }
  auto protocol = net::parse_protocol(o.protocol);
  if (!protocol) throw core::InputError("--protocol", "", fmt::format("expected auto, simple, ll or ll128, got \"{}\"", o.protocol));
  const int group = o.group.value_or(cluster.gpu_count());
  if (group < 2 || group > cluster.gpu_count()) {
    throw core::InputError("--group", "", fmt::format("expected 2 to {} GPUs, got {}", cluster.gpu_count(), group));
  }
  auto [first, last] = parse_sizes(o.sizes);
  if (first.value() < 1 || last < first) throw core::InputError("--sizes", "", "expected a range from small to large, like 8B:8GiB");
  std::vector<int> gpus(static_cast<std::size_t>(group));
  for (int i = 0; i < group; ++i) gpus[static_cast<std::size_t>(i)] = i;
  net::NetworkOptions options;
  options.algorithm = *algorithm;
  options.protocol = *protocol;
  if (o.profile) options.measured = driver::measured_collectives(driver::load_checked_profile(*o.profile, cluster));
  net::Network network(cluster, options);
  if (!network.applies(*op, gpus, *algorithm)) {
    throw core::InputError("--algorithm", "", fmt::format("{} cannot run {} on {} GPUs of {}: it needs {}", o.algorithm,
                                                         o.op, group, cluster.name(), net::requirement(*algorithm)));
  }

  nlohmann::json rows = nlohmann::json::array();
  if (!o.json) {
    fmt::print(out, "# {} on {} GPUs of {} ({} x {})\n", o.op, group, cluster.name(), cluster.nodes(), cluster.device().name);
    fmt::print(out, "#{:>14} {:>12} {:>12} {:>12}  {:<7} {:>3}  {}\n", "size(B)", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
               "proto", "ch", "algorithm");
  }
  for (double size = first.value(); size <= last.value() * (1 + 1e-9); size *= 2) {
    net::CollectiveCost c = network.cost(*op, gpus, core::Bytes(size));
    const double seconds = c.time.value();
    const double algbw = seconds > 0 ? size / seconds / 1e9 : 0;
    const double busbw = algbw * bus_factor(*op, group);
    std::string name = std::string(net::to_string(c.algorithm)) + (c.hierarchical ? " (hierarchical)" : "");
    if (o.json) {
      rows.push_back({{"size_bytes", size}, {"time_s", seconds}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw},
                      {"algorithm", net::to_string(c.algorithm)}, {"hierarchical", c.hierarchical},
                      {"protocol", net::to_string(c.protocol)}, {"channels", c.channels}, {"measured", c.measured}});
    } else {
      const std::string protocol_name = c.measured ? "-" : std::string(net::to_string(c.protocol));
      fmt::print(out, " {:>14.0f} {:>12.2f} {:>12.2f} {:>12.2f}  {:<7} {:>3}  {}\n", size, seconds * 1e6, algbw, busbw,
                 protocol_name, c.measured ? 0 : c.channels, c.measured ? "measured" : name);
    }
  }
  if (o.json) {
    out << nlohmann::json{{"schema", "dtsim.collective/1"}, {"cluster", cluster.name()}, {"op", o.op},
                          {"gpus", group}, {"rows", rows}}.dump(2) << "\n";
  }
  return 0;
}

}  // namespace dtsim::cli
