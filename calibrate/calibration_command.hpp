#pragma once
/// The dtsim-calibrate command, shared with `dtsim validate` (which
/// calibrates first when it is given no profile).
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include "calibrate/cpu_calibration.hpp"

namespace dtsim::calibrate {

struct CommandOptions {
  std::string out = "profile.json";
  int ranks = 2;
  std::string gemm_sizes = "32,128,512,2048";
  /// "auto" as the largest: streaming_limit of this machine's cache and memory.
  std::string stream_sizes = "4KiB:auto";
  std::string message_sizes = "1KiB:16MiB";
  bool quick = false;
  std::string backend = "cpu";  ///< cpu (BLAS and MPI on this machine's cores) or cuda (its GPUs)
  std::string dtypes = "bf16,fp16,tf32,fp8";  ///< cuda: the GEMM grids' dtypes
  bool gemm_sizes_given = false;  ///< cuda: otherwise the GPU's grid, not the CPU's
  std::string workload_tp = "1,2,4,8";  ///< cuda: the bundled workloads' GEMM calls under these tp ("" for none)
};

/// The largest streaming size "auto" stands for: the first x4 step from 4 KiB
/// at least twice the last-level cache and at least 64 MiB, so that the
/// tables' last point streams from memory (past it a table scales that
/// point's time), and no larger than `ranks` ranks' kernel buffers (1.5x
/// the size each) fit in half the available memory, down to 64 MiB. A
/// cache of 0 (unknown) gives 64 MiB.
core::Bytes streaming_limit(core::Bytes last_level_cache, core::Bytes available_memory, int ranks);

/// The tp list of --workload-tp; throws InputError.
std::vector<int> workload_tps(const CommandOptions& options);

void add_options(CLI::App& app, CommandOptions& options);

/// Checks the options and turns them into calibration settings; throws InputError.
CalibrationOptions to_calibration(const CommandOptions& options);

/// Calibrates on `world` and returns the profile (complete on rank 0).
nlohmann::json calibrate_profile(const CalibrationOptions& options, const std::string& arguments, MPI_Comm world);

/// Calibrates, writes the profile and prints a summary on rank 0.
int run_calibration(const CommandOptions& options, const std::string& arguments, MPI_Comm world, std::ostream& out);

/// dtsim-calibrate --backend cuda: the GPU's profile, without MPI (the
/// machine's GPUs are driven from this one process).
int run_gpu_calibration(const CommandOptions& options, const std::string& arguments, std::ostream& out);

/// One line per measured family: best GEMM rate, streaming bandwidth, collective fits.
void print_summary(const nlohmann::json& profile, std::ostream& out);

}  // namespace dtsim::calibrate
