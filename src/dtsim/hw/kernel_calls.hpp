#pragma once
/// The kernels one op runs, as a real executor launches them: GEMMs of given
/// shapes and streaming kernels over given bytes. The CPU executor runs
/// exactly these, and a measured profile costs exactly these, so prediction
/// and measurement count the same work.
#include <string_view>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/hw/cost_model.hpp"

namespace dtsim::hw {

/// kCopy: read and write (embedding gather); kElementwise: two reads, one
/// write (residual add, activation); kReduction: a row reduction then a
/// scale (norms, softmax, loss).
enum class KernelFamily { kGemm, kCopy, kElementwise, kReduction };
inline constexpr KernelFamily kMemoryFamilies[] = {KernelFamily::kCopy, KernelFamily::kElementwise,
                                                   KernelFamily::kReduction};
std::string_view to_string(KernelFamily family);

struct KernelCall {
  KernelFamily family = KernelFamily::kGemm;
  model::GemmShape gemm;  ///< m x k by k x n, batch 1 (kGemm)
  std::int64_t count = 1; ///< how many times the GEMM runs (heads, micro-batch samples)
  core::Bytes bytes;      ///< bytes streamed (memory families)
};

/// A GEMM op's FLOPs over its shape give the passes it makes: 1 forward, 2
/// backward (data gradient m x n by n x k, weight gradient k x m by m x n),
/// more when recomputed; each pass runs `batch` GEMMs. Unfused attention adds
/// a softmax-like reduction over the scores it moves; other ops are one
/// streaming kernel over their bytes.
std::vector<KernelCall> kernel_calls(const OpWork& work);

/// Kernels the host launches for one op: its kernel calls (a GEMM per pass),
/// or the framework's eager chain (OpWork::eager_launches).
int host_launches(const OpWork& work);

/// The dtype an op's GEMMs run in under a plan's dtype: attention stays in
/// bf16 under FP8, as Transformer Engine runs it.
Dtype gemm_dtype(const OpWork& work, Dtype plan);

}  // namespace dtsim::hw
