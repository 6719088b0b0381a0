#pragma once
/// The engine's clock and agenda: events ordered by integer-nanosecond time,
/// and at equal times by the order they were scheduled, so a run is
/// deterministic bit for bit.
#include <cstdint>
#include <queue>
#include <vector>

#include "dtsim/core/units.hpp"

namespace dtsim::sim {

class EventQueue {
 public:
  struct Event {
    core::Nanoseconds time;
    std::uint64_t sequence;
    std::uint32_t payload;
  };

  /// Returns the event's sequence number (a later schedule has a larger one).
  std::uint64_t schedule(core::Nanoseconds time, std::uint32_t payload) {
    heap_.push({time, next_sequence_, payload});
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
