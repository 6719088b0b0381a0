#include <gtest/gtest.h>

#include "dtsim/sim/event_queue.hpp"

using dtsim::core::Nanoseconds;
using dtsim::sim::EventQueue;

TEST(EventQueue, SameTimeEventsRunInInsertionOrder) {
  EventQueue q;
  q.schedule(Nanoseconds{5}, 1);
  q.schedule(Nanoseconds{3}, 2);
  q.schedule(Nanoseconds{5}, 3);
  q.schedule(Nanoseconds{5}, 4);
  std::vector<std::uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().payload);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{2, 1, 3, 4}));
  EXPECT_EQ(q.scheduled(), 4u);
}
