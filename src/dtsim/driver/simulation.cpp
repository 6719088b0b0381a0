#include "dtsim/driver/simulation.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "dtsim/core/data_dir.hpp"
#include "dtsim/core/host_memory.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/hw/profile.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/plan/lower.hpp"
#include "dtsim/plan/parameter_server.hpp"
#include "dtsim/sim/replay.hpp"
#include "dtsim/topo/cluster_loader.hpp"

namespace dtsim::driver {

std::filesystem::path data_dir() { return core::data_dir(); }

std::vector<std::string> bundled(const std::string& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir() / folder, ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::filesystem::path resolve_input(const std::string& name_or_path, const std::string& folder, const std::string& flag) {
  if (std::filesystem::is_regular_file(name_or_path)) return name_or_path;
  std::filesystem::path bundled_file = data_dir() / folder / (name_or_path + ".json");
  if (std::filesystem::is_regular_file(bundled_file)) return bundled_file;
  std::string choices;
  for (const std::string& n : bundled(folder)) choices += (choices.empty() ? "" : ", ") + n;
  throw core::InputError(flag, "", fmt::format("no file \"{}\" and no bundled {} of that name; bundled: {}",
                                               name_or_path, folder, choices));
}

std::map<std::pair<net::CollectiveOp, int>, net::CalibratedCollective> measured_collectives(const hw::Profile& profile) {
  std::map<std::pair<net::CollectiveOp, int>, net::CalibratedCollective> out;
  for (const hw::MeasuredCollective& c : profile.collectives) {
    // parse_profile admitted only these names; ring_exchange is not one the CLI offers.
    const auto op = c.op == "ring_exchange" ? net::CollectiveOp::kRingExchange : *net::parse_collective_op(c.op);
    out[{op, c.ranks}] = {c.fit, c.medians};
  }
  return out;
}

// The cluster's own device, from the catalog or described in its file.
hw::Profile load_checked_profile(const std::string& path, const topo::Cluster& cluster) {
  hw::Profile profile = hw::load_profile(path);
  const hw::Device& device = cluster.device();
  if (!hw::same_device_name(profile.device, device.name)) {
    throw core::InputError(path, "/device", fmt::format("expected a profile of the cluster's {}, got \"{}\"",
                                                       device.name, profile.device));
  }
  if (device.needs_profile && (!profile.figures || !profile.kernels)) {
    throw core::InputError(path, "/kernels", fmt::format("a profile of the {} needs device_figures and kernels "
                                                         "(dtsim-calibrate writes both)", device.name));
  }
  return profile;
}

std::optional<hw::Profile> apply_profile(topo::Cluster& cluster, const std::optional<std::string>& path) {
  if (!path) {
    if (cluster.device().needs_profile) {
      throw core::InputError("--profile", "", fmt::format("the {} device of cluster {} has no datasheet figures; measure "
                                                          "them with dtsim-calibrate and pass its profile",
                                                          cluster.device().name, cluster.name()));
    }
    return std::nullopt;
  }
  hw::Profile profile = load_checked_profile(*path, cluster);
  cluster.set_device(hw::apply_figures(cluster.device(), profile));
  return profile;
}

Simulation simulate(const SimulationRequest& request) {
  hw::DeviceCatalog catalog;
  model::Graph graph = model::load_workload(resolve_input(request.model, "workloads", "--model"), {request.seq_len});
  if (request.nodes && *request.nodes < 1) throw core::InputError("--nodes", "", "expected a positive node count");
  topo::Cluster cluster = topo::load_cluster(resolve_input(request.cluster, "topologies", "--cluster"), catalog,
                                             {request.nodes});
  std::optional<hw::Profile> profile = apply_profile(cluster, request.profile);
  Prediction p = predict(graph, cluster, request, profile ? &*profile : nullptr);
  return Simulation{std::move(graph), std::move(cluster), p.strategy, std::move(p.tasks), std::move(p.timeline),
                    std::move(p.report), std::move(p.costs), std::move(profile)};
}

std::string cluster_device(const SimulationRequest& request) {
  hw::DeviceCatalog catalog;
  return topo::load_cluster(resolve_input(request.cluster, "topologies", "--cluster"), catalog, {request.nodes}).device().name;
}

int resolve_world(const SimulationRequest& request) {
  hw::DeviceCatalog catalog;
  model::Graph graph = model::load_workload(resolve_input(request.model, "workloads", "--model"), {request.seq_len});
  topo::Cluster cluster = topo::load_cluster(resolve_input(request.cluster, "topologies", "--cluster"), catalog,
                                             {request.nodes});
  if (cluster.device().needs_profile) {
    // Only the rank count is wanted: any dtype passes until a profile says what the device does.
    hw::Device device = cluster.device();
    for (auto& peak : device.peak) peak = core::FlopsPerSecond(1);
    cluster.set_device(device);
  }
  return plan::resolve(plan::parse_strategy(request.strategy), graph, cluster).world;
}

Prediction predict(const model::Graph& graph, const topo::Cluster& cluster, const SimulationRequest& request) {
  std::optional<hw::Profile> profile;
  if (request.profile) profile = load_checked_profile(*request.profile, cluster);
  return predict(graph, cluster, request, profile ? &*profile : nullptr);
}

namespace {

// Refuses, before lowering, a plan this machine cannot hold or would take
// minutes over: it says what the plan would need (tasks, memory, time) and
// what to change. The lowered graph has a few tasks per layer, micro-batch
// and phase on every lowered rank (one per pipeline stage, or all with
// --full and every rank's tasks), each about 200 bytes with its span, cost,
// dependencies and events; with spmd ranks every other rank replays them at
// about 12 bytes a task. The figures are measured on GPT-3 175B with --full
// on 1024 GPUs (README, "Performance"). 10^8 tasks is past any real plan (a
// 16k-GPU Llama-3-405B step lowers to about 10^5) and would take minutes.
void check_plan_size(const model::Graph& graph, const plan::ResolvedStrategy& strategy, bool lowers_every_rank,
                     bool replays_every_rank, std::optional<core::Bytes> memory_budget) {
  constexpr double kTasksPerLayerStep = 6, kBytesPerTask = 200, kBytesPerReplayedTask = 12, kSecondsPerTask = 1.1e-6,
                   kMaxTasks = 1e8;
  const double lowered_ranks = lowers_every_rank ? strategy.world : strategy.s.pp;
  const double replayed_ranks = lowers_every_rank || replays_every_rank ? strategy.world : strategy.s.pp;
  const bool replayed_copies = replays_every_rank && !lowers_every_rank;
  const double layers_per_rank = static_cast<double>(graph.layers.size()) / strategy.s.pp;
  const double per_rank = layers_per_rank * strategy.micro_batches * strategy.s.vpp * kTasksPerLayerStep;
  const double tasks = replayed_ranks * per_rank;
  const core::Bytes needed(lowered_ranks * per_rank * kBytesPerTask + (replayed_copies ? tasks * kBytesPerReplayedTask : 0.0));
  const core::Bytes budget = memory_budget.value_or(core::meminfo("MemAvailable:"));
  const bool too_big = budget.value() > 0 && needed > budget;
  if (tasks <= kMaxTasks && !too_big) return;
  const std::string advice = replayed_ranks > strategy.s.pp ? "drop --full (one rank per stage is simulated, the others are its copies)"
                                                            : "a smaller gbs or a larger mbs";
  throw core::InputError("--strategy", "/gbs", fmt::format(
      "the plan would hold about {:.2g} tasks for {} micro-batches on {:.0f} {} ranks: about {:.1f} GiB and {:.0f} s; "
      "{}: {}", tasks, strategy.micro_batches, replayed_ranks, replayed_copies ? "replayed" : "lowered",
      needed.value() / 1073741824.0, tasks * kSecondsPerTask,
      too_big ? fmt::format("this machine has {:.1f} GiB available", budget.value() / 1073741824.0)
              : fmt::format("dtsim refuses more than {:.0g} tasks", kMaxTasks),
      advice));
}

}  // namespace

Prediction predict(const model::Graph& graph, const topo::Cluster& cluster, const SimulationRequest& request,
                   const hw::Profile* profile) {
  plan::ResolvedStrategy strategy = plan::resolve(plan::parse_strategy(request.strategy), graph, cluster);

  hw::Efficiency efficiency = profile ? profile->efficiency : hw::Efficiency{};
  const WhatIf& w = request.what_if;
  hw::Device device = cluster.device();
  for (auto& peak : device.peak) peak = peak * w.compute;
  device.hbm_bandwidth = device.hbm_bandwidth * w.hbm;
  efficiency.gemm_overhead = efficiency.gemm_overhead * w.latency;
  efficiency.memory_overhead = efficiency.memory_overhead * w.latency;
  // Which kernel figures: a profile's own, or none when it gives roofline
  // fractions; else the device's bundled ones. What-if studies scale them.
  if (profile && profile->kernel_model) device.kernel_figures = profile->kernel_model;
  if (profile && profile->has_efficiency && !profile->kernel_model) device.kernel_figures.reset();
  if (device.kernel_figures && (w.compute != 1.0 || w.latency != 1.0)) {
    auto scaled = std::make_shared<hw::KernelFigures>(*device.kernel_figures);
    for (hw::GemmAnchor& a : scaled->anchors) a.rate = a.rate * w.compute;
    scaled->gemm_launch = scaled->gemm_launch * w.latency;
    scaled->memory_launch = scaled->memory_launch * w.latency;
    device.kernel_figures = scaled;
  }
  hw::CostModel cost_model(device, efficiency, profile ? profile->kernels : nullptr, strategy.s.attention_kernel);
  if (request.own_executor) cost_model.set_layout(hw::GemmLayout::kExecutor);
  net::NetworkOptions network_options;
  if (profile) network_options.measured = measured_collectives(*profile);
  network_options.algorithm = *net::parse_algorithm(strategy.s.collective);
  // A strategy's algorithm falls back to a ring where it does not apply (NCCL
  // does too), but one the cluster cannot run anywhere is a mistake.
  if ((network_options.algorithm == net::Algorithm::kNvls && !cluster.nvls()) ||
      (network_options.algorithm == net::Algorithm::kSharp && !cluster.sharp())) {
    throw core::InputError("--strategy", "/collective", fmt::format("cluster {} cannot run {}: it needs {}", cluster.name(),
                                                                   strategy.s.collective,
                                                                   net::requirement(network_options.algorithm)));
  }
  network_options.protocol = *net::parse_protocol(strategy.s.protocol);
  network_options.intra_bandwidth_scale = w.intra_node;
  network_options.inter_bandwidth_scale = w.inter_node;
  network_options.latency_scale = w.latency;
  net::Network network(cluster, network_options);

  if (!request.worker_speed.empty()) {
    if (static_cast<int>(request.worker_speed.size()) != strategy.world) {
      throw core::InputError("--worker-speed", "", fmt::format("expected {} speeds (one per GPU used), got {}",
                                                               strategy.world, request.worker_speed.size()));
    }
    for (double v : request.worker_speed) {
      if (!(v > 0)) throw core::InputError("--worker-speed", "", fmt::format("expected positive speeds, got {}", v));
    }
  }
  const bool full = request.full || !request.worker_speed.empty();
  // Every rank of a stage runs the same tasks on its own groups: --full need
  // not hold them all (issue 16), unless they are to be shown or a rank runs
  // at its own speed.
  const bool spmd = full && request.worker_speed.empty() && !request.every_rank_tasks;
  check_plan_size(graph, strategy, full && !spmd, full, request.memory_budget);
  plan::TaskGraph tasks = strategy.s.ps != 0 ? plan::lower_parameter_server(graph, strategy, cluster)
                                             : plan::lower(graph, strategy, cluster, {full && !spmd, spmd});
  sim::TaskCosts costs = sim::cost_tasks(tasks, cost_model, network, request.network);
  if (!strategy.s.contention) costs.contention = {};
  const core::Seconds host_launch = strategy.s.host_launch.value_or(cluster.host().kernel_launch);
  costs.host_launch = core::to_nanoseconds(host_launch);
  if (!request.worker_speed.empty()) {
    costs.rank_speed.assign(static_cast<std::size_t>(tasks.world), 1.0);
    std::copy(request.worker_speed.begin(), request.worker_speed.end(), costs.rank_speed.begin());
  }
  plan::Timeline timeline = sim::replay(tasks, costs);

  report::RunInfo info;
  info.model = graph.name;
  info.cluster = cluster.name();
  info.device = cluster.device().name;
  if (cluster.device().concurrent_streams) {  // a CPU rank is its own host and launches nothing
    info.host = cluster.host().name;
    info.host_launch = host_launch;
  }
  info.strategy = request.strategy;
  info.nodes = (strategy.world + cluster.gpus_per_node() - 1) / cluster.gpus_per_node();
  info.global_batch = strategy.s.gbs;
  info.seq_len = graph.seq_len;
  info.seq_len_source = graph.seq_len_source;
  info.parameters = graph.parameter_count();
  info.peak_per_gpu = cluster.device().peak_for(strategy.s.dtype);
  info.memory_capacity = cluster.device().hbm_capacity;
  info.asynchronous = strategy.s.ps != 0 && !strategy.s.sync;
  report::Report report = report::analyze(tasks, timeline, info, strategy.micro_batches);
  if (tasks.ps_shards > 0) report.parameter_server = report::parameter_server_stats(tasks, timeline, strategy.s.sync);
  return Prediction{strategy, std::move(tasks), std::move(timeline), std::move(report), std::move(costs)};
}

}  // namespace dtsim::driver
