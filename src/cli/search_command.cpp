// `dtsim search`: the ranked table of every strategy that fits, the Pareto
// front marked, and a progress bar with the time left on stderr.
#include <chrono>
#include <cstdlib>
#include <thread>
#include <limits>
#include <set>
#include <sstream>
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/interrupt.hpp"
#include "cli/mpi_gather.hpp"
#include "cli/progress_bar.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/version.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/exec/launch.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/report/writers.hpp"
#include "dtsim/search/strategy_search.hpp"
#include "dtsim/topo/cluster_loader.hpp"

namespace dtsim::cli {
namespace {

// "tp=8,pp=4" for --fix and --max; only the searched dimensions.
std::map<std::string, int> parse_dimensions(const std::string& flag, const std::string& text) {
  static const std::set<std::string> known{"dp", "tp", "pp", "cp", "ep", "etp", "mbs", "vpp", "zero"};
  std::map<std::string, int> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() : comma + 1;
    std::size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    if (eq == std::string::npos || !known.count(key)) {
      throw core::InputError(flag, "/" + key, "expected key=value with a key among dp, tp, pp, cp, ep, etp, mbs, vpp, zero");
    }
    try {
      out[key] = std::stoi(item.substr(eq + 1));
    } catch (const std::exception&) {
      throw core::InputError(flag, "/" + key, fmt::format("expected an integer, got \"{}\"", item.substr(eq + 1)));
    }
  }
  return out;
}


// A ranked candidate as printed: its report as JSON, so that candidates
// simulated on other MPI ranks print exactly as local ones.
struct Row {
  std::size_t order = 0;
  std::string strategy;
  nlohmann::json report;
  bool pareto = false;
};

// Every rank's fitting candidates on rank 0, ranked as run_search ranks them:
// fastest first, then smallest, then in enumeration order; the Pareto front
// marked again over all of them.
std::vector<Row> gather_rows(const std::vector<Row>& mine) {
  std::string packed;
  for (const Row& r : mine) packed += nlohmann::json{{"order", r.order}, {"strategy", r.strategy}, {"report", r.report}}.dump() + "\n";
  std::vector<Row> all;
  for (const std::string& text : gather_texts(packed)) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      all.push_back({j["order"].get<std::size_t>(), j["strategy"].get<std::string>(), std::move(j["report"]), false});
    }
  }
  std::sort(all.begin(), all.end(), [](const Row& a, const Row& b) { return a.order < b.order; });
  std::stable_sort(all.begin(), all.end(), [](const Row& a, const Row& b) {
    const double sa = a.report["samples_per_s"], sb = b.report["samples_per_s"];
    if (sa != sb) return sa > sb;
    return a.report["memory"]["peak_bytes"].get<double>() < b.report["memory"]["peak_bytes"].get<double>();
  });
  double smallest = std::numeric_limits<double>::infinity();
  for (Row& r : all) {
    const double peak = r.report["memory"]["peak_bytes"];
    if (peak < smallest) {
      r.pareto = true;
      smallest = peak;
    }
  }
  return all;
}

}  // namespace

void add_search(CLI::App& app, SearchOptions& o) {
  CLI::App* cmd = app.add_subcommand("search", "rank every valid strategy for a model on a cluster");
  cmd->add_option("--model,-m", o.model, "workload: a bundled name or a path")->required();
  cmd->add_option("--cluster,-c", o.cluster, "cluster: a bundled name or a path")->required();
  cmd->add_option("--gbs", o.gbs, "global batch size (samples per step)")->required();
  cmd->add_option("--nodes", o.nodes, "override the cluster file's node count");
  cmd->add_option("--fix", o.fix, "fix dimensions, e.g. tp=8,pp=8 (dp, tp, pp, cp, ep, etp, mbs, vpp, zero)");
  cmd->add_option("--max", o.max, "bound dimensions from above, e.g. pp=16");
  cmd->add_option("--top", o.top, "rows to print")->capture_default_str();
  cmd->add_option("--threads", o.threads, "worker threads (default: all cores)");
  cmd->add_option("--profile", o.profile, "calibration profile (dtsim.profile/1)");
  cmd->add_flag("--json", o.json, "print every fitting candidate as JSON");
  cmd->add_option("--ranks", o.ranks, "spread the candidates over this many local MPI ranks (under mpirun already: its ranks)")
      ->capture_default_str();
}

int run_search(const SearchOptions& o, const std::vector<std::string>& args, std::ostream& out) {
  if (o.ranks < 1) throw core::InputError("--ranks", "", fmt::format("expected 1 or more, got {}", o.ranks));
  hw::DeviceCatalog catalog;
  model::Graph graph = model::load_workload(driver::resolve_input(o.model, "workloads", "--model"));
  if (o.nodes && *o.nodes < 1) throw core::InputError("--nodes", "", "expected a positive node count");
  topo::Cluster cluster = topo::load_cluster(driver::resolve_input(o.cluster, "topologies", "--cluster"), catalog, {o.nodes});
  if (o.gbs < 1) throw core::InputError("--gbs", "", fmt::format("expected a positive global batch, got {}", o.gbs));
  std::optional<hw::Profile> profile = driver::apply_profile(cluster, o.profile);
  search::SearchOptions options;
  if (profile) options.profile = std::make_shared<const hw::Profile>(std::move(*profile));
  options.global_batch = o.gbs;
  options.fixed = parse_dimensions("--fix", o.fix);
  options.at_most = parse_dimensions("--max", o.max);
  options.threads = o.threads;
  // Under MPI each rank simulates every n-th candidate and rank 0 prints them all.
  const bool under_mpi = exec::launched_by_mpi();
  if (!under_mpi && o.ranks > 1) exec::relaunch_with_mpirun(o.ranks, args, {}, exec::CtrlC::kAskRanksToFinish);
  int rank = 0, ranks = 1;
  if (under_mpi) {
    MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  }
  options.shard = rank;
  options.shards = ranks;
  // Ranks on one node share its cores: each takes its part unless --threads says.
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); under_mpi && local && o.threads == 0) {
    options.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, std::atoi(local)));
  }
  ProgressBar bar;
  if (rank == 0 && o.progress) options.progress = std::ref(bar);
  catch_interrupt();
  options.stop = &interrupt_requested();
  const auto start = std::chrono::steady_clock::now();
  search::SearchResult r = search::run_search(graph, cluster, options);
  const std::size_t worth = r.enumerated - r.pruned_by_memory;
  std::vector<Row> rows;
  for (const auto& c : r.ranked) rows.push_back({c.order, c.strategy, report::to_json(c.report), c.pareto});
  std::size_t simulated = r.simulated;
  bool stopped = r.stopped;
  if (under_mpi) {
    rows = gather_rows(rows);
    simulated = static_cast<std::size_t>(sum_over_ranks(static_cast<long long>(r.simulated)));
    stopped = sum_over_ranks(r.stopped ? 1 : 0) > 0;
    MPI_Finalize();
    if (rank != 0) return kQuietRankExit;
  }
  if (stopped) {
    fmt::print(stderr, "\ndtsim: interrupted: the best of the {} of {} configurations simulated so far\n", simulated, worth);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r.enumerated == 0) {
    // Nothing to rank is a question that cannot be asked, not a search that found nothing that fits.
    throw core::InputError(o.fix.empty() && o.max.empty() ? "--gbs" : (o.fix.empty() ? "--max" : "--fix"), "",
                           fmt::format("no strategy of {} on {} GPUs of {} has {}{}{}: each degree must divide what it "
                                       "splits (heads, layers, sequence, experts, GPUs, the global batch {})",
                                       graph.name, cluster.gpu_count(), cluster.name(),
                                       o.fix.empty() ? "" : o.fix, o.fix.empty() || o.max.empty() ? "" : " and ",
                                       o.max.empty() ? (o.fix.empty() ? "a valid layout" : "") : "at most " + o.max, o.gbs));
  }

  if (o.json) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const Row& c : rows) candidates.push_back({{"strategy", c.strategy}, {"pareto", c.pareto}, {"report", c.report}});
    out << nlohmann::json{{"schema", "dtsim.search/1"}, {"dtsim_version", core::version()}, {"enumerated", r.enumerated}, {"pruned_by_memory", r.pruned_by_memory},
                          {"simulated", simulated}, {"stopped", stopped}, {"fitting", rows.size()}, {"seconds", seconds},
                          {"candidates", candidates}}
                .dump(2)
        << "\n";
    if (stopped) return kInterruptedExit;
    return rows.empty() ? 1 : 0;
  }
  fmt::print(out, "{} on {} ({} GPUs), global batch {}: {} valid strategies, {} dropped for weights and optimizer state "
                  "alone, {} simulated in {:.1f} s, {} fit\n\n",
             graph.name, cluster.name(), cluster.gpu_count(), o.gbs, r.enumerated, r.pruned_by_memory,
             stopped ? fmt::format("{} of {} (stopped by Ctrl-C)", simulated, worth) : fmt::format("{}", simulated), seconds,
             rows.size());
  fmt::print(out, "{:>4} {:<100} {:>10} {:>11} {:>6} {:>9}\n", "rank", "strategy", "step", "samples/s", "MFU", "peak GiB");
  for (std::size_t i = 0; i < rows.size() && i < static_cast<std::size_t>(o.top); ++i) {
    const Row& c = rows[i];
    fmt::print(out, "{:>4} {:<100} {:>8.3f} s {:>11.1f} {:>5.1f}% {:>8.1f}{}\n", i + 1, c.strategy,
               c.report["step_time_s"].get<double>(), c.report["samples_per_s"].get<double>(), 100 * c.report["mfu"].get<double>(),
               c.report["memory"]["peak_bytes"].get<double>() / 1073741824.0, c.pareto ? " *" : "");
  }
  fmt::print(out, "\n* on the Pareto front of throughput against memory: nothing else is both faster and smaller.\n");
  if (stopped) return kInterruptedExit;
  if (rows.empty()) {
    fmt::print(out, "No strategy fits: more GPUs, a device with more memory, or a smaller batch.\n");
    return 1;
  }
  return 0;
}

}  // namespace dtsim::cli
