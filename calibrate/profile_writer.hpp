#pragma once
/// What a calibration measured, and the profile (`dtsim.profile/1`) written
/// from it: raw per-iteration times, medians, and the fits hw::parse_profile reads.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/harness.hpp"
#include "dtsim/core/units.hpp"
#include "dtsim/exec/reference_probe.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/hw/kernel_calls.hpp"

namespace dtsim::calibrate {

struct GemmPoint {
  std::int64_t m = 0, n = 0, k = 0;
  Series series;
};

/// A GEMM call timed whole, as the executor runs it: `count` GEMMs of one shape.
struct GemmCallPoint {
  hw::KernelCall call;
  hw::Dtype dtype = hw::Dtype::kFp32;  ///< the dtype the plan prices it in (the CPU runs every GEMM in fp32)
  Series series;
};

struct SizePoint {
  core::Bytes bytes;
  Series series;
};

struct CollectivePoints {
  std::string op;  ///< net::to_string name ("all_reduce")
  int ranks = 0;
  std::vector<SizePoint> points;
};

struct Measurements {
  std::vector<GemmPoint> gemm;
  std::vector<GemmCallPoint> gemm_calls;  ///< a plan's own calls (dtsim validate), looked up before the grid
  std::vector<SizePoint> memory[3];  ///< by hw::kMemoryFamilies: copy, elementwise, reduction
  std::vector<CollectivePoints> collectives;
  core::Bytes machine_memory;        ///< RAM of the machine
  /// The least share of a core any rank got over the whole calibration (as exec::Execution::cpu_share).
  double cpu_share = 1.0;
  /// exec::time_reference_probe before and after the measurements: a run
  /// compares its own probe with these to see the machine at another speed.
  exec::ProbeTimes probe_before, probe_after;
};

/// Where and how it was measured: machine, CPU model, cores, RAM, BLAS, MPI,
/// compiler, dtsim version, the arguments, the UTC date, and the rank count.
nlohmann::json collect_provenance(const std::string& arguments, int ranks);

/// The profile of the local CPU ("device": "CPU"): device figures (best GEMM
/// rate, streaming bandwidth of the largest copy, RAM), the kernel tables
/// (the GEMM grid, any whole calls, the streaming kernels), and a
/// latency-bandwidth fit per collective and rank count.
/// The provenance gets `cpu_share` from the measurements.
nlohmann::json to_profile(const Measurements& measured, const nlohmann::json& provenance);

}  // namespace dtsim::calibrate
