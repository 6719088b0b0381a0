// dtsim-calibrate: measures the local machine's kernels and MPI collectives
// and writes a profile (dtsim.profile/1) that every dtsim command takes with
// --profile. Started from a shell it re-executes itself under mpirun.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include "calibrate/calibration_command.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/exec/launch.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dtsim-calibrate: measure GEMMs, memory-bound kernels and MPI collectives on this machine"};
  dtsim::calibrate::CommandOptions options;
  dtsim::calibrate::add_options(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    (void)dtsim::calibrate::to_calibration(options);  // bad options: one line here, not one per rank
  } catch (const dtsim::core::InputError& e) {
    std::fprintf(stderr, "dtsim-calibrate: %s\n", e.what());
    return 2;
  }
  std::vector<std::string> args(argv, argv + argc);
  if (options.backend == "cuda") {
    options.gemm_sizes_given = app.count("--gemm-sizes") > 0;
    std::string joined;
    for (std::size_t i = 1; i < args.size(); ++i) joined += (i > 1 ? " " : "") + args[i];
    try {
      return dtsim::calibrate::run_gpu_calibration(options, joined, std::cout);
    } catch (const dtsim::core::InputError& e) {
      std::fprintf(stderr, "dtsim-calibrate: %s\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dtsim-calibrate: %s\n", e.what());
      return 3;
    }
  }
  if (options.ranks > 1 && !dtsim::exec::launched_by_mpi()) {
    try {
      dtsim::exec::relaunch_with_mpirun(options.ranks, args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dtsim-calibrate: %s\n", e.what());
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    std::string joined;
    for (std::size_t i = 1; i < args.size(); ++i) joined += (i > 1 ? " " : "") + args[i];
    status = dtsim::calibrate::run_calibration(options, joined, MPI_COMM_WORLD, std::cout);
  } catch (const dtsim::core::InputError& e) {
    std::fprintf(stderr, "dtsim-calibrate: %s\n", e.what());
    status = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsim-calibrate: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Finalize();
  return status;
}
