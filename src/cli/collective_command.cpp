// `dtsim collective`: one collective over a range of sizes, printed as
// nccl-tests prints it (its columns, flags and footer) with the protocol,
// channels and algorithm the model chose.
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <optional>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/quantity_parse.hpp"
#include "dtsim/core/version.hpp"
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

// nccl-tests' element types (-d) and their sizes in bytes.
std::optional<int> type_bytes(std::string_view name) {
  static const std::map<std::string_view, int> sizes = {
      {"int8", 1},  {"uint8", 1},  {"int32", 4}, {"uint32", 4},   {"int64", 8},  {"uint64", 8},
      {"half", 2},  {"float", 4},  {"double", 8}, {"bfloat16", 2}, {"f8e4m3", 1}, {"f8e5m2", 1}};
  auto it = sizes.find(name);
  if (it == sizes.end()) return std::nullopt;
  return it->second;
}

// A size as nccl-tests reads -b and -e: a count of bytes with an optional K,
// M or G (powers of 1024); dtsim's own "8 GiB" is read too.
core::Bytes parse_test_size(const std::string& text, const std::string& flag) {
  std::size_t end = 0;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  const std::string suffix = text.substr(end);
  static const std::map<std::string, double> factor = {{"", 1.0},         {"K", 1024.0},      {"k", 1024.0},
                                                       {"M", 1048576.0}, {"m", 1048576.0}, {"G", 1073741824.0},
                                                       {"g", 1073741824.0}};
  if (end > 0 && end <= 15 && factor.count(suffix)) return core::Bytes(std::stod(text.substr(0, end)) * factor.at(suffix));
  try {
    return core::parse_bytes(text);
  } catch (const std::invalid_argument&) {
    throw core::InputError(flag, "", fmt::format("expected a size like 8, 64K, 8G or \"8 GiB\", got \"{}\"", text));
  }
}

// Collectives that split the buffer evenly over the ranks: nccl-tests rounds
// their sizes down to a multiple of ranks x element size.
bool split_over_ranks(net::CollectiveOp op) {
  return op == net::CollectiveOp::kAllGather || op == net::CollectiveOp::kReduceScatter ||
         op == net::CollectiveOp::kAllToAll;
}

bool reduces(net::CollectiveOp op) {
  return op == net::CollectiveOp::kAllReduce || op == net::CollectiveOp::kReduceScatter || op == net::CollectiveOp::kReduce;
}

bool rooted(net::CollectiveOp op) { return op == net::CollectiveOp::kBroadcast || op == net::CollectiveOp::kReduce; }

}  // namespace

void add_collective(CLI::App& app, CollectiveOptions& o) {
  CLI::App* cmd = app.add_subcommand("collective", "cost one collective over a range of sizes, like nccl-tests");
  cmd->add_option("--cluster,-c", o.cluster, "cluster: a bundled name or a path")->capture_default_str();
  cmd->add_option("--nodes", o.nodes, "override the cluster file's node count");
  cmd->add_option("--op", o.op, "all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv")->capture_default_str();
  cmd->add_option("--group", o.group, "GPUs in the group, the first ones in placement order (default: all)");
  cmd->add_option("--sizes", o.sizes, "buffer sizes, doubling from the first to the last (default 8B:8GiB)");
  cmd->add_option("-b,--minbytes", o.minbytes, "nccl-tests' first size: 8, 64K, 8G (powers of 1024)");
  cmd->add_option("-e,--maxbytes", o.maxbytes, "nccl-tests' last size");
  cmd->add_option("-f,--stepfactor", o.stepfactor, "nccl-tests' factor from one size to the next")->capture_default_str();
  cmd->add_option("-d,--datatype", o.datatype, "nccl-tests' element type: int8, uint8, int32, uint32, int64, uint64, "
                                               "half, float, double, bfloat16, f8e4m3, f8e5m2")->capture_default_str();
  cmd->add_option("-o,--redop", o.redop, "nccl-tests' reduction: sum, prod, min, max, avg (all cost the same)")->capture_default_str();
  cmd->add_option("-r,--root", o.root, "root rank of broadcast and reduce")->capture_default_str();
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
  if (o.root < 0 || o.root >= group) throw core::InputError("--root", "", fmt::format("expected 0 to {}, got {}", group - 1, o.root));
  if (o.sizes && (o.minbytes || o.maxbytes)) {
    throw core::InputError("--sizes", "", "give either --sizes or nccl-tests' -b/-e, not both");
  }
  auto [first, last] = parse_sizes(o.sizes.value_or("8B:8GiB"));
  if (o.minbytes) first = parse_test_size(*o.minbytes, "--minbytes");
  if (o.maxbytes) last = parse_test_size(*o.maxbytes, "--maxbytes");
  const std::string range_flag = o.minbytes || o.maxbytes ? "--maxbytes" : "--sizes";
  if (first.value() < 1 || last < first) {
    throw core::InputError(range_flag, "", "expected a range from small to large, like 8B:8GiB or -b 8 -e 8G");
  }
  if (o.stepfactor < 2) throw core::InputError("--stepfactor", "", fmt::format("expected 2 or more, got {}", o.stepfactor));
  const std::optional<int> word = type_bytes(o.datatype);
  if (!word) {
    throw core::InputError("--datatype", "", fmt::format("expected int8, uint8, int32, uint32, int64, uint64, half, "
                                                         "float, double, bfloat16, f8e4m3 or f8e5m2, got \"{}\"", o.datatype));
  }
  static const std::set<std::string> redops = {"sum", "prod", "min", "max", "avg"};
  if (!redops.count(o.redop)) throw core::InputError("--redop", "", fmt::format("expected sum, prod, min, max or avg, got \"{}\"", o.redop));
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

  // nccl-tests' layout: size, count, type, redop, root, then time, algbw,
  // busbw and #wrong out of place and in place. The model costs both the same
  // (nccl-tests' in-place run skips one local copy), and checks no data:
  // #wrong is N/A, as nccl-tests prints it under -c 0. dtsim's own columns follow.
  const bool reduction = reduces(*op);
  const std::string redop = reduction ? o.redop : "none";
  const int root = rooted(*op) ? o.root : -1;
  const double align = *word * (split_over_ranks(*op) ? group : 1);
  nlohmann::json rows = nlohmann::json::array();
  if (!o.json) {
    fmt::print(out, "# {} on {} GPUs of {} ({} x {})\n#\n", o.op, group, cluster.name(), cluster.nodes(), cluster.device().name);
    fmt::print(out, "#{:>75}{:>29}\n", "out-of-place", "in-place");
    fmt::print(out, "#{:>11} {:>13} {:>9} {:>7} {:>7} {:>8} {:>7} {:>7} {:>6} {:>8} {:>7} {:>7} {:>6}  {:<6} {:>3}  {}\n",
               "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
               "#wrong", "proto", "ch", "algorithm");
    fmt::print(out, "#{:>11} {:>13} {:>25} {:>8} {:>7} {:>7} {:>6} {:>8} {:>7} {:>7}\n", "(B)", "(elements)", "", "(us)",
               "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)");
  }
  double busbw_sum = 0;
  int row_count = 0;
  for (double target = first.value(); target <= last.value() * (1 + 1e-9); target *= o.stepfactor) {
    const double size = std::floor(target / align) * align;
    if (size <= 0) {
      if (!o.json) fmt::print(out, "# {:.0f} B: no whole {} per rank, skipped\n", target, o.datatype);
      continue;
    }
    net::CollectiveCost c = network.cost(*op, gpus, core::Bytes(size));
    const double seconds = c.time.value();
    const double algbw = seconds > 0 ? size / seconds / 1e9 : 0;
    const double busbw = algbw * bus_factor(*op, group);
    const double count = size / *word;
    busbw_sum += busbw;
    ++row_count;
    std::string name = std::string(net::to_string(c.algorithm)) + (c.hierarchical ? " (hierarchical)" : "");
    if (o.json) {
      rows.push_back({{"size_bytes", size}, {"count", count}, {"type", o.datatype}, {"redop", redop}, {"root", root},
                      {"time_s", seconds}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw},
                      {"algorithm", net::to_string(c.algorithm)}, {"hierarchical", c.hierarchical},
                      {"protocol", net::to_string(c.protocol)}, {"channels", c.channels}, {"measured", c.measured}});
    } else {
      const std::string protocol_name = c.measured ? "-" : std::string(net::to_string(c.protocol));
      const std::string timing = fmt::format("{:>8.2f} {:>7.2f} {:>7.2f} {:>6}", seconds * 1e6, algbw, busbw, "N/A");
      fmt::print(out, " {:>11.0f} {:>13.0f} {:>9} {:>7} {:>7} {} {}  {:<6} {:>3}  {}\n", size, count, o.datatype, redop, root,
                 timing, timing, protocol_name, c.measured ? 0 : c.channels, c.measured ? "measured" : name);
    }
  }
  const double average_busbw = row_count ? busbw_sum / row_count : 0;
  if (o.json) {
    out << nlohmann::json{{"schema", "dtsim.collective/1"}, {"dtsim_version", core::version()}, {"cluster", cluster.name()}, {"op", o.op},
                          {"gpus", group}, {"avg_busbw_GBps", average_busbw}, {"rows", rows}}.dump(2) << "\n";
  } else {
    fmt::print(out, "# Out of bounds values : 0 OK (no data checked: a model)\n");
    fmt::print(out, "# Avg bus bandwidth    : {:.4f} \n#\n", average_busbw);
  }
  return 0;
}

}  // namespace dtsim::cli
