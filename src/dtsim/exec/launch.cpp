#include "dtsim/exec/launch.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace dtsim::exec {

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_ID"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

std::vector<std::string> mpirun_command(int ranks, const std::vector<std::string>& args) {
  // --quiet: a rank's own one-line error and exit code say what went wrong,
  // without Open MPI's banner about a non-zero exit after it.
  std::vector<std::string> cmd{"mpirun", "--quiet", "-n", std::to_string(ranks)};
  if (geteuid() == 0) cmd.emplace_back("--allow-run-as-root");
  if (static_cast<unsigned>(ranks) > std::max(1u, std::thread::hardware_concurrency())) {
    // More ranks than cores: timings will be poor, but the loop still runs.
    cmd.insert(cmd.end(), {"--oversubscribe", "--bind-to", "none"});
  }
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  cmd.push_back(ec ? args.at(0) : self.string());
  cmd.insert(cmd.end(), args.begin() + 1, args.end());
  return cmd;
}

void relaunch_with_mpirun(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> cmd = mpirun_command(ranks, args);
  std::vector<char*> argv;
  for (std::string& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  throw std::runtime_error(std::string("could not start mpirun: ") + std::strerror(errno) +
                           " (install openmpi-bin, or start the ranks with your MPI launcher)");
}

}  // namespace dtsim::exec
