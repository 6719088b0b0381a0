// Speed of the simulator. Quote medians and ratios (machines are shared):
//   build/bench/bench_simulate --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/search/strategy_search.hpp"
#include "dtsim/plan/lower.hpp"
#include "dtsim/sim/replay.hpp"
#include "dtsim/topo/cluster_loader.hpp"

using namespace dtsim;

namespace {

// The engine alone on a pre-lowered, pre-costed graph: events per second.
void EngineEventsPerSecond(benchmark::State& state) {
  hw::DeviceCatalog catalog;
  model::Graph graph = model::load_workload(driver::data_dir() / "workloads" / "llama2-7b.json");
  topo::Cluster cluster = topo::load_cluster(driver::data_dir() / "topologies" / "dgx-h100.json", catalog, {8});
  plan::ResolvedStrategy strategy = plan::resolve(plan::parse_strategy("zero3,gbs=512"), graph, cluster);
  plan::TaskGraph tasks = plan::lower(graph, strategy, cluster, {true});
  net::Network network(cluster, {});
  sim::TaskCosts costs = sim::cost_tasks(tasks, hw::CostModel(cluster.device(), {}), network);
  std::uint64_t events = 0;
  for (auto _ : state) {
    plan::Timeline t = sim::replay(tasks, costs);
    events += t.events;
    benchmark::DoNotOptimize(t.makespan);
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["tasks"] = static_cast<double>(tasks.tasks.size());
}
BENCHMARK(EngineEventsPerSecond)->Unit(benchmark::kMillisecond);

// A whole prediction from files: Llama-2-7B data parallel on 64 H100s (8 nodes).
void Llama2_7B_64Gpus_DataParallel(benchmark::State& state) {
  const bool full = state.range(0) != 0;
  for (auto _ : state) {
    driver::Simulation s = driver::simulate({"llama2-7b", "dgx-h100", "zero1,gbs=512", 8, std::nullopt, std::nullopt, full, {}, {}});
    benchmark::DoNotOptimize(s.report.step_time);
  }
}
BENCHMARK(Llama2_7B_64Gpus_DataParallel)->Arg(0)->Arg(1)->ArgName("full")->Unit(benchmark::kMillisecond);

// GPT-3 175B on 1024 A100s (tp=8, pp=8, dp=16, gbs=1536, mbs=1, 1F1B):
// issue 3 asks for < 100 ms by default and < 20 s with --full; issue 16
// <= 4 s and < 500 MB with --full. full=1 replays one rank's tasks per stage
// on every rank (what `simulate --full` does), full=2 holds every rank's
// tasks (what `--full --trace` needs): the same prediction.
void Gpt3_175B_1024Gpus(benchmark::State& state) {
  for (auto _ : state) {
    driver::SimulationRequest request{"gpt3-175b", "superpod-a100",
                                      "tp=8,pp=8,dp=16,gbs=1536,mbs=1,recompute=full,attention=standard,dtype=fp16",
                                      128, std::nullopt, std::nullopt, state.range(0) != 0, {}, {}};
    request.every_rank_tasks = state.range(0) == 2;
    driver::Simulation s = driver::simulate(request);
    benchmark::DoNotOptimize(s.report.step_time);
    state.counters["tasks"] = static_cast<double>(s.tasks.tasks.size());
  }
}
BENCHMARK(Gpt3_175B_1024Gpus)->Arg(0)->ArgName("full")->Unit(benchmark::kMillisecond);
BENCHMARK(Gpt3_175B_1024Gpus)->Arg(1)->Arg(2)->ArgName("full")->Unit(benchmark::kMillisecond)->Iterations(1);

// The clusters being built now: GPT-3 175B on 131,072 H100s (16,384 nodes,
// tp 8, pp 8, dp 2048) in the default mode. Issue 16 asks for <= 1 s; at its
// start this took 513 s (295 s before routing searched from both ends).
void Gpt3_175B_131072Gpus(benchmark::State& state) {
  for (auto _ : state) {
    driver::Simulation s = driver::simulate({"gpt3-175b", "superpod-h100", "tp=8,pp=8,dp=2048,gbs=4096", 16384,
                                             std::nullopt, std::nullopt, false, {}, {}});
    benchmark::DoNotOptimize(s.report.step_time);
  }
}
BENCHMARK(Gpt3_175B_131072Gpus)->Unit(benchmark::kMillisecond)->UseRealTime();

// Issue 4: the same step with the flow-level network (concurrent collectives
// share links max-min fairly): < 10 s asked; quote the ratio to the analytic
// rows above. full=0 puts the unsimulated ranks' copies on the links,
// full=1 simulates all 1024 ranks.
void Gpt3_175B_1024Gpus_FlowNetwork(benchmark::State& state) {
  const bool full = state.range(0) != 0;
  for (auto _ : state) {
    driver::SimulationRequest request{"gpt3-175b", "superpod-a100",
                                      "tp=8,pp=8,dp=16,gbs=1536,mbs=1,recompute=full,attention=standard,dtype=fp16",
                                      128, std::nullopt, std::nullopt, full, {}, {}};
    request.network = sim::NetworkMode::kFlow;
    driver::Simulation s = driver::simulate(request);
    benchmark::DoNotOptimize(s.report.step_time);
    state.counters["events"] = static_cast<double>(s.timeline.events);
  }
}
BENCHMARK(Gpt3_175B_1024Gpus_FlowNetwork)->Arg(0)->ArgName("full")->Unit(benchmark::kMillisecond);
BENCHMARK(Gpt3_175B_1024Gpus_FlowNetwork)->Arg(1)->ArgName("full")->Unit(benchmark::kMillisecond)->Iterations(1);

// Issue 7: the whole strategy search for GPT-3 175B on 1024 A100s, gbs 1536, on all cores (< 60 s).
void Search_Gpt3_175B_1024Gpus(benchmark::State& state) {
  hw::DeviceCatalog catalog;
  model::Graph graph = model::load_workload(driver::data_dir() / "workloads" / "gpt3-175b.json");
  topo::Cluster cluster = topo::load_cluster(driver::data_dir() / "topologies" / "superpod-a100.json", catalog, {128});
  search::SearchOptions options;
  options.global_batch = 1536;
  for (auto _ : state) {
    search::SearchResult r = search::run_search(graph, cluster, options);
    state.counters["enumerated"] = static_cast<double>(r.enumerated);
    state.counters["simulated"] = static_cast<double>(r.simulated);
    state.counters["fit"] = static_cast<double>(r.ranked.size());
  }
}
BENCHMARK(Search_Gpt3_175B_1024Gpus)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace

// One whole `dtsim` process (stdout and stderr to /dev/null): its wall time,
// its peak resident memory (KB), whether it exited with 0.
struct ProcessRun {
  double seconds = 0, peak_kb = 0;
  bool ok = false;
};
ProcessRun run_dtsim(const char* command_line, char* const* envp) {
  std::vector<std::string> words{DTSIM_EXE};
  std::istringstream in(command_line);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
  ProcessRun r;
  const auto start = std::chrono::steady_clock::now();
  pid_t child = 0;
  if (posix_spawn(&child, argv[0], &quiet, nullptr, argv.data(), envp) == 0) {
    int status = 0;
    rusage usage{};
    wait4(child, &status, 0, &usage);
    r.peak_kb = static_cast<double>(usage.ru_maxrss);
    r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  posix_spawn_file_actions_destroy(&quiet);
  return r;
}

// Start-up of a short command, a whole process (`dtsim --version`): issue 16
// measured 17 ms a process, most of it OpenBLAS starting its thread pool and
// Open MPI's libraries loading for commands that use neither; OpenBLAS is now
// opened only by the commands that multiply matrices (exec/blas.hpp).
void StartUp_DtsimVersionProcess(benchmark::State& state) {
  char* no_environment[] = {nullptr};
  double seconds = 0;
  for (auto _ : state) {
    const ProcessRun r = run_dtsim("--version", no_environment);
    if (!r.ok) state.SkipWithError("dtsim --version failed");
    seconds += r.seconds;
  }
  state.counters["ratio_to_17ms"] = seconds / static_cast<double>(state.iterations()) / 17e-3;
}
BENCHMARK(StartUp_DtsimVersionProcess)->Unit(benchmark::kMillisecond)->UseRealTime();

// Issue 16's targets, each a whole `dtsim` process as a user runs it, with its
// ratio to the figure the issue measured on this machine at its start and the
// process's peak resident memory.
void Process(benchmark::State& state, const char* command_line, double at_issue_start_s) {
  double seconds = 0, peak_kb = 0;
  for (auto _ : state) {
    const ProcessRun r = run_dtsim(command_line, environ);
    if (!r.ok) state.SkipWithError("dtsim failed");
    seconds += r.seconds;
    peak_kb = std::max(peak_kb, r.peak_kb);
  }
  state.counters["ratio_to_issue_start"] = seconds / static_cast<double>(state.iterations()) / at_issue_start_s;
  state.counters["peak_MB"] = peak_kb / 1024;
}
// (A literal, so the variants below are literals too: the captures outlive static initialisation.)
#define DTSIM_GPT3_ON_SUPERPOD \
  "simulate -m gpt3-175b -c superpod-a100 --nodes 128 -s tp=8,pp=8,dp=16,gbs=1536,mbs=1,recompute=full,attention=standard,dtype=fp16"
// Issue 16 at its start: 0.37-0.42 s (target <= 50 ms).
BENCHMARK_CAPTURE(Process, gpt3_175b_1024_default, DTSIM_GPT3_ON_SUPERPOD, 0.40)->Unit(benchmark::kMillisecond)->UseRealTime();
// 16 s and 1.2 GB (target <= 4 s, < 500 MB).
BENCHMARK_CAPTURE(Process, gpt3_175b_1024_full, DTSIM_GPT3_ON_SUPERPOD " --full", 16.0)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
// 14.6 s (target <= 8 s).
BENCHMARK_CAPTURE(Process, gpt3_175b_1024_flow_full, DTSIM_GPT3_ON_SUPERPOD " --full --network flow", 14.6)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
// 19-31 s on 2 cores (target <= 10 s); the lower end.
BENCHMARK_CAPTURE(Process, search_gpt3_175b_1024, "search -m gpt3-175b -c superpod-a100 --nodes 128 --gbs 1536", 19.0)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
// 3 min 14 s (target <= 30 s).
BENCHMARK_CAPTURE(Process, plan_llama3_70b_8k_16k, "plan --model llama3-70b --tokens 15e12 --devices H100-SXM --gpus 8192,16384", 194.0)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
// 513 s (target <= 1 s).
BENCHMARK_CAPTURE(Process, gpt3_175b_131072_default,
                  "simulate -m gpt3-175b -c superpod-h100 --nodes 16384 -s tp=8,pp=8,dp=2048,gbs=4096", 513.0)
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
#undef DTSIM_GPT3_ON_SUPERPOD

BENCHMARK_MAIN();
