#pragma once
/// Starting the MPI ranks: a command that needs n ranks and was started by
/// hand re-executes itself under `mpirun -n n`, so that `dtsim run` and
/// `dtsim-calibrate` work from a plain shell as well as from a launcher.
#include <filesystem>
#include <string>
#include <vector>

namespace dtsim::exec {

/// Whether an MPI launcher (mpirun, mpiexec, srun) started this process.
bool launched_by_mpi();

/// The mpirun command line that runs `args` (args[0] is replaced by this
/// program's path) on `ranks` ranks, --quiet (no banner after a rank's own
/// error line), --allow-run-as-root for root,
/// --oversubscribe without core binding when there are fewer cores than ranks.
std::vector<std::string> mpirun_command(int ranks, const std::vector<std::string>& args);

/// What Ctrl-C does to ranks started by relaunch_with_mpirun().
enum class CtrlC {
  /// mpirun gets it with this process (the terminal signals the whole
  /// process group) and stops the ranks: for real runs and calibration.
  kStopRanks,
  /// mpirun runs in a process group of its own and gets SIGUSR1 instead,
  /// which Open MPI's mpirun passes to every rank: the ranks finish what
  /// they hold and rank 0 prints the best so far (search, plan). A second
  /// Ctrl-C stops them as kStopRanks does.
  kAskRanksToFinish,
};

/// Runs mpirun_command() as a child, waits for it and exits with its status.
/// With kStopRanks this process holds its own SIGINT until mpirun is done,
/// then says on stderr that the ranks were stopped and exits 130. `scratch`
/// files the ranks write are removed in every case, Ctrl-C included. Throws
/// std::runtime_error if mpirun cannot be started.
[[noreturn]] void relaunch_with_mpirun(int ranks, const std::vector<std::string>& args,
                                       const std::vector<std::filesystem::path>& scratch = {},
                                       CtrlC ctrl_c = CtrlC::kStopRanks);

}  // namespace dtsim::exec
