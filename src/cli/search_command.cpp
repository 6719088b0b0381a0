// `dtsim search`: the ranked table of every strategy that fits, the Pareto
// front marked, and a progress bar with the time left on stderr.
#include <chrono>
#include <set>
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/interrupt.hpp"
#include "cli/progress_bar.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/report/writers.hpp"
#include "dtsim/search/strategy_search.hpp"
#include "dtsim/topo/cluster_loader.hpp"

namespace dtsim::cli {
namespace {

// "tp=8,pp=4" for --fix and --max; only the searched dimensions.
std::map<std::string, int> parse_dimensions(const std::string& flag, const std::string& text) {
  static const std::set<std::string> known{"dp", "tp", "pp", "cp", "ep", "mbs", "vpp", "zero"};
  std::map<std::string, int> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() : comma + 1;
    std::size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    if (eq == std::string::npos || !known.count(key)) {
      throw core::InputError(flag, "/" + key, "expected key=value with a key among dp, tp, pp, cp, ep, mbs, vpp, zero");
    }
    try {
      out[key] = std::stoi(item.substr(eq + 1));
    } catch (const std::exception&) {
      throw core::InputError(flag, "/" + key, fmt::format("expected an integer, got \"{}\"", item.substr(eq + 1)));
    }
  }
  return out;
}


}  // namespace

void add_search(CLI::App& app, SearchOptions& o) {
  CLI::App* cmd = app.add_subcommand("search", "rank every valid strategy for a model on a cluster");
  cmd->add_option("--model,-m", o.model, "workload: a bundled name or a path")->required();
  cmd->add_option("--cluster,-c", o.cluster, "cluster: a bundled name or a path")->required();
  cmd->add_option("--gbs", o.gbs, "global batch size (samples per step)")->required();
  cmd->add_option("--nodes", o.nodes, "override the cluster file's node count");
  cmd->add_option("--fix", o.fix, "fix dimensions, e.g. tp=8,pp=8 (dp, tp, pp, cp, ep, mbs, vpp, zero)");
  cmd->add_option("--max", o.max, "bound dimensions from above, e.g. pp=16");
  cmd->add_option("--top", o.top, "rows to print")->capture_default_str();
  cmd->add_option("--threads", o.threads, "worker threads (default: all cores)");
  cmd->add_option("--profile", o.profile, "calibration profile (dtsim.profile/1)");
  cmd->add_flag("--json", o.json, "print every fitting candidate as JSON");
}

int run_search(const SearchOptions& o, std::ostream& out) {
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
  ProgressBar bar;
  options.progress = std::ref(bar);
  catch_interrupt();
  options.stop = &interrupt_requested();
  const auto start = std::chrono::steady_clock::now();
  search::SearchResult r = search::run_search(graph, cluster, options);
  const std::size_t worth = r.enumerated - r.pruned_by_memory;
  if (r.stopped) {
    fmt::print(stderr, "\ndtsim: interrupted: the best of the {} of {} configurations simulated so far\n", r.simulated, worth);
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
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& c : r.ranked) rows.push_back({{"strategy", c.strategy}, {"pareto", c.pareto}, {"report", report::to_json(c.report)}});
    out << nlohmann::json{{"schema", "dtsim.search/1"}, {"enumerated", r.enumerated}, {"pruned_by_memory", r.pruned_by_memory},
                          {"simulated", r.simulated}, {"stopped", r.stopped}, {"fitting", r.ranked.size()}, {"seconds", seconds},
                          {"candidates", rows}}
                .dump(2)
        << "\n";
    if (r.stopped) return kInterruptedExit;
    return r.ranked.empty() ? 1 : 0;
  }
  fmt::print(out, "{} on {} ({} GPUs), global batch {}: {} valid strategies, {} dropped for weights and optimizer state "
                  "alone, {} simulated in {:.1f} s, {} fit\n\n",
             graph.name, cluster.name(), cluster.gpu_count(), o.gbs, r.enumerated, r.pruned_by_memory,
             r.stopped ? fmt::format("{} of {} (stopped by Ctrl-C)", r.simulated, worth) : fmt::format("{}", r.simulated), seconds,
             r.ranked.size());
  fmt::print(out, "{:>4} {:<100} {:>10} {:>11} {:>6} {:>9}\n", "rank", "strategy", "step", "samples/s", "MFU", "peak GiB");
  for (std::size_t i = 0; i < r.ranked.size() && i < static_cast<std::size_t>(o.top); ++i) {
    const auto& c = r.ranked[i];
    fmt::print(out, "{:>4} {:<100} {:>8.3f} s {:>11.1f} {:>5.1f}% {:>8.1f}{}\n", i + 1, c.strategy, c.report.step_time.value(),
               c.report.samples_per_s, 100 * c.report.mfu, c.report.peak_bytes.value() / 1073741824.0, c.pareto ? " *" : "");
  }
  fmt::print(out, "\n* on the Pareto front of throughput against memory: nothing else is both faster and smaller.\n");
  if (r.stopped) return kInterruptedExit;
  if (r.ranked.empty()) {
    fmt::print(out, "No strategy fits: more GPUs, a device with more memory, or a smaller batch.\n");
    return 1;
  }
  return 0;
}

}  // namespace dtsim::cli
