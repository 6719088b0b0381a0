#pragma once
/// The replay's flow-level mode (sim::TaskCosts::call_plan): each collective
/// or transfer pays each phase's latency, then moves its bytes as an
/// activity of the shared links (net::SharedLinks, max-min fair), then goes
/// on to its next phase. Its member tasks end together when the last phase
/// does.
#include <cstdint>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/net/collective.hpp"
#include "dtsim/net/shared_links.hpp"
#include "dtsim/sim/event_queue.hpp"

namespace dtsim::sim {

class FlowTransfers {
 public:
  /// Event payloads with this bit set are a transfer's (on_event), not a task's.
  static constexpr std::uint32_t kEventBit = 1u << 31;

  /// `queue` is the replay's agenda: transfers schedule their phase ends on
  /// it, and a finished transfer schedules its member tasks' ends (the task
  /// ids as payloads) at the time it ends.
  FlowTransfers(const std::vector<double>& link_capacity_bytes_per_s, EventQueue& queue);

  /// The member tasks of one collective start `plan` now.
  void start(std::vector<std::uint32_t> tasks, const net::CollectivePlan& plan, core::Nanoseconds now);
  /// An event whose payload had kEventBit: `slot` is the payload without it.
  void on_event(std::uint32_t slot, std::uint64_t sequence, core::Nanoseconds now);

 private:
  struct Transfer {
    std::vector<std::uint32_t> tasks;
    const net::CollectivePlan* plan = nullptr;
    std::size_t phase = 0;
    int activity = -1;        ///< in links_, while its bytes move
    std::uint64_t event = 0;  ///< the sequence of its one valid event
    bool moving = false;
  };

  void begin_phase(std::uint32_t slot, core::Nanoseconds now);
  void reschedule(core::Nanoseconds now);
  void complete(std::uint32_t slot, core::Nanoseconds now);

  const std::vector<double>& capacity_;  ///< bytes per second of each link
  net::SharedLinks links_;
  EventQueue& queue_;
  std::vector<Transfer> transfers_;
  std::vector<std::uint32_t> free_;
  std::vector<std::uint32_t> owner_;  ///< transfer slot of each links_ activity
};

}  // namespace dtsim::sim
