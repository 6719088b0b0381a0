#include "dtsim/sim/flow_transfers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtsim::sim {

using core::Nanoseconds;

FlowTransfers::FlowTransfers(const std::vector<double>& link_capacity_bytes_per_s, EventQueue& queue)
    : capacity_(link_capacity_bytes_per_s), links_(link_capacity_bytes_per_s), queue_(queue) {}

void FlowTransfers::start(std::vector<std::uint32_t> tasks, const net::CollectivePlan& plan, Nanoseconds now) {
  std::uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(transfers_.size());
    transfers_.emplace_back();
  }
  Transfer& x = transfers_[slot];
  x.tasks = std::move(tasks);
  x.plan = &plan;
  x.phase = 0;
  x.activity = -1;
  begin_phase(slot, now);
}

void FlowTransfers::begin_phase(std::uint32_t slot, Nanoseconds now) {
  Transfer& x = transfers_[slot];
  x.moving = false;
  if (x.plan->fixed) {
    if (x.phase++ == 0) {
      x.event = queue_.schedule(now + core::to_nanoseconds(*x.plan->fixed), kEventBit | slot);
      return;
    }
  } else if (x.phase < x.plan->phases.size()) {
    x.event = queue_.schedule(now + core::to_nanoseconds(x.plan->phases[x.phase].latency), kEventBit | slot);
    return;
  }
  complete(slot, now);
}

void FlowTransfers::on_event(std::uint32_t slot, std::uint64_t sequence, Nanoseconds now) {
  Transfer& x = transfers_[slot];
  if (x.tasks.empty() || sequence != x.event) return;  // superseded by a reschedule
  const double now_s = static_cast<double>(now.count) * 1e-9;
  if (x.plan->fixed) {
    begin_phase(slot, now);
    return;
  }
  const net::FlowPhase& phase = x.plan->phases[x.phase];
  if (!x.moving) {
    // Latency paid: its bytes join the links, at most at its channels' share.
    double cap = std::numeric_limits<double>::infinity();
    if (phase.rate_fraction < 1) {
      double uncontended = cap;
      for (auto [link, flows] : phase.flows_on_link) {
        uncontended = std::min(uncontended, capacity_[static_cast<std::size_t>(link)] / flows);
      }
      cap = uncontended * phase.rate_fraction;
    }
    x.moving = true;
    x.activity = links_.add(now_s, phase.flows_on_link, phase.bytes_per_flow.value(), cap);
    if (owner_.size() <= static_cast<std::size_t>(x.activity)) owner_.resize(static_cast<std::size_t>(x.activity) + 1);
    owner_[static_cast<std::size_t>(x.activity)] = slot;
    reschedule(now);
    return;
  }
  links_.remove(now_s, x.activity);
  x.activity = -1;
  reschedule(now);
  ++x.phase;
  begin_phase(slot, now);
}

// The solver changed some activities' rates: move their end events.
void FlowTransfers::reschedule(Nanoseconds now) {
  for (const net::SharedLinks::Change& c : links_.changed()) {
    const std::uint32_t slot = owner_[static_cast<std::size_t>(c.id)];
    const auto end = static_cast<std::int64_t>(std::ceil(c.finish_s * 1e9));
    transfers_[slot].event = queue_.schedule(Nanoseconds{std::max(end, now.count)}, kEventBit | slot);
  }
}

void FlowTransfers::complete(std::uint32_t slot, Nanoseconds now) {
  std::vector<std::uint32_t> tasks = std::move(transfers_[slot].tasks);
  transfers_[slot].tasks.clear();
  free_.push_back(slot);
  for (std::uint32_t id : tasks) {
    queue_.schedule(now, id);  // through the agenda, in order with everything else at this time
  }
}

}  // namespace dtsim::sim
