// `dtsim plan`: days, GPU-hours and cost to train a number of tokens, over GPU
// types and counts, each with its fastest strategy; a table, JSON, and an SVG chart.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

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
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/search/capacity_plan.hpp"

namespace dtsim::cli {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Days to train against GPU count, one line per device, log2 GPUs across.
std::string chart(const std::vector<search::PlanRow>& rows) {
  const double width = 740, height = 360, left = 70, bottom = 40, top = 30, right = 270;
  double max_days = 0;
  int min_gpus = 1 << 30, max_gpus = 0;
  for (const auto& r : rows) {
    if (r.strategy) max_days = std::max(max_days, r.days);
    min_gpus = std::min(min_gpus, r.gpus);
    max_gpus = std::max(max_gpus, r.gpus);
  }
  if (max_days <= 0) max_days = 1;
  auto x = [&](int gpus) {
    const double span = std::max(1.0, std::log2(max_gpus) - std::log2(min_gpus));
    return left + (std::log2(gpus) - std::log2(min_gpus)) / span * (width - left - right);
  };
  auto y = [&](double days) { return height - bottom - days / max_days * (height - bottom - top); };
  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  std::string svg = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
                                "font-size=\"12\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/>",
                                width, height);
  svg += fmt::format("<text x=\"{}\" y=\"18\">days to train, by GPU count (fastest strategy that fits)</text>", left);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/><line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" "
                     "y2=\"{1}\" stroke=\"black\"/>",
                     left, height - bottom, width - right, top);
  for (int k = 0; k <= 4; ++k) {
    const double d = max_days * k / 4;
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.1f}</text>", left - 6, y(d) + 4, d);
  }
  std::map<std::string, std::vector<const search::PlanRow*>> by_device;
  const bool several_shapes = std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r.shape != rows.front().shape; });
  for (const auto& r : rows) by_device[several_shapes ? r.device + " " + r.shape : r.device].push_back(&r);
  int c = 0;
  for (const auto& [device, points] : by_device) {
    const char* colour = colours[c % 6];
    std::string path;
    for (const auto* p : points) {
      svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", x(p->gpus), height - bottom + 16, p->gpus);
      if (!p->strategy) continue;
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", x(p->gpus), y(p->days));
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>", x(p->gpus), y(p->days), colour);
    }
    if (!path.empty()) svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>", path, colour);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
                       width - right + 15, top + 18 * c, colour, width - right + 30, top + 18 * c + 10, device);
    ++c;
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">GPUs</text></svg>\n", (left + width - right) / 2, height - 6);
  return svg;
}

// Every rank's rows on rank 0, in the order one process plans them. A row
// travels as JSON with its doubles written exactly (nlohmann's round trip),
// so the table and the JSON are byte-identical to one process's.
std::vector<search::PlanRow> gather_rows(const std::vector<search::PlanRow>& mine) {
  std::string packed;
  for (const auto& r : mine) {
    packed += nlohmann::json{{"order", r.order}, {"device", r.device}, {"shape", r.shape}, {"gpus", r.gpus},
                             {"strategy", r.strategy ? nlohmann::json(*r.strategy) : nlohmann::json(nullptr)},
                             {"tokens_per_s", r.tokens_per_s}, {"mfu", r.mfu}, {"days", r.days}, {"gpu_hours", r.gpu_hours},
                             {"cost", r.cost ? nlohmann::json(*r.cost) : nlohmann::json(nullptr)},
                             {"pipeline_stages", r.pipeline_stages}, {"micro_batches", r.micro_batches},
                             {"bubble_fraction", r.bubble_fraction}}
                  .dump() +
              "\n";
  }
  std::vector<search::PlanRow> all;
  for (const std::string& text : gather_texts(packed)) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      search::PlanRow r;
      r.order = j["order"].get<std::size_t>();
      r.device = j["device"].get<std::string>();
      r.shape = j["shape"].get<std::string>();
      r.gpus = j["gpus"].get<int>();
      if (!j["strategy"].is_null()) r.strategy = j["strategy"].get<std::string>();
      r.tokens_per_s = j["tokens_per_s"].get<double>();
      r.mfu = j["mfu"].get<double>();
      r.days = j["days"].get<double>();
      r.gpu_hours = j["gpu_hours"].get<double>();
      if (!j["cost"].is_null()) r.cost = j["cost"].get<double>();
      r.pipeline_stages = j["pipeline_stages"].get<int>();
      r.micro_batches = j["micro_batches"].get<int>();
      r.bubble_fraction = j["bubble_fraction"].get<double>();
      all.push_back(std::move(r));
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  return all;
}

std::string shape_names() {
  std::string names;
  for (const search::ClusterShape& s : search::cluster_shapes()) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

// Rows whose global batch leaves fewer micro-batches than pipeline stages
// (a fixed --gbs over growing GPU counts): said once each, with the way out,
// since their days and GPU-hours are the batch's, not the hardware's.
void print_batch_limited(const std::vector<search::PlanRow>& rows, int gbs, std::ostream& out) {
  bool first = true;
  for (const auto& r : rows) {
    if (!r.batch_limited()) continue;
    if (first) fmt::print(out, "\n");
    first = false;
    fmt::print(out, "batch-limited: {} on {} at {} GPUs: a global batch of {} leaves each replica {} micro-batch{} for {} "
               "pipeline stages; the GPUs idle {:.0f}% of the step\n",
               r.device, r.shape, r.gpus, gbs, r.micro_batches, r.micro_batches == 1 ? "" : "es", r.pipeline_stages,
               100 * r.bubble_fraction);
  }
  if (!first) {
    fmt::print(out, "  large runs raise the batch with the GPU count (Llama 3 405B: 2048 sequences of 8192 tokens on 16k "
               "H100s, Dubey et al. 2024, table 4); --gbs sets it\n");
  }
}

}  // namespace

void add_plan(CLI::App& app, PlanOptions& o) {
  CLI::App* cmd = app.add_subcommand("plan", "days, GPU-hours and cost to train a number of tokens, over GPU types and counts");
  cmd->add_option("--model,-m", o.model, "workload: a bundled name or a path")->required();
  cmd->add_option("--tokens", o.tokens, "tokens to train, e.g. 300e9")->required();
  cmd->add_option("--gbs", o.gbs, "global batch size (samples)")->capture_default_str();
  cmd->add_option("--devices", o.devices, "catalog devices, comma-separated")->capture_default_str();
  cmd->add_option("--gpus", o.gpus, "GPU counts, comma-separated multiples of 8")->capture_default_str();
  cmd->add_option("--shapes", o.shapes, "cluster shapes, comma-separated: " + shape_names())->capture_default_str();
  cmd->add_option("--price", o.prices, "price per GPU-hour, e.g. H100-SXM=2.1,B200=4 (defaults are examples)");
  cmd->add_option("--chart", o.chart, "write an SVG chart of days against GPUs");
  cmd->add_option("--goodput", o.goodput, "share of the wall clock that trains (failures, restarts and checkpoints take "
                                          "the rest; Llama 3 405B reports above 0.9)")->capture_default_str();
  cmd->add_flag("--json", o.json, "print the rows as JSON");
  cmd->add_option("--ranks", o.ranks, "spread the clusters over this many local MPI ranks (under mpirun already: its ranks)")
      ->capture_default_str();
}

int run_plan(const PlanOptions& o, const std::vector<std::string>& args, std::ostream& out) {
  if (o.ranks < 1) throw core::InputError("--ranks", "", fmt::format("expected 1 or more, got {}", o.ranks));
  hw::DeviceCatalog catalog;
  model::Graph graph = model::load_workload(driver::resolve_input(o.model, "workloads", "--model"));
  if (!(o.tokens > 0)) throw core::InputError("--tokens", "", "expected a positive number of tokens, like 300e9");
  search::PlanOptions options;
  options.tokens = o.tokens;
  options.global_batch = o.gbs;
  options.devices = split(o.devices);
  options.shapes = split(o.shapes);
  for (const std::string& g : split(o.gpus)) {
    try {
      options.gpu_counts.push_back(std::stoi(g));
    } catch (const std::exception&) {
      throw core::InputError("--gpus", "", fmt::format("expected GPU counts like 64,256, got \"{}\"", g));
    }
  }
  options.price_per_gpu_hour = search::example_prices_per_gpu_hour();
  for (const std::string& p : split(o.prices)) {
    const auto eq = p.find('=');
    try {
      if (eq == std::string::npos) throw std::invalid_argument(p);
      std::size_t used = 0;
      const std::string number = p.substr(eq + 1);
      const double usd = std::stod(number, &used);
      // A price is a positive, finite number and nothing after it ("2.1x" is a typo, not 2.1).
      if (used != number.size() || !(usd > 0) || !std::isfinite(usd)) throw std::invalid_argument(p);
      options.price_per_gpu_hour[p.substr(0, eq)] = usd;
    } catch (const std::exception&) {
      throw core::InputError("--price", "", fmt::format("expected DEVICE=USD per GPU-hour with a positive price, got \"{}\"", p));
    }
  }
  options.goodput = o.goodput;
  // Under MPI each rank plans every n-th cluster and rank 0 prints them all;
  // ranks on one node split its cores, as search's do.
  const bool under_mpi = exec::launched_by_mpi();
  if (!under_mpi && o.ranks > 1) exec::relaunch_with_mpirun(o.ranks, args, {}, exec::CtrlC::kAskRanksToFinish);
  int rank = 0, ranks = 1;
  if (under_mpi) {
    MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local) {
      options.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, std::atoi(local)));
    }
  }
  options.shard = rank;
  options.shards = ranks;
  ProgressBar bar(ranks > 1 ? "of rank 0's clusters planned" : "clusters planned");
  if (!o.json && o.progress && rank == 0) options.progress = std::ref(bar);
  catch_interrupt();
  options.stop = &interrupt_requested();
  std::vector<search::PlanRow> rows;
  try {
    rows = search::plan_capacity(graph, catalog, options);
  } catch (const core::InputError&) {
    // Bad input is the same on every rank: rank 0 says so, once, and all leave MPI cleanly.
    if (!under_mpi) throw;
    MPI_Finalize();
    if (rank == 0) throw;
    return kQuietRankExit;
  }
  const std::vector<std::string> skipped = search::skipped_shapes(catalog, options);
  bool stopped = interrupt_requested().load();
  if (under_mpi) {
    rows = gather_rows(rows);
    stopped = sum_over_ranks(stopped ? 1 : 0) > 0;
    MPI_Finalize();
    if (rank != 0) return kQuietRankExit;
  }
  if (stopped) fmt::print(stderr, "\ndtsim: interrupted: the {} clusters planned so far\n", rows.size());
  if (o.chart) {
    std::ofstream file(*o.chart);
    if (!file) throw core::InputError("--chart", "", fmt::format("cannot write \"{}\"", *o.chart));
    file << chart(rows);
  }
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows) {
      j.push_back({{"device", r.device}, {"shape", r.shape}, {"gpus", r.gpus}, {"fits", r.strategy.has_value()}, {"strategy", r.strategy.value_or("")},
                   {"tokens_per_s", r.tokens_per_s}, {"mfu", r.mfu}, {"days", r.days}, {"gpu_hours", r.gpu_hours},
                   {"cost_usd", r.cost ? nlohmann::json(*r.cost) : nlohmann::json(nullptr)},
                   {"pipeline_stages", r.pipeline_stages}, {"micro_batches", r.micro_batches},
                   {"bubble_fraction", r.bubble_fraction}, {"batch_limited", r.batch_limited()}});
    }
    out << nlohmann::json{{"schema", "dtsim.plan/1"}, {"dtsim_version", core::version()}, {"model", graph.name}, {"tokens", o.tokens}, {"goodput", o.goodput},
                          {"skipped", skipped}, {"stopped", stopped}, {"rows", j}}.dump(2) << "\n";
    return stopped ? kInterruptedExit : 0;
  }
  fmt::print(out, "{}: {:.3g} tokens, global batch {} (costs at example prices unless --price says otherwise)\n", graph.name,
             o.tokens, o.gbs);
  fmt::print(out, "goodput {:.0f}%: days, GPU-hours and cost are the simulated steps' over it (failures, restarts and "
             "checkpoints; --goodput)\n\n", 100 * o.goodput);
  fmt::print(out, "{:<15} {:<17} {:>6} {:>12} {:>6} {:>9} {:>12} {:>13}  {}\n", "device", "shape", "GPUs", "tokens/s", "MFU", "days",
             "GPU-hours", "cost (USD)", "best strategy");
  for (const auto& r : rows) {
    if (!r.strategy) {
      fmt::print(out, "{:<15} {:<17} {:>6}  does not fit\n", r.device, r.shape, r.gpus);
      continue;
    }
    fmt::print(out, "{:<15} {:<17} {:>6} {:>12.0f} {:>5.1f}% {:>9.1f} {:>12.0f} {:>13}  {}\n", r.device, r.shape, r.gpus,
               r.tokens_per_s, 100 * r.mfu, r.days, r.gpu_hours, r.cost ? fmt::format("{:.0f}", *r.cost) : "-", *r.strategy);
  }
  for (const std::string& why : skipped) fmt::print(out, "skipped: {}\n", why);
  print_batch_limited(rows, o.gbs, out);
  if (o.chart) fmt::print(out, "\nchart written to {}\n", *o.chart);
  if (stopped) {
    fmt::print(out, "stopped by Ctrl-C: the rows above are the clusters planned before it\n");
    return kInterruptedExit;
  }
  return 0;
}

}  // namespace dtsim::cli
