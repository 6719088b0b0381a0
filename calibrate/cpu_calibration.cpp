#include "calibrate/cpu_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dtsim/core/host_memory.hpp"
#include "dtsim/exec/cpu_kernels.hpp"
#include "dtsim/exec/executor.hpp"
#include "dtsim/exec/mpi_collectives.hpp"
#include "dtsim/exec/reference_probe.hpp"

namespace dtsim::calibrate {
namespace {

// Every (m, n, k) of the grid, timed as time_gemm_calls times a plan's calls.
void gemm_grid(MPI_Comm world, const CalibrationOptions& o, Measurements& out) {
  std::vector<GemmCallPoint> points;
  for (std::int64_t m : o.gemm_sizes) {
    for (std::int64_t n : o.gemm_sizes) {
      for (std::int64_t k : o.gemm_sizes) points.push_back({{hw::KernelFamily::kGemm, {m, n, k, 1}, 1, core::Bytes(0)}, hw::Dtype::kFp32, {}});
    }
  }
  for (GemmCallPoint& p : time_gemm_calls(world, points, o.timing)) {
    out.gemm.push_back({p.call.gemm.m, p.call.gemm.n, p.call.gemm.k, std::move(p.series)});
  }
}

void streaming(MPI_Comm world, const CalibrationOptions& o, Measurements& out) {
  exec::CpuKernels kernels;
  for (std::size_t f = 0; f < 3; ++f) {
    const hw::KernelFamily family = hw::kMemoryFamilies[f];
    for (core::Bytes bytes : size_steps(o.min_stream, o.max_stream, 4)) {
      kernels.reserve({family, {}, 1, bytes});
      Series s = time_on_all_ranks(world, [&] { kernels.stream(family, bytes); }, o.timing);
      if (!kernels.check_stream(family, bytes)) {
        throw std::runtime_error(fmt::format("the {} kernel over {} bytes gave a wrong result", hw::to_string(family),
                                             bytes.value()));
      }
      out.memory[f].push_back({bytes, std::move(s)});
    }
  }
}

// One synthetic TaskGraph per rank count, with a call per (op, size), run
// through exec::MpiCollectives: calibration times the calls `dtsim run` makes.
void collectives(MPI_Comm world, const CalibrationOptions& o, Measurements& out) {
  int size = 1;
  MPI_Comm_size(world, &size);
  std::vector<int> counts;
  for (int n = 2; n < size; n *= 2) counts.push_back(n);
  if (size >= 2) counts.push_back(size);
  const plan::CommOp ops[] = {plan::CommOp::kAllReduce, plan::CommOp::kReduceScatter, plan::CommOp::kAllGather,
                              plan::CommOp::kAllToAll, plan::CommOp::kRingExchange, plan::CommOp::kSendRecv};
  const std::vector<core::Bytes> sizes = size_steps(o.min_message, o.max_message, 4);
  int world_rank = 0;
  MPI_Comm_rank(world, &world_rank);
  for (int n : counts) {
    plan::TaskGraph g;
    g.world = size;
    for (const plan::CommOp op : ops) {
      const bool pair = op == plan::CommOp::kSendRecv;
      if (pair && n != 2) continue;
      plan::CommGroup group{plan::GroupKind::kDp, {}};
      for (int r = 0; r < n; ++r) group.ranks.push_back(r);
      g.groups.push_back(group);
      for (core::Bytes bytes : sizes) g.calls.push_back({op, static_cast<int>(g.groups.size() - 1), bytes});
    }
    exec::MpiCollectives comm(g, world);
    MPI_Comm members = MPI_COMM_NULL;
    MPI_Comm_split(world, world_rank < n ? 0 : MPI_UNDEFINED, world_rank, &members);
    std::size_t call = 0;
    for (std::size_t gi = 0; gi < g.groups.size(); ++gi) {
      const plan::CommOp op = g.calls[call].op;
      CollectivePoints points{std::string(to_string(op)), n, {}};
      for (core::Bytes bytes : sizes) {
        plan::Task task;
        task.kind = plan::TaskKind::kComm;
        task.payload = static_cast<int>(call++);
        task.phase = plan::Phase::kForward;
        if (members == MPI_COMM_NULL) continue;  // ranks beyond n wait at the next split
        Series s = time_on_all_ranks(members, [&] {
          comm.run(task);
          comm.complete_sends();
        }, o.timing);
        // Every rank contributes ones: a sum over n ranks is n, a copy is 1.
        const float expect = op == plan::CommOp::kAllReduce || op == plan::CommOp::kReduceScatter ? static_cast<float>(n) : 1.0f;
        const bool receives = !(op == plan::CommOp::kSendRecv && world_rank != 1);
        if (receives && comm.first_received() != expect) {
          throw std::runtime_error(fmt::format("{} over {} ranks of {} bytes: received {}, expected {}", to_string(op),
                                               n, bytes.value(), comm.first_received(), expect));
        }
        points.points.push_back({bytes, std::move(s)});
      }
      if (!points.points.empty()) out.collectives.push_back(std::move(points));
    }
    if (members != MPI_COMM_NULL) MPI_Comm_free(&members);
    MPI_Barrier(world);
  }
}

}  // namespace

// Two passes of opposite order, each call keeping the pass with the lower
// median. On a shared machine a neighbour can slow a second or two of the
// grid while the reference probes before and after it see nothing (the loop
// test saw a table 46% slow between steady probes); the other pass reaches
// those points at another moment.
std::vector<GemmCallPoint> time_gemm_calls(MPI_Comm world, std::vector<GemmCallPoint> calls, const TimingOptions& timing) {
  exec::CpuKernels kernels;
  for (const GemmCallPoint& c : calls) kernels.reserve(c.call);
  auto time_call = [&](GemmCallPoint& c) {
    Series s = time_on_all_ranks(world, [&] { kernels.run(c.call); }, timing);
    if (kernels.check_gemm(c.call.gemm) > 1e-3) {
      throw std::runtime_error(fmt::format("GEMM {}x{}x{} (x{}) gave a wrong result", c.call.gemm.m, c.call.gemm.n,
                                           c.call.gemm.k, c.call.count));
    }
    if (c.series.times.empty() || s.median() < c.series.median()) c.series = std::move(s);
  };
  for (GemmCallPoint& c : calls) time_call(c);
  for (auto c = calls.rbegin(); c != calls.rend(); ++c) time_call(*c);
  return calls;
}

void time_stream_calls_past_the_tables(MPI_Comm world, const std::vector<hw::KernelCall>& calls,
                                       const TimingOptions& timing, Measurements& out) {
  struct Point {
    std::size_t family;
    core::Bytes bytes;
    Series series;
  };
  std::vector<Point> points;
  for (const hw::KernelCall& c : calls) {
    const auto* family = std::find(std::begin(hw::kMemoryFamilies), std::end(hw::kMemoryFamilies), c.family);
    if (family == std::end(hw::kMemoryFamilies)) continue;
    const auto f = static_cast<std::size_t>(family - std::begin(hw::kMemoryFamilies));
    const bool past = out.memory[f].empty() || c.bytes > out.memory[f].back().bytes;
    const bool seen = std::any_of(points.begin(), points.end(), [&](const Point& p) { return p.family == f && p.bytes == c.bytes; });
    if (past && !seen) points.push_back({f, c.bytes, {}});
  }
  exec::CpuKernels kernels;
  for (const Point& p : points) kernels.reserve({hw::kMemoryFamilies[p.family], {}, 1, p.bytes});
  auto time_point = [&](Point& p) {
    const hw::KernelFamily family = hw::kMemoryFamilies[p.family];
    Series s = time_on_all_ranks(world, [&] { kernels.stream(family, p.bytes); }, timing);
    if (!kernels.check_stream(family, p.bytes)) {
      throw std::runtime_error(fmt::format("the {} kernel over {} bytes gave a wrong result", hw::to_string(family),
                                           p.bytes.value()));
    }
    if (p.series.times.empty() || s.median() < p.series.median()) p.series = std::move(s);
  };
  for (Point& p : points) time_point(p);
  for (auto p = points.rbegin(); p != points.rend(); ++p) time_point(*p);
  for (Point& p : points) out.memory[p.family].push_back({p.bytes, std::move(p.series)});
  for (std::vector<SizePoint>& table : out.memory) {
    std::sort(table.begin(), table.end(), [](const SizePoint& a, const SizePoint& b) { return a.bytes < b.bytes; });
  }
}

std::vector<core::Bytes> size_steps(core::Bytes first, core::Bytes last, double factor) {
  std::vector<core::Bytes> out;
  for (double b = first.value(); b <= last.value() * 1.0001; b *= factor) out.emplace_back(std::round(b));
  return out;
}

Measurements calibrate_cpu(MPI_Comm world, const CalibrationOptions& o) {
  exec::use_one_blas_thread();
  Measurements out;
  out.machine_memory = core::meminfo("MemTotal:");
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = exec::process_cpu_seconds();
  out.probe_before = exec::time_reference_probe(world);
  gemm_grid(world, o, out);
  streaming(world, o, out);
  if (o.collectives) collectives(world, o, out);
  out.probe_after = exec::time_reference_probe(world);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double share = wall > 0 ? (exec::process_cpu_seconds() - cpu0) / wall : 1.0;
  MPI_Allreduce(&share, &out.cpu_share, 1, MPI_DOUBLE, MPI_MIN, world);
  return out;
}

}  // namespace dtsim::calibrate
