#include "dtsim/hw/measured.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace dtsim::hw {
namespace {

// Index of the cell [i, i+1] holding x and the weight of i+1, clamped at the ends.
std::pair<std::size_t, double> locate(const std::vector<double>& axis, double x) {
  if (axis.size() == 1 || x <= axis.front()) return {0, 0.0};
  if (x >= axis.back()) return {axis.size() - 2, 1.0};
  const auto it = std::upper_bound(axis.begin(), axis.end(), x);
  const auto i = static_cast<std::size_t>(it - axis.begin()) - 1;
  return {i, (x - axis[i]) / (axis[i + 1] - axis[i])};
}

}  // namespace

GemmTable::GemmTable(const std::vector<GemmSample>& samples) {
  std::array<std::vector<std::int64_t>, 3> values;
  for (const GemmSample& s : samples) {
    if (s.m < 1 || s.n < 1 || s.k < 1 || !(s.time.value() > 0)) {
      throw std::invalid_argument(fmt::format("GEMM sample {}x{}x{}: expected positive sizes and time", s.m, s.n, s.k));
    }
    values[0].push_back(s.m);
    values[1].push_back(s.n);
    values[2].push_back(s.k);
  }
  for (auto& v : values) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  std::map<std::array<std::int64_t, 3>, double> by_shape;
  for (const GemmSample& s : samples) {
    by_shape[{s.m, s.n, s.k}] = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) *
                                static_cast<double>(s.k) / s.time.value();
  }
  for (std::int64_t m : values[0]) {
    for (std::int64_t n : values[1]) {
      for (std::int64_t k : values[2]) {
        auto it = by_shape.find({m, n, k});
        if (it == by_shape.end()) {
          throw std::invalid_argument(fmt::format("the GEMM grid has no sample for m={} n={} k={}", m, n, k));
        }
        rate_.push_back(it->second);
      }
    }
  }
  for (std::size_t d = 0; d < 3; ++d) {
    for (std::int64_t v : values[d]) log_axis_[d].push_back(std::log2(static_cast<double>(v)));
  }
}

core::FlopsPerSecond GemmTable::rate(const model::GemmShape& shape) const {
  if (empty()) throw std::logic_error("GemmTable::rate on an empty table");
  const std::array<double, 3> x = {std::log2(static_cast<double>(std::max<std::int64_t>(1, shape.m))),
                                   std::log2(static_cast<double>(std::max<std::int64_t>(1, shape.n))),
                                   std::log2(static_cast<double>(std::max<std::int64_t>(1, shape.k)))};
  std::array<std::pair<std::size_t, double>, 3> cell;
  for (std::size_t d = 0; d < 3; ++d) cell[d] = locate(log_axis_[d], x[d]);
  const std::size_t nn = log_axis_[1].size(), nk = log_axis_[2].size();
  double rate = 0;
  for (int corner = 0; corner < 8; ++corner) {
    double weight = 1;
    std::array<std::size_t, 3> index{};
    for (std::size_t d = 0; d < 3; ++d) {
      const bool upper = (corner >> d) & 1;
      const auto [i, w] = cell[d];
      const bool single = log_axis_[d].size() == 1;
      index[d] = single ? 0 : i + (upper ? 1 : 0);
      weight *= single ? (upper ? 0.0 : 1.0) : (upper ? w : 1 - w);
    }
    if (weight > 0) rate += weight * rate_[(index[0] * nn + index[1]) * nk + index[2]];
  }
  return core::FlopsPerSecond(rate);
}

core::Seconds GemmTable::time(const model::GemmShape& shape) const {
  const double flops = 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) * static_cast<double>(shape.k);
  return core::Flops(flops) / rate(shape);
}

core::FlopsPerSecond GemmTable::best() const {
  return core::FlopsPerSecond(rate_.empty() ? 0.0 : *std::max_element(rate_.begin(), rate_.end()));
}

const core::SizeTable& MeasuredKernels::table(KernelFamily family) const {
  switch (family) {
    case KernelFamily::kCopy: return memory[0];
    case KernelFamily::kElementwise: return memory[1];
    default: return memory[2];
  }
}

const GemmTable& MeasuredKernels::gemm_table(Dtype dtype) const {
  const auto found = gemm_by_dtype.find(dtype);
  return found == gemm_by_dtype.end() ? gemm : found->second;
}

core::Seconds MeasuredKernels::time(const KernelCall& call, Dtype dtype) const {
  if (call.family == KernelFamily::kGemm) {
    const auto whole = gemm_calls.find({call.gemm.m, call.gemm.n, call.gemm.k, call.count, dtype});
    if (whole != gemm_calls.end()) return whole->second;
    return gemm_table(dtype).time(call.gemm) * static_cast<double>(call.count);
  }
  return table(call.family).time(call.bytes) * static_cast<double>(call.count);
}

}  // namespace dtsim::hw
