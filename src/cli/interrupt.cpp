#include "cli/interrupt.hpp"

#include <csignal>

namespace dtsim::cli {
namespace {

std::atomic<bool> requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

extern "C" void on_interrupt(int) {
  requested.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}

}  // namespace

std::atomic<bool>& interrupt_requested() { return requested; }

// SIGUSR1 too: under `dtsim search --ranks N` the launcher turns Ctrl-C into
// SIGUSR1, which mpirun passes to every rank (and a user can send it to their
// own mpirun: `kill -USR1 <mpirun's pid>`) to get the best results so far.
void catch_stop_request() { std::signal(SIGUSR1, on_interrupt); }

void catch_interrupt() {
  std::signal(SIGINT, on_interrupt);
  catch_stop_request();
}

}  // namespace dtsim::cli
