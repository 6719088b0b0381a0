#include "dtsim/hw/cost_model.hpp"

#include <algorithm>

#include "dtsim/hw/kernel_calls.hpp"
#include "dtsim/hw/measured.hpp"

namespace dtsim::hw {

core::Seconds CostModel::time(const OpWork& work, Dtype dtype) const {
  using core::Seconds;
  if (work.flops.value() <= 0 && work.bytes_moved.value() <= 0) return Seconds(0);
  if (measured_) {
    Seconds total(0);
    for (const KernelCall& call : kernel_calls(work)) total += measured_->time(call);
    return total;
  }
  const core::FlopsPerSecond peak = device_.peak_for(dtype);  // the strategy checked it is not zero
  const Seconds compute = work.flops / (peak * efficiency_.gemm_fraction);
  const Seconds memory = work.bytes_moved / (device_.hbm_bandwidth * efficiency_.memory_fraction);
  switch (work.kind) {
    case model::OpKind::kGemm:
      return efficiency_.gemm_overhead + std::max(compute, memory);
    case model::OpKind::kAttention:
      if (work.fused) {
        return efficiency_.gemm_overhead +
               std::max(work.flops / (peak * efficiency_.attention_fraction), memory);
      }
      return efficiency_.gemm_overhead + compute + memory;
    default:
      return efficiency_.memory_overhead + std::max(compute, memory);
  }
}

}  // namespace dtsim::hw
