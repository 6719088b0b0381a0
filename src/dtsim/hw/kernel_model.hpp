#pragma once
/// A device's kernels costed from its published kernel measurements, without
/// running them: a GEMM from its shape, fused attention from its sequence,
/// head size and mask, a streaming kernel from its bytes. The figures live in
/// the device's bundled profile (`devices/<device>.json`, the `kernel_model`
/// section), each with its source; a calibration profile's measured tables
/// replace them.
///
/// GEMM. cuBLAS runs a GEMM as output tiles of Tm x Tn, one per SM at a
/// time, in waves: ceil(tiles / SMs) of them. Each tile costs its k loop plus
/// a fixed pipeline fill and epilogue worth `pipeline_k` more 16-bit
/// iterations. That part moves bytes, not math: a pipeline stage holds the
/// same bytes of k whatever the operands' width and the output tile is 16-bit
/// either way, so it takes the same time, and operands narrower than 16 bits
/// (FP8, FP4), whose k loop runs faster by the datasheet's rate ratio, see it
/// as that many times more iterations. The heuristic picks the tile (large
/// tiles run nearer the peak, small ones waste less at the edges) that
/// finishes first:
///
///   t = launch + max(min_T waves_T * 2*Tm*Tn*(k + pipeline_k) / (per_sm_rate * eff_T),
///                    bytes / (HBM * memory_fraction))
///
/// or, where the library has it, stream-K (every tile's k loop split evenly
/// over the SMs, no wave tail, partial tiles fixed up at `stream_k_efficiency`).
/// per_sm_rate is set so that the model reproduces the device's best measured
/// GEMM rate (maximum achievable matmul FLOP/s) at the shape that reached it:
/// the published figure, not a fraction of the datasheet peak; no shape runs
/// faster than that figure, the best of a search over shapes.
///
/// Fused attention (FlashAttention, cuDNN). Each query block streams the key
/// blocks; fixed per-block costs make short sequences slower, small heads
/// feed the tensor cores worse, and a causal mask halves the work (only the
/// lower triangle) with some loss on the diagonal blocks:
///
///   rate = peak16 * U_pass * d/(d+d0) / (128/(128+d0)) * s_eff/(s_eff + ramp) * (causal ? c : 1)
///
/// with s_eff the keys a query block sees on average (s, or s/2 causal). The
/// backward does 2.5x the forward's FLOPs at its own utilization.
///
/// Alignment. A GEMM whose inner dimension k is not a multiple of 16 bytes
/// runs a kernel for a smaller alignment at the measured share of the aligned
/// rate (`misaligned_k`): an unpadded vocabulary's data-gradient GEMM, whose
/// k is the vocabulary, is the common case. Which leading dimensions count
/// is the caller's layout (hw::GemmLayout): laid out as dtsim's executor
/// lays its matrices (gemm() without an alignment), only the inner dimension
/// does and an output width of 50257 costs nothing measurable; PyTorch's
/// row-major tensors make the output width count too.
///
/// Clocks. The GEMM and attention figures are measured in short benchmark
/// loops, at the boost clock. A training step keeps the tensor cores busy for
/// minutes, the board reaches its power limit and the SM clock settles lower:
/// under Clocks::kSustained every tensor-core kernel runs at the held share
/// of its burst rate that the device's `sustained` figure measured (maximum
/// sustainable over maximum achievable matmul FLOP/s). Streaming kernels keep
/// their rate: the HBM clock does not throttle with the SMs.
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtsim/core/units.hpp"
#include "dtsim/hw/device.hpp"
#include "dtsim/model/graph.hpp"

namespace dtsim::hw {

struct GemmTile {
  int m = 128;
  int n = 128;
  double efficiency = 1.0;  ///< rate relative to the largest tile's
};

/// One GEMM rate measurement the model is anchored to.
struct GemmAnchor {
  Dtype dtype = Dtype::kBf16;
  core::FlopsPerSecond rate;
  model::GemmShape shape;
  std::string source;
};

struct AttentionKernel {
  std::string name;                 ///< flash1, flash2, flash3, flash4, cudnn, ck
  double forward_utilization = 0;   ///< of the 16-bit dense peak: long sequences, head size 128, no mask
  double backward_utilization = 0;
  double ramp_tokens = 0;           ///< keys per query block at which fixed costs halve the rate
  double head_dim_knee = 0;         ///< d0 above
  /// The backward's own ramp and knee: its fixed costs (the dO.O pre-pass,
  /// the dQ accumulation) are larger, so it reaches its rate later.
  double backward_ramp_tokens = 0;
  double backward_head_dim_knee = 0;
  double causal_efficiency = 1.0;
  std::string source;
};

/// A GEMM whose inner dimension k is not a multiple of 16 bytes of operand
/// (8 bf16 elements): the library cannot use its 16-byte vectorised loads
/// and runs a kernel for the smaller alignment instead, at this share of the
/// aligned rate. `alignment_bytes`: the largest power of two dividing
/// k x operand bytes (2, 4 or 8).
/// A GEMM launched while `held_sms` of the device's SMs run a kernel it was
/// not told of (an NCCL collective's blocks) takes `slowdown` times as long.
struct HeldSmsSlowdown {
  int held_sms = 0;
  double slowdown = 1.0;
};

/// A GEMM beside blocks that move `traffic` through the device's memory
/// (bytes read and written a second) takes `slowdown` times as long as
/// beside the same blocks spinning: what a collective's memory traffic adds
/// to what its SMs take.
struct TrafficSlowdown {
  core::BytesPerSecond traffic;
  double slowdown = 1.0;
};

struct MisalignedRate {
  int alignment_bytes = 2;
  double efficiency = 1.0;
};

/// What a saturated device holds of its boost-clock burst rate, measured.
struct SustainedRate {
  double held_fraction = 1.0;  ///< held / burst, of tensor-core work
  std::string source;
};

/// A kernel as a benchmark loop times it (the boost clock), or as it runs in
/// a training step that keeps the device at its power limit.
enum class Clocks { kBurst, kSustained };

struct KernelFigures {
  int sms = 0;
  int pipeline_k = 0;
  std::vector<GemmTile> tiles;
  double stream_k_efficiency = 0;   ///< 0: the library runs no stream-K schedule
  /// The library's large GEMMs are persistent (Hopper's cuBLAS and CUTLASS
  /// 3: one CTA per SM it was told of, each looping over its tiles), and
  /// beside SMs it was not told of they run as measured here, by held SMs
  /// ascending (sim::contention_slowdown). Empty: a GEMM's tiles spread over
  /// the SMs it finds.
  std::vector<HeldSmsSlowdown> gemm_beside_held_sms;
  std::string gemm_beside_held_sms_source;
  /// Beside communication's memory traffic, by traffic ascending, on top of
  /// its SMs' share (sim::contention_slowdown); empty: not measured, none.
  std::vector<TrafficSlowdown> gemm_beside_traffic;
  std::string gemm_beside_traffic_source;
  std::vector<GemmAnchor> anchors;  ///< at most one per dtype
  std::vector<MisalignedRate> misaligned_k;  ///< by alignment, ascending; empty: not measured, no penalty
  std::string misaligned_k_source;
  core::Seconds gemm_launch;
  core::Seconds memory_launch;
  double memory_fraction = 0.85;    ///< of the HBM datasheet rate a streaming kernel reaches
  std::vector<AttentionKernel> attention;
  std::string megatron_attention;   ///< the fused kernel Megatron-Core / Transformer Engine runs here
  std::string pytorch_attention;    ///< the one PyTorch's scaled_dot_product_attention runs here
  /// The share of the GEMM model's rate that unfused attention's batched
  /// GEMMs (the scores', the context's and their gradients, as torch.bmm and
  /// torch.baddbmm call the BLAS) reach here: measured, or 1 where no
  /// measurement was made.
  double unfused_attention_gemm_efficiency = 1.0;
  std::string unfused_attention_source;
  std::optional<SustainedRate> sustained;  ///< none measured: the burst rate is held
  std::string file;                 ///< where the figures were read

  /// nullptr when the device has no such kernel (FlashAttention-3 on an A100).
  [[nodiscard]] const AttentionKernel* find_attention(std::string_view name) const;
  /// "flash2, flash1, triton", or "none": for error messages.
  [[nodiscard]] std::string attention_names() const;
  /// The share of the aligned rate a GEMM runs at whose least aligned
  /// leading dimension is `alignment_bytes` (k_alignment_bytes of it): 1 when
  /// it is 16, or no rate was measured.
  [[nodiscard]] double misaligned_efficiency(int alignment_bytes) const;
};

/// Bytes of one GEMM operand element: FP8 1, fp32/tf32 4, 16-bit 2.
double operand_bytes(Dtype dtype);

/// The alignment of a GEMM's rows along its inner dimension: the largest
/// power of two up to 16 dividing k x operand bytes (16: aligned; 0 for a
/// fraction of a byte).
int k_alignment_bytes(std::int64_t k, double operand_bytes);

/// FLOPs of attention over `heads` (batch x heads) of seq x head_dim, in
/// FlashAttention's convention: 4·s²·d per head forward, half of it under a
/// causal mask, 2.5x that for the backward.
double attention_flops(std::int64_t heads, std::int64_t seq, std::int64_t head_dim, bool causal, bool backward);
/// Query-key pairs a head computes, per query on average: s (s/2 causal), or
/// under a sliding window of w < s (causal): s·w − w²/2 pairs over s queries.
double keys_per_query(std::int64_t seq, bool causal, std::int64_t window);

class KernelModel {
 public:
  KernelModel(const Device& device, std::shared_ptr<const KernelFigures> figures, Clocks clocks = Clocks::kBurst);

  /// One GEMM (m x k by k x n, `shape.batch` of them): operands of
  /// `operand_bytes` each, a 16-bit output.
  [[nodiscard]] core::Seconds gemm(const model::GemmShape& shape, Dtype dtype, double operand_bytes) const;
  /// The same GEMM where its least aligned leading dimension, which the
  /// caller's layout decides, is `alignment_bytes` (gemm() takes the inner
  /// dimension's, as dtsim's executor lays its matrices out).
  [[nodiscard]] core::Seconds gemm(const model::GemmShape& shape, Dtype dtype, double operand_bytes,
                                   int alignment_bytes) const;
  /// One fused attention pass over `heads` (batch x heads of this rank) of
  /// seq x head_dim; `backward` costs the backward kernel.
  /// `window` > 0: sliding-window attention, each query seeing at most that
  /// many keys (FlashAttention skips the blocks outside it).
  [[nodiscard]] core::Seconds attention(const AttentionKernel& kernel, std::int64_t heads, std::int64_t seq,
                                        std::int64_t head_dim, bool causal, bool backward,
                                        std::int64_t window = 0) const;
  /// One of unfused attention's batched GEMMs: gemm() at the share of its
  /// rate such GEMMs reach on this device (KernelFigures::unfused_attention_gemm_efficiency).
  [[nodiscard]] core::Seconds unfused_attention_gemm(const model::GemmShape& shape, Dtype dtype, double operand_bytes,
                                                     int alignment_bytes) const;
  /// A streaming (memory-bound) kernel over `bytes`.
  [[nodiscard]] core::Seconds stream(core::Bytes bytes) const;

  /// The GEMM rate the model was anchored to for `dtype` (a burst): measured,
  /// or derived from the 16-bit anchor in proportion to the datasheet peaks.
  [[nodiscard]] core::FlopsPerSecond anchor_rate(Dtype dtype) const;
  [[nodiscard]] const KernelFigures& figures() const { return *figures_; }
  /// The share of its burst rate a tensor-core kernel runs at under these clocks.
  [[nodiscard]] double held_fraction() const { return held_fraction_; }

 private:
  /// FLOPs-equivalent at the per-SM rate of 1, in `dtype`'s iterations.
  [[nodiscard]] double tile_work(const model::GemmShape& shape, Dtype dtype) const;
  /// gemm() with its tensor-core work at `held_fraction` of the burst rate.
  [[nodiscard]] core::Seconds gemm_at(const model::GemmShape& shape, Dtype dtype, double operand_bytes,
                                      double held_fraction, int alignment_bytes) const;

  Device device_;
  std::shared_ptr<const KernelFigures> figures_;
  std::array<double, kDtypeCount> core_rate_{};  ///< FLOP/s the tile model runs at, per dtype
  std::array<double, kDtypeCount> ceiling_{};    ///< the best measured rate (launch aside), which no shape exceeds
  std::array<double, kDtypeCount> pipeline_k_{}; ///< the fixed per-tile part in each dtype's k iterations
  double held_fraction_ = 1.0;
};

}  // namespace dtsim::hw
