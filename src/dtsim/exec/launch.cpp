#include "dtsim/exec/launch.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
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

namespace {

// A signal handler reaches only static storage: these are all it touches.
volatile std::sig_atomic_t interrupts_while_waiting = 0;
volatile std::sig_atomic_t forward_to_mpirun = 0;  // CtrlC::kAskRanksToFinish
volatile std::sig_atomic_t mpirun_pid = 0;         // 0 until it is started
extern "C" void note_interrupt(int) {
  interrupts_while_waiting = interrupts_while_waiting + 1;
  if (forward_to_mpirun == 0 || mpirun_pid == 0) return;
  // The first Ctrl-C asks the ranks to finish (mpirun passes SIGUSR1 on); a
  // second stops mpirun's whole group as the terminal would have.
  if (interrupts_while_waiting == 1) {
    ::kill(static_cast<pid_t>(mpirun_pid), SIGUSR1);
  } else {
    ::kill(-static_cast<pid_t>(mpirun_pid), SIGINT);
  }
}

// The exit status a shell would report for the child.
int status_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace

void relaunch_with_mpirun(int ranks, const std::vector<std::string>& args,
                          const std::vector<std::filesystem::path>& scratch, CtrlC ctrl_c) {
  std::vector<std::string> cmd = mpirun_command(ranks, args);
  const bool ask_ranks = ctrl_c == CtrlC::kAskRanksToFinish;
  // In a process group of its own mpirun may not read the terminal (it would be
  // stopped by SIGTTIN): the ranks read no input anyway.
  if (ask_ranks) cmd.insert(cmd.begin() + 1, {"--stdin", "none"});
  std::vector<char*> argv;
  for (std::string& a : cmd) argv.push_back(a.data());
  argv.push_back(nullptr);
  // While mpirun runs, this process's SIGINT only notes that Ctrl-C came
  // (blocking it would not do: library threads, OpenBLAS's, would take it and
  // end the process). mpirun starts with the default action, as exec resets handlers.
  struct sigaction note {}, previous {};
  note.sa_handler = note_interrupt;
  sigemptyset(&note.sa_mask);
  sigaction(SIGINT, &note, &previous);
  forward_to_mpirun = ask_ranks ? 1 : 0;
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (ask_ranks) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  pid_t child = 0;
  const int error = ::posix_spawnp(&child, argv[0], nullptr, &attributes, argv.data(), environ);
  posix_spawnattr_destroy(&attributes);
  mpirun_pid = child;
  if (error == 0 && ask_ranks && interrupts_while_waiting > 0) ::kill(child, SIGUSR1);  // Ctrl-C came before the pid
  if (error != 0) {
    sigaction(SIGINT, &previous, nullptr);
    throw std::runtime_error(std::string("could not start mpirun: ") + std::strerror(error) +
                             " (install openmpi-bin, or start the ranks with your MPI launcher)");
  }
  int wait_status = 0;
  while (::waitpid(child, &wait_status, 0) < 0 && errno == EINTR) {
  }
  std::error_code ignored;
  for (const std::filesystem::path& file : scratch) std::filesystem::remove(file, ignored);
  // Asked once, the ranks finished and rank 0 said so: their status stands.
  if (interrupts_while_waiting != 0 && !(ask_ranks && interrupts_while_waiting == 1)) {
    const std::string program = std::filesystem::path(args.at(0)).filename().string();
    std::fprintf(stderr, "%s: stopped by Ctrl-C: mpirun stopped the %d ranks%s\n", program.c_str(), ranks,
                 scratch.empty() ? "" : "; their scratch files are removed");
    std::fflush(stderr);
    std::_Exit(130);
  }
  std::fflush(nullptr);
  std::_Exit(status_of(wait_status));
}

}  // namespace dtsim::exec
