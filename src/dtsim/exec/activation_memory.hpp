#pragma once
// The executor's activation memory (see ActivationMemory).
#include <cstddef>
#include <deque>
#include <map>
#include <memory>

#include "dtsim/core/units.hpp"

namespace dtsim::exec {

// Activation memory as a framework's caching allocator holds it: blocks are
// allocated (and their pages touched) once, then reused. The plan frees bytes,
// not blocks, so a block keeps its capacity apart from the bytes still counted
// in it, and goes back to the cache whole when none are; a request reuses the
// smallest cached block that holds it. Keying the cache on what was left
// counted instead let blocks drift to odd sizes that no request matched, so
// every step allocated and touched fresh pages (page faults timed as compute).
class ActivationMemory {
 public:
  void allocate(core::Bytes bytes);
  // Releases the oldest live bytes that make up `bytes`; the count is exact
  // even when frees do not match allocations one to one.
  void release(core::Bytes bytes);
  [[nodiscard]] std::size_t peak() const { return peak_bytes_; }
  // Blocks that had to be allocated and touched; a steady step adds none.
  [[nodiscard]] std::size_t fresh_allocations() const { return fresh_allocations_; }
  void reset_peak() { peak_bytes_ = live_bytes_; }

 private:
  struct Block {
    std::size_t capacity, counted;
    std::unique_ptr<char[]> data;
  };
  std::deque<Block> live_;
  std::multimap<std::size_t, std::unique_ptr<char[]>> cache_;
  std::size_t live_bytes_ = 0, peak_bytes_ = 0, fresh_allocations_ = 0;
};

}  // namespace dtsim::exec
