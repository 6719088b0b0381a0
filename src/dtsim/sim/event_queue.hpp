#pragma once
/// The engine's clock and agenda: events ordered by integer-nanosecond time,
/// and at equal times by the order they were scheduled, so a run is
/// deterministic bit for bit.
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <queue>
#include <vector>

#include "dtsim/core/units.hpp"

namespace dtsim::sim {

class EventQueue {
 public:
  /// 16 bytes, four to a cache line: the heap's sift moves fewer lines
  /// (issue 16: scheduling was a tenth of a strategy search).
  struct Event {
    core::Nanoseconds time;
    std::uint32_t sequence;
    std::uint32_t payload;
  };

  /// Returns the event's sequence number (a later schedule has a larger one).
  /// A run has about one event per task, and a plan of 2^32 tasks would not
  /// fit in memory long before; past that the order could not be kept.
  std::uint64_t schedule(core::Nanoseconds time, std::uint32_t payload) {
    if (next_sequence_ > std::numeric_limits<std::uint32_t>::max()) {
      throw std::length_error("dtsim: more than 2^32 events in one run");
    }
    heap_.push({time, static_cast<std::uint32_t>(next_sequence_), payload});
    return next_sequence_++;
  }
  [[nodiscard]] bool empty() const { return heap_.empty(); }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  [[nodiscard]] std::uint64_t scheduled() const { return next_sequence_; }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.sequence > b.sequence;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace dtsim::sim
