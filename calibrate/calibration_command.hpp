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
  std::string stream_sizes = "4KiB:64MiB";
  std::string message_sizes = "1KiB:16MiB";
  bool quick = false;
};

void add_options(CLI::App& app, CommandOptions& options);

/// Checks the options and turns them into calibration settings; throws InputError.
CalibrationOptions to_calibration(const CommandOptions& options);

/// Calibrates on `world` and returns the profile (complete on rank 0).
nlohmann::json calibrate_profile(const CalibrationOptions& options, const std::string& arguments, MPI_Comm world);

/// Calibrates, writes the profile and prints a summary on rank 0.
int run_calibration(const CommandOptions& options, const std::string& arguments, MPI_Comm world, std::ostream& out);

/// One line per measured family: best GEMM rate, streaming bandwidth, collective fits.
void print_summary(const nlohmann::json& profile, std::ostream& out);

}  // namespace dtsim::calibrate
