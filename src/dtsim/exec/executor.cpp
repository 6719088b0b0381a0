#include "dtsim/exec/executor.hpp"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "dtsim/exec/activation_memory.hpp"
#include "dtsim/exec/cpu_kernels.hpp"
#include "dtsim/exec/mpi_collectives.hpp"
#include "dtsim/hw/kernel_calls.hpp"

namespace dtsim::exec {
namespace {

using Clock = std::chrono::steady_clock;

std::int64_t to_ns(Clock::duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }

}  // namespace

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

Execution execute(const plan::TaskGraph& graph, const plan::Timeline& order, MPI_Comm world,
                  const ExecuteOptions& options) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  if (graph.world != size || static_cast<int>(graph.simulated.size()) != size || graph.ps_shards != 0) {
    throw std::invalid_argument("execute: the graph needs every rank lowered, the world's size, no parameter servers");
  }
  if (options.steps < 1 || options.warmup_steps < 0) throw std::invalid_argument("execute: steps must be positive");

  std::vector<std::uint32_t> mine;
  for (std::uint32_t id = 0; id < graph.tasks.size(); ++id) {
    if (graph.tasks[id].rank == rank) mine.push_back(id);
  }
  std::stable_sort(mine.begin(), mine.end(), [&](std::uint32_t a, std::uint32_t b) {
    return order.spans[a].start < order.spans[b].start;
  });

  CpuKernels kernels;
  std::vector<std::vector<hw::KernelCall>> calls_of_kernel(graph.kernels.size());
  for (std::size_t k = 0; k < graph.kernels.size(); ++k) {
    for (const hw::OpWork& w : graph.kernels[k].ops) {
      for (const hw::KernelCall& c : hw::kernel_calls(w)) {
        kernels.reserve(c);
        calls_of_kernel[k].push_back(c);
      }
    }
  }
  MpiCollectives comm(graph, world);

  const plan::RankInfo& info = graph.simulated[static_cast<std::size_t>(graph.simulated_index(rank))];
  const auto static_bytes = static_cast<std::size_t>((info.memory.params + info.memory.grads + info.memory.optimizer).value());
  std::vector<char> weights_and_state(static_bytes, 1);  // touched: resident, as on a device
  ActivationMemory activations;

  const int total_steps = options.warmup_steps + options.steps;
  std::vector<std::vector<plan::TaskSpan>> spans(static_cast<std::size_t>(options.steps));
  std::vector<double> makespans, shares;
  std::size_t peak_activations = 0;
  for (int step = 0; step < total_steps; ++step) {
    std::vector<plan::TaskSpan> step_spans(mine.size());
    activations.reset_peak();
    MPI_Barrier(world);
    const Clock::time_point t0 = Clock::now();
    const double cpu0 = process_cpu_seconds();
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const plan::Task& task = graph.tasks[mine[i]];
      step_spans[i].start = {to_ns(Clock::now() - t0)};
      activations.allocate(graph.alloc_at_start(task));
      if (task.kind == plan::TaskKind::kCompute) {
        for (const hw::KernelCall& c : calls_of_kernel[static_cast<std::size_t>(task.payload)]) kernels.run(c);
      } else {
        comm.run(task);
      }
      activations.release(graph.free_at_end(task));
      step_spans[i].end = {to_ns(Clock::now() - t0)};
    }
    comm.complete_sends();
    double local = std::chrono::duration<double>(Clock::now() - t0).count(), slowest = 0;
    double share = local > 0 ? (process_cpu_seconds() - cpu0) / local : 1.0, least = 1.0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, world);
    MPI_Allreduce(&share, &least, 1, MPI_DOUBLE, MPI_MIN, world);
    if (step >= options.warmup_steps) {
      spans[static_cast<std::size_t>(step - options.warmup_steps)] = std::move(step_spans);
      makespans.push_back(slowest);
      shares.push_back(least);
      peak_activations = std::max(peak_activations, activations.peak());
    }
  }

  // Every rank saw the same makespans, so all pick the same median step.
  std::vector<std::size_t> by_time(makespans.size());
  std::iota(by_time.begin(), by_time.end(), 0);
  std::sort(by_time.begin(), by_time.end(), [&](std::size_t a, std::size_t b) { return makespans[a] < makespans[b]; });
  const std::size_t median = by_time[by_time.size() / 2];

  Execution out;
  for (double t : makespans) out.step_times.emplace_back(t);
  out.timeline.makespan = {static_cast<std::int64_t>(makespans[median] * 1e9)};
  out.cpu_share = shares[median];
  out.timeline.spans.assign(graph.tasks.size(), {});
  out.timeline.memory.assign(static_cast<std::size_t>(size), {});

  // Gather (task id, start, end) triples and each rank's memory to rank 0.
  std::vector<std::int64_t> triples;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const plan::TaskSpan& s = spans[median][i];
    triples.insert(triples.end(), {static_cast<std::int64_t>(mine[i]), s.start.count, s.end.count});
  }
  const int count = static_cast<int>(triples.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world);
  std::partial_sum(counts.begin(), counts.end() - 1, offsets.begin() + 1);
  std::vector<std::int64_t> all(rank == 0 ? static_cast<std::size_t>(offsets.back() + counts.back()) : 0);
  MPI_Gatherv(triples.data(), count, MPI_INT64_T, all.data(), counts.data(), offsets.data(), MPI_INT64_T, 0, world);
  const std::vector<std::int64_t>& source = rank == 0 ? all : triples;
  for (std::size_t i = 0; i + 2 < source.size(); i += 3) {
    out.timeline.spans[static_cast<std::size_t>(source[i])] = {{source[i + 1]}, {source[i + 2]}};
  }

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  // The GEMM operands and MPI's send and receive buffers stand in for
  // tensors the plan's weights and activations count: kept apart, as the
  // GPU backend keeps its kernels' operand buffers.
  const double memory[3] = {static_cast<double>(static_bytes + peak_activations), static_cast<double>(usage.ru_maxrss) * 1024.0,
                            kernels.scratch_bytes().value() + comm.buffer_bytes().value()};
  std::vector<double> gathered(3 * static_cast<std::size_t>(size));
  MPI_Allgather(memory, 3, MPI_DOUBLE, gathered.data(), 3, MPI_DOUBLE, world);
  for (int r = 0; r < size; ++r) {
    const std::size_t at = 3 * static_cast<std::size_t>(r);
    out.timeline.peak_memory.emplace_back(gathered[at]);
    out.max_rss.emplace_back(gathered[at + 1]);
    out.scratch_bytes = std::max(out.scratch_bytes, core::Bytes(gathered[at + 2]));
  }
  return out;
}

}  // namespace dtsim::exec
