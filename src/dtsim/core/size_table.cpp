#include "dtsim/core/size_table.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dtsim::core {

SizeTable::SizeTable(std::vector<SizeSample> samples) : samples_(std::move(samples)) {
  std::sort(samples_.begin(), samples_.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  if (samples_.size() < 2) throw std::invalid_argument("a size table needs at least two sizes");
  for (const SizeSample& s : samples_) {
    if (!(s.bytes.value() > 0) || !(s.time.value() > 0)) {
      throw std::invalid_argument("a size table needs positive sizes and times");
    }
  }
}

Seconds SizeTable::time(Bytes bytes) const {
  if (empty()) throw std::logic_error("SizeTable::time on an empty table");
  if (bytes.value() <= 0) return Seconds(0);
  if (bytes <= samples_.front().bytes) return samples_.front().time;
  if (bytes >= samples_.back().bytes) return samples_.back().time * (bytes / samples_.back().bytes);
  auto hi = std::upper_bound(samples_.begin(), samples_.end(), bytes,
                             [](Bytes b, const SizeSample& s) { return b < s.bytes; });
  auto lo = hi - 1;
  const double w = std::log(bytes / lo->bytes) / std::log(hi->bytes / lo->bytes);
  return Seconds(std::exp(std::log(lo->time.value()) * (1 - w) + std::log(hi->time.value()) * w));
}

}  // namespace dtsim::core
