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

void catch_interrupt() { std::signal(SIGINT, on_interrupt); }

}  // namespace dtsim::cli
