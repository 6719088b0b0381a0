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
  core::Nanoseconds makespan;
  std::uint64_t events = 0;                         ///< events the engine processed
};

}  // namespace dtsim::plan
