#pragma once
// Ctrl-C for the long commands (search, plan): the first SIGINT asks them to
// stop and print what they have; a second one ends the process as usual.
#include <atomic>

namespace dtsim::cli {

/// The flag the first SIGINT sets. It is the one process-wide state dtsim
/// keeps, because a signal handler can reach nothing else.
std::atomic<bool>& interrupt_requested();

/// Installs the handler for SIGINT and SIGUSR1 (what mpirun passes on to
/// the ranks); commands that never look at the flag do not call it.
void catch_interrupt();

/// Installs the handler for SIGUSR1 only: called first thing in a process
/// that mpirun started, so that a rank asked to finish early in its life is
/// not ended by SIGUSR1's default action before search or plan install theirs.
void catch_stop_request();

/// The exit code of a command that stopped on Ctrl-C (128 + SIGINT, as shells report it).
inline constexpr int kInterruptedExit = 130;

/// What ranks other than 0 exit with once rank 0 has their results, whatever
/// rank 0 reports: mpirun ends the whole job as soon as one rank exits
/// non-zero, so a rank leaving with 2 or 130 first would cut rank 0 off before
/// it printed. mpirun then exits with rank 0's status.
inline constexpr int kQuietRankExit = 0;

}  // namespace dtsim::cli
