// The dtsim command. Parsing and printing only. Every failure ends here as one
// line on stderr: bad input and CLI misuse exit 2, a failed real execution 3,
// and anything else (a bug) 4 with "internal error", never an abort.
#include <algorithm>
#include <cstdio>
#include <new>
#include <fstream>
#include <iostream>
#include <malloc.h>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/interrupt.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/version.hpp"
#include "dtsim/exec/launch.hpp"

namespace {

// Commands that run many simulations free a task graph of megabytes after
// each and build the next. glibc hands blocks that large back to the kernel
// (mmap'ed, or trimmed off the heap) and every simulation faulted its pages
// in anew: 265,000 page faults in the GPT-3 175B search. Kept in the heap,
// they take 100,000 and the search 5% less time (issue 16). Only the
// program does this: the Python module leaves its host's allocator alone.
void keep_freed_memory_for_the_next_simulation() {
  constexpr int kOneGiB = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, kOneGiB);
  mallopt(M_TRIM_THRESHOLD, kOneGiB);
}

}  // namespace

int main(int argc, char** argv) {
  if (dtsim::exec::launched_by_mpi()) dtsim::cli::catch_stop_request();
  CLI::App app{"dtsim: predict the step time, throughput, memory and bottlenecks of distributed training"};
  app.require_subcommand(1);
  dtsim::cli::SimulateOptions simulate;
  dtsim::cli::add_simulate(app, simulate);
  dtsim::cli::CollectiveOptions collective;
  dtsim::cli::add_collective(app, collective);
  dtsim::cli::CompareOptions compare;
  dtsim::cli::add_compare(app, compare);
  dtsim::cli::SearchOptions search;
  dtsim::cli::add_search(app, search);
  dtsim::cli::PlanOptions plan;
  dtsim::cli::add_plan(app, plan);
  dtsim::cli::RunOptions run;
  dtsim::cli::add_run(app, run);
  dtsim::cli::ValidateOptions validate;
  dtsim::cli::add_validate(app, validate);
  dtsim::cli::KernelOptions kernel;
  dtsim::cli::add_kernel(app, kernel);
  dtsim::cli::SweepOptions sweep;
  dtsim::cli::add_sweep(app, sweep);
  dtsim::cli::add_list(app);
  app.set_version_flag("--version", "dtsim " + std::string(dtsim::core::version()));
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string line = e.what();
    std::replace(line.begin(), line.end(), '\n', ' ');
    std::fprintf(stderr, "dtsim: %s (--help lists the options)\n", line.c_str());
    return 2;
  }
  try {
    if (app.got_subcommand("simulate")) return dtsim::cli::run_simulate(simulate, std::cout);
    if (app.got_subcommand("list")) return dtsim::cli::run_list(std::cout);
    if (app.got_subcommand("collective")) return dtsim::cli::run_collective(collective, std::cout);
    if (app.got_subcommand("compare")) return dtsim::cli::run_compare(compare, std::cout);
    if (app.got_subcommand("kernel")) return dtsim::cli::run_kernel(kernel, std::cout);
    const std::vector<std::string> args(argv, argv + argc);
    if (app.got_subcommand("sweep") || app.got_subcommand("search") || app.got_subcommand("plan")) {
      keep_freed_memory_for_the_next_simulation();
    }
    if (app.got_subcommand("run")) return dtsim::cli::run_run(run, args, std::cout);
    if (app.got_subcommand("validate")) return dtsim::cli::run_validate(validate, args, std::cout);
    if (app.got_subcommand("sweep")) return dtsim::cli::run_sweep(sweep, args, std::cout);
    if (app.got_subcommand("search")) return dtsim::cli::run_search(search, args, std::cout);
    if (app.got_subcommand("plan")) return dtsim::cli::run_plan(plan, args, std::cout);
  } catch (const dtsim::core::InputError& e) {
    std::fprintf(stderr, "dtsim: %s\n", e.what());
    return 2;
  } catch (const std::range_error& e) {  // a time the input made too long for the simulator's clock
    std::fprintf(stderr, "dtsim: %s\n", e.what());
    return 2;
  } catch (const std::runtime_error& e) {  // the real executor's and the launcher's failures
    std::fprintf(stderr, "dtsim: %s\n", e.what());
    return 3;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "dtsim: out of memory\n");
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsim: internal error: %s (please report it with the command line)\n", e.what());
    return 4;
  }
  return 0;
}
