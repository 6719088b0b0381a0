#include "dtsim/hw/cost_model.hpp"

#include <algorithm>

#include "dtsim/hw/kernel_calls.hpp"
#include "dtsim/hw/kernel_model.hpp"
#include "dtsim/hw/measured.hpp"

namespace dtsim::hw {
namespace {

// FP8 GEMMs as Transformer Engine runs them: before the forward GEMM the
// input and the weight are cast to FP8 with an amax reduction (read 2 bytes,
// write 1); the backward casts the output gradient and transposes the FP8
// input and weight for the weight- and data-gradient GEMMs (read 1, write 1).
core::Bytes fp8_cast_bytes(const model::GemmShape& s, bool backward) {
  const double m = static_cast<double>(s.m), n = static_cast<double>(s.n), k = static_cast<double>(s.k);
  const double batch = static_cast<double>(std::max<std::int64_t>(1, s.batch));
  if (!backward) return core::Bytes(batch * 3.0 * (m * k + k * n));
  return core::Bytes(batch * (3.0 * m * n + 2.0 * (m * k + k * n)));
}

}  // namespace

CostModel::CostModel(Device device, Efficiency efficiency, std::shared_ptr<const MeasuredKernels> measured,
                     std::string attention_kernel)
    : device_(std::move(device)), efficiency_(efficiency), measured_(std::move(measured)) {
  if (measured_ || !device_.kernel_figures) return;
  // A training step holds the device at its power limit: sustained clocks.
  kernels_ = std::make_shared<const KernelModel>(device_, device_.kernel_figures, Clocks::kSustained);
  attention_ = device_.kernel_figures->find_attention(attention_kernel);
}

core::Seconds CostModel::time(const OpWork& work, Dtype dtype) const {
  using core::Seconds;
  if (work.flops.value() <= 0 && work.bytes_moved.value() <= 0) return Seconds(0);
  if (measured_) {
    Seconds total(0);
    for (const KernelCall& call : kernel_calls(work)) total += measured_->time(call, gemm_dtype(work, dtype));
    return total;
  }
  if (kernels_) return modelled(work, dtype);
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

core::Seconds CostModel::modelled(const OpWork& work, Dtype dtype) const {
  using core::Seconds;
  const KernelModel& km = *kernels_;
  if (work.kind == model::OpKind::kAttention && work.fused && attention_) {
    // The shape gives the kernel's rate; the work's FLOPs how much of it this
    // task runs (a context-parallel block is a share of the whole).
    const std::int64_t heads = std::max<std::int64_t>(1, work.gemm.batch / 2);
    const double full = attention_flops(heads, work.gemm.m, work.gemm.k, false, work.backward);
    const Seconds whole =
        km.attention(*attention_, heads, work.gemm.m, work.gemm.k, work.causal, work.backward, work.window);
    const Seconds launch = km.figures().gemm_launch;
    return launch + (whole - launch) * (full > 0 ? work.flops.value() / full : 0.0);
  }
  // The kernels the op runs (kernel_calls, as the executor runs them): GEMMs
  // through the GEMM model, streaming kernels (unfused attention's softmax
  // passes, norms, element-wise ops) at the reachable HBM rate, each GEMM in
  // the dtype it runs in (hw::gemm_dtype: attention's stay bf16 under FP8).
  const Dtype runs_in = gemm_dtype(work, dtype);
  Seconds total(0);
  for (const KernelCall& call : kernel_calls(work)) {
    if (call.family != KernelFamily::kGemm) {
      total += km.stream(call.bytes);
      continue;
    }
    const model::GemmShape shape{call.gemm.m, call.gemm.n, call.gemm.k, call.count};
    // cuBLASLt has no FP8 kernel for an inner dimension that is not a
    // multiple of 16 bytes (the GPU executor found none for a 50257-word
    // vocabulary's data gradient): such a GEMM runs in bf16, uncast.
    const bool narrow = runs_in == Dtype::kFp8 || runs_in == Dtype::kFp4;
    const Dtype call_dtype = narrow && k_alignment_bytes(shape.k, operand_bytes(runs_in)) < 16 ? Dtype::kBf16 : runs_in;
    const double bytes = operand_bytes(call_dtype);
    // Row-major, a linear layer's leading dimensions are its widths in every
    // pass: the forward's k and n (n x 2 bytes for the 16-bit output).
    const int alignment = layout_ == GemmLayout::kRowMajor && work.kind == model::OpKind::kGemm
                              ? std::min(k_alignment_bytes(work.gemm.k, bytes), k_alignment_bytes(work.gemm.n, 2.0))
                              : k_alignment_bytes(shape.k, bytes);
    // Unfused attention's batched GEMMs at the rate measured for them.
    total += work.kind == model::OpKind::kAttention && !work.fused
                 ? km.unfused_attention_gemm(shape, call_dtype, bytes, alignment)
                 : km.gemm(shape, call_dtype, bytes, alignment);
    if (call_dtype == Dtype::kFp8 || call_dtype == Dtype::kFp4) total += km.stream(fp8_cast_bytes(shape, work.backward));
  }
  return total;
}

}  // namespace dtsim::hw
