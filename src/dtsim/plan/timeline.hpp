#pragma once
/// What an executor saw: when each task ran and how much memory each rank
/// held over time. The simulator and the real executor produce this one
/// type, so validation compares two values of it task by task.
#include <cstdint>
#include <vector>

#include "dtsim/core/units.hpp"

namespace dtsim::plan {

struct TaskSpan {
  core::Nanoseconds start{-1};
  core::Nanoseconds end{-1};
};

struct MemorySample {
  core::Nanoseconds time;
  core::Bytes in_use;
};

struct Timeline {
  std::vector<TaskSpan> spans;                      ///< by task id
  std::vector<std::vector<MemorySample>> memory;    ///< by simulated rank index
  std::vector<core::Bytes> peak_memory;             ///< by simulated rank index, static memory included
  /// by simulated rank index: how much longer its kernels ran because
  /// communication beside them took SMs and memory (empty: none)
  std::vector<core::Nanoseconds> contention_delay;
  /// by simulated rank index: how long its compute stream, free to run its
  /// next kernel, waited for the host to launch it (empty: none)
  std::vector<core::Nanoseconds> host_wait;
  /// by simulated rank index: how much longer its tasks of several kernels
  /// lasted because the host launched them more slowly than they ran (their
  /// spans include it; empty: none)
  std::vector<core::Nanoseconds> host_stretch;
  core::Nanoseconds makespan;
  std::uint64_t events = 0;                         ///< events the engine processed
};

}  // namespace dtsim::plan
