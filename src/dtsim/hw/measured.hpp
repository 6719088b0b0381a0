#pragma once
/// Kernel times measured by dtsim-calibrate, and their interpolation. A
/// profile with these replaces the roofline: a kernel costs what the machine
/// was seen to take for that shape or size.
#include <array>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "dtsim/core/linear_fit.hpp"
#include "dtsim/core/size_table.hpp"
#include "dtsim/core/units.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/hw/kernel_calls.hpp"

namespace dtsim::hw {

struct GemmSample {
  std::int64_t m = 0, n = 0, k = 0;
  core::Seconds time;
};

/// Achieved FLOP/s over a full grid of (m, n, k), interpolated trilinearly in
/// log2 of each dimension and clamped at the grid's edges; a GEMM then takes
/// 2mnk over that rate. Interpolating the rate rather than the time keeps
/// the O(mnk) growth exact between grid points.
class GemmTable {
 public:
  GemmTable() = default;
  /// Throws std::invalid_argument naming the first missing grid point.
  explicit GemmTable(const std::vector<GemmSample>& samples);

  [[nodiscard]] bool empty() const { return rate_.empty(); }
  [[nodiscard]] core::FlopsPerSecond rate(const model::GemmShape& shape) const;
  [[nodiscard]] core::Seconds time(const model::GemmShape& shape) const;
  [[nodiscard]] core::FlopsPerSecond best() const;

 private:
  std::array<std::vector<double>, 3> log_axis_;  ///< log2 of the distinct m, n, k
  std::vector<double> rate_;                     ///< FLOP/s, m-major
};

/// One GEMM call as a GPU runs it: `count` GEMMs of m x n x k in one
/// strided-batched launch, in a dtype. A batched launch is not `count`
/// single ones (it fills the SMs the single ones leave idle), so calls that
/// were measured whole are looked up whole.
struct GemmCallKey {
  std::int64_t m = 0, n = 0, k = 0, count = 1;
  Dtype dtype = Dtype::kFp32;
  friend bool operator<(const GemmCallKey& a, const GemmCallKey& b) {
    return std::tie(a.m, a.n, a.k, a.count, a.dtype) < std::tie(b.m, b.n, b.k, b.count, b.dtype);
  }
};

struct MeasuredKernels {
  GemmTable gemm;  ///< the profile's main grid (its `gemm_dtype`), and any dtype without a grid of its own
  std::map<Dtype, GemmTable> gemm_by_dtype;       ///< grids in other dtypes (a GPU calibration)
  std::map<GemmCallKey, core::Seconds> gemm_calls;  ///< whole calls measured as a plan runs them
  std::array<core::SizeTable, 3> memory;  ///< by kMemoryFamilies order: copy, elementwise, reduction

  [[nodiscard]] const core::SizeTable& table(KernelFamily family) const;
  /// The grid measured in `dtype`, or gemm when there is none.
  [[nodiscard]] const GemmTable& gemm_table(Dtype dtype) const;
  /// A GEMM call measured whole, else the grid's time of one GEMM times count.
  [[nodiscard]] core::Seconds time(const KernelCall& call, Dtype dtype = Dtype::kFp32) const;
};

}  // namespace dtsim::hw
