#pragma once
/// Time of one op on one device. Three ways, the first that applies:
///  1. measured kernel tables of a calibration profile (MeasuredKernels);
///  2. the kernel model of the device's bundled profile (KernelModel: GEMM
///     waves and tiles anchored to the best measured GEMM rate, fused
///     attention per kernel, streaming kernels at the reachable bandwidth);
///  3. for devices with neither, a roofline with efficiency:
///
///   t = overhead(kind) + max(flops / (peak(dtype) * gemm_fraction),
///                            bytes  / (hbm_bandwidth * memory_fraction))
///
/// Unfused attention runs its GEMMs and its softmax as separate kernels, so
/// those two terms add instead; fused attention is one kernel at
/// attention_fraction of peak. The fixed overhead is the launch and ramp of a
/// kernel; it is what makes small GEMMs inefficient (the achieved fraction of
/// peak is gemm_fraction * t_ideal / (t_ideal + overhead)). Defaults in
/// Efficiency are documented there; a calibration profile replaces them.
#include <memory>

#include "dtsim/core/units.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/graph.hpp"

namespace dtsim::hw {

struct Efficiency {
  /// Share of peak dense FLOP/s that cuBLAS reaches on large GEMMs: 0.8 is
  /// what Megatron-LM's authors report for large fp16 GEMMs on A100
  /// (Narayanan et al. 2021, §5.8) and close to H100 bf16 cuBLAS figures.
  double gemm_fraction = 0.80;
  /// Share of peak that fused attention kernels reach: FlashAttention-2
  /// reports 50-73% on A100 and FlashAttention-3 about 75% on H100 (Shah et
  /// al. 2024) against 35-50% for FlashAttention-2 there; 0.55 sits between.
  double attention_fraction = 0.55;
  /// Share of HBM bandwidth a streaming kernel reaches (STREAM-like copies reach 85-92%).
  double memory_fraction = 0.85;
  /// Launch and ramp of one GEMM kernel, and of one memory-bound kernel.
  core::Seconds gemm_overhead = core::Seconds(4e-6);
  core::Seconds memory_overhead = core::Seconds(2e-6);
};

/// Which of a GEMM's backward passes a piece of work runs: both, or one when
/// the framework runs a collective between them (Megatron's column-parallel
/// linear layers reduce the input gradient beside the weight gradient).
enum class GradientPass { kBoth, kData, kWeight };

/// How the GEMMs' matrices lie in memory, which decides the leading
/// dimensions cuBLAS needs 16-byte aligned for its fast kernels.
///  - kRowMajor: PyTorch's tensors (every framework dtsim models): a linear
///    layer's input, weight and output are rows of its input and output
///    widths, so a width that is not a multiple of 16 bytes (a 50257-word
///    vocabulary) sends all three passes to cuBLAS's align1 kernels. An
///    H100 profile of eager PyTorch timed them (cutlass_75 ..._align1, at
///    0.15-0.24 of the aligned rate; calibrate/profiles/h100-sxm/framework-checks).
///  - kExecutor: dtsim's own GPU executor (cuBLASLt, operands k-major, the
///    output column-major with the tokens as its leading dimension): only the
///    inner dimension matters; the output width costs nothing measurable.
enum class GemmLayout { kRowMajor, kExecutor };

/// The work of one op as the planner scaled and sharded it.
struct OpWork {
  model::OpKind kind = model::OpKind::kElementwise;
  core::Flops flops;
  core::Bytes bytes_moved;
  model::GemmShape gemm;  ///< rows already multiplied by the micro-batch, columns divided by tp
  bool fused = false;     ///< fused attention: one kernel, scores never reach HBM
  bool backward = false;  ///< a backward pass (attention kernels differ per pass)
  bool causal = false;    ///< attention under a causal mask: the lower triangle only
  std::int64_t window = 0;  ///< sliding-window attention: keys a query sees at most (0: all)
  /// Kernels the framework launches for the op when it runs it as a chain of
  /// eager ops (PyTorch's RMSNorm: eight); 0: one per kernel call.
  int eager_launches = 0;
  /// Replayed inside a CUDA graph that another work launches: the host
  /// launches none of its kernels.
  bool graphed = false;
  /// A batch of GEMMs launched as separate kernels, this many at a time on
  /// as many streams (Transformer Engine's grouped GEMM: one cuBLAS GEMM per
  /// expert over 4 streams); 0: one batched kernel.
  int concurrent_kernels = 0;
  /// A backward GEMM's passes this work runs (its FLOPs are theirs).
  GradientPass gradient_pass = GradientPass::kBoth;
};

class KernelModel;

struct MeasuredKernels;

class CostModel {
 public:
  CostModel(Device device, Efficiency efficiency) : device_(std::move(device)), efficiency_(efficiency) {}
  /// With measured kernel tables (a dtsim-calibrate profile), an op costs the
  /// sum of its kernel_calls() looked up in them; the roofline is not used.
  CostModel(Device device, Efficiency efficiency, std::shared_ptr<const MeasuredKernels> measured)
      : device_(std::move(device)), efficiency_(efficiency), measured_(std::move(measured)) {}
  /// With the device's kernel figures (Device::kernel_figures) and no measured
  /// tables, ops cost what the kernel model says; `attention_kernel` names
  /// the fused attention kernel the strategy runs (one of the figures').
  CostModel(Device device, Efficiency efficiency, std::shared_ptr<const MeasuredKernels> measured,
            std::string attention_kernel);

  [[nodiscard]] core::Seconds time(const OpWork& work, Dtype dtype) const;
  /// kRowMajor unless set: the executor's own predictions set kExecutor.
  void set_layout(GemmLayout layout) { layout_ = layout; }
  [[nodiscard]] const Device& device() const { return device_; }
  [[nodiscard]] const Efficiency& efficiency() const { return efficiency_; }

 private:
  Device device_;
  Efficiency efficiency_;
  std::shared_ptr<const MeasuredKernels> measured_;
  std::shared_ptr<const KernelModel> kernels_;
  const struct AttentionKernel* attention_ = nullptr;
  GemmLayout layout_ = GemmLayout::kRowMajor;

  [[nodiscard]] core::Seconds modelled(const OpWork& work, Dtype dtype) const;
};

}  // namespace dtsim::hw
