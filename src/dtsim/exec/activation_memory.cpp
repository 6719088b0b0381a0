#include "dtsim/exec/activation_memory.hpp"

#include <algorithm>
#include <cstring>

namespace dtsim::exec {

void ActivationMemory::allocate(core::Bytes bytes) {
  const auto size = static_cast<std::size_t>(bytes.value());
  if (size == 0) return;
  Block block{size, size, nullptr};
  if (auto it = cache_.lower_bound(size); it != cache_.end()) {
    block.capacity = it->first;
    block.data = std::move(it->second);
    cache_.erase(it);
  } else {
    block.data = std::make_unique<char[]>(size);
    std::memset(block.data.get(), 1, size);
    ++fresh_allocations_;
  }
  live_.push_back(std::move(block));
  live_bytes_ += size;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
}

void ActivationMemory::release(core::Bytes bytes) {
  auto size = std::min(static_cast<std::size_t>(bytes.value()), live_bytes_);
  live_bytes_ -= size;
  while (size > 0 && !live_.empty()) {
    Block& b = live_.front();
    const std::size_t taken = std::min(size, b.counted);
    size -= taken;
    b.counted -= taken;
    if (b.counted == 0) {
      cache_.emplace(b.capacity, std::move(b.data));
      live_.pop_front();
    }
  }
}

}  // namespace dtsim::exec
