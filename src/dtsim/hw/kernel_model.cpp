#include "dtsim/hw/kernel_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtsim::hw {
namespace {

double ceil_div(double a, double b) { return std::ceil(a / b); }

std::size_t index(Dtype d) { return static_cast<std::size_t>(d); }

}  // namespace

double operand_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp8: return 1.0;
    case Dtype::kFp4: return 0.5;
    case Dtype::kFp32:
    case Dtype::kTf32: return 4.0;
    default: return 2.0;
  }
}

double attention_flops(std::int64_t heads, std::int64_t seq, std::int64_t head_dim, bool causal, bool backward) {
  const double s = static_cast<double>(seq);
  return 4.0 * s * s * static_cast<double>(head_dim) * static_cast<double>(heads) * (causal ? 0.5 : 1.0) *
         (backward ? 2.5 : 1.0);
}

double keys_per_query(std::int64_t seq, bool causal, std::int64_t window) {
  const double s = static_cast<double>(seq);
  if (window <= 0 || window >= seq) return causal ? s / 2 : s;
  const double w = static_cast<double>(window);
  // Causal: query i sees min(i + 1, w) keys. Both ways: up to w on each side.
  return causal ? (s * w - w * w / 2) / s : std::min(s, 2 * w);
}

const AttentionKernel* KernelFigures::find_attention(std::string_view name) const {
  for (const AttentionKernel& a : attention) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string KernelFigures::attention_names() const {
  std::string out;
  for (const AttentionKernel& a : attention) out += (out.empty() ? "" : ", ") + a.name;
  return out.empty() ? "none" : out;
}

int k_alignment_bytes(std::int64_t k, double operand_bytes) {
  const double row_bytes = static_cast<double>(k) * operand_bytes;
  int alignment = 16;
  while (alignment > 0 && std::fmod(row_bytes, alignment) != 0) alignment /= 2;
  return alignment;
}

double KernelFigures::misaligned_efficiency(int alignment) const {
  if (misaligned_k.empty() || alignment >= 16) return 1.0;
  // The measured class at or below this alignment; below every measured one, the smallest.
  double efficiency = misaligned_k.front().efficiency;
  for (const MisalignedRate& r : misaligned_k) {
    if (r.alignment_bytes <= alignment) efficiency = r.efficiency;
  }
  return efficiency;
}

KernelModel::KernelModel(const Device& device, std::shared_ptr<const KernelFigures> figures, Clocks clocks)
    : device_(device), figures_(std::move(figures)) {
  if (clocks == Clocks::kSustained && figures_->sustained) held_fraction_ = figures_->sustained->held_fraction;
  // pipeline_k was fitted in 16-bit iterations. The fill and the epilogue
  // move the same bytes in every dtype; a narrower one's k iterations are
  // shorter by the tensor cores' rate ratio, so the same time is that many
  // more of them.
  const double peak16 = device_.peak_for(Dtype::kBf16).value() > 0 ? device_.peak_for(Dtype::kBf16).value()
                                                                     : device_.peak_for(Dtype::kFp16).value();
  for (Dtype d : kAllDtypes) {
    const double narrow = device_.peak_for(d).value();
    const bool scaled = operand_bytes(d) < 2 && peak16 > 0 && narrow > peak16;
    pipeline_k_[index(d)] = figures_->pipeline_k * (scaled ? narrow / peak16 : 1.0);
  }
  // Anchor each measured dtype: the model must take the measured time, launch
  // included, at the measured shape. Dtypes without a measurement take the
  // 16-bit anchor's share of the datasheet peak (the same kernels on the same SMs).
  const GemmAnchor* sixteen = nullptr;
  for (const GemmAnchor& a : figures_->anchors) {
    const double flops = 2.0 * static_cast<double>(a.shape.m) * static_cast<double>(a.shape.n) *
                         static_cast<double>(a.shape.k) * static_cast<double>(a.shape.batch);
    const double busy = flops / a.rate.value() - figures_->gemm_launch.value();
    const double busy_time = busy > 0 ? busy : flops / a.rate.value();
    core_rate_[index(a.dtype)] = tile_work(a.shape, a.dtype) / busy_time;
    ceiling_[index(a.dtype)] = flops / busy_time;  // the kernel's rate once launched
    if (a.dtype == Dtype::kBf16 || (a.dtype == Dtype::kFp16 && !sixteen)) sixteen = &a;
  }
  if (!sixteen) return;
  const double share = core_rate_[index(sixteen->dtype)] / device_.peak_for(sixteen->dtype).value();
  const double ceiling_share = ceiling_[index(sixteen->dtype)] / device_.peak_for(sixteen->dtype).value();
  for (Dtype d : kAllDtypes) {
    if (core_rate_[index(d)] <= 0) core_rate_[index(d)] = share * device_.peak_for(d).value();
    if (ceiling_[index(d)] <= 0) ceiling_[index(d)] = ceiling_share * device_.peak_for(d).value();
  }
}

double KernelModel::tile_work(const model::GemmShape& s, Dtype dtype) const {
  const KernelFigures& f = *figures_;
  const double k = static_cast<double>(s.k) + pipeline_k_[index(dtype)];
  double best = std::numeric_limits<double>::infinity();
  for (const GemmTile& t : f.tiles) {
    const double tiles = ceil_div(static_cast<double>(s.m), t.m) * ceil_div(static_cast<double>(s.n), t.n) *
                         static_cast<double>(std::max<std::int64_t>(1, s.batch));
    const double waves = ceil_div(tiles, f.sms);
    const double per_tile = 2.0 * t.m * t.n * k / t.efficiency;
    best = std::min(best, waves * per_tile * f.sms);
  }
  // Stream-K: the k loops of all tiles split evenly over the SMs, no wave
  // tail, at the cost of fixing up partial tiles.
  if (f.stream_k_efficiency > 0) {
    const GemmTile& t = f.tiles.front();
    const double padded = ceil_div(static_cast<double>(s.m), t.m) * t.m * ceil_div(static_cast<double>(s.n), t.n) * t.n;
    best = std::min(best, 2.0 * padded * static_cast<double>(std::max<std::int64_t>(1, s.batch)) *
                              k / (t.efficiency * f.stream_k_efficiency));
  }
  return best;
}

core::FlopsPerSecond KernelModel::anchor_rate(Dtype dtype) const {
  for (const GemmAnchor& a : figures_->anchors) {
    if (a.dtype == dtype) return a.rate;
  }
  // No measurement: what the model gives at the 16-bit anchor's shape.
  for (const GemmAnchor& a : figures_->anchors) {
    if (a.dtype == Dtype::kBf16 || a.dtype == Dtype::kFp16) {
      const double flops = 2.0 * static_cast<double>(a.shape.m) * static_cast<double>(a.shape.n) *
                           static_cast<double>(a.shape.k) * static_cast<double>(a.shape.batch);
      const double ob = operand_bytes(dtype);
      return core::FlopsPerSecond(flops / gemm_at(a.shape, dtype, ob, 1.0, k_alignment_bytes(a.shape.k, ob)).value());
    }
  }
  return core::FlopsPerSecond(0);
}

core::Seconds KernelModel::gemm(const model::GemmShape& shape, Dtype dtype, double operand_bytes) const {
  return gemm_at(shape, dtype, operand_bytes, held_fraction_, k_alignment_bytes(shape.k, operand_bytes));
}

core::Seconds KernelModel::gemm(const model::GemmShape& shape, Dtype dtype, double operand_bytes,
                                int alignment_bytes) const {
  return gemm_at(shape, dtype, operand_bytes, held_fraction_, alignment_bytes);
}

core::Seconds KernelModel::gemm_at(const model::GemmShape& shape, Dtype dtype, double operand_bytes,
                                   double held_fraction, int alignment_bytes) const {
  const double m = static_cast<double>(shape.m), n = static_cast<double>(shape.n), k = static_cast<double>(shape.k);
  const double batch = static_cast<double>(std::max<std::int64_t>(1, shape.batch));
  const double rate = core_rate_[index(dtype)];
  // No shape runs faster than the best one a search over shapes found.
  const double flops = 2.0 * m * n * k * batch;
  const double compute = rate > 0 ? std::max(tile_work(shape, dtype) / rate, flops / ceiling_[index(dtype)]) / held_fraction /
                                        figures_->misaligned_efficiency(alignment_bytes)
                                  : 0;
  const double bytes = batch * ((m * k + k * n) * operand_bytes + m * n * 2.0);
  const double memory = bytes / (device_.hbm_bandwidth.value() * figures_->memory_fraction);
  return figures_->gemm_launch + core::Seconds(std::max(compute, memory));
}

core::Seconds KernelModel::attention(const AttentionKernel& a, std::int64_t heads, std::int64_t seq,
                                     std::int64_t head_dim, bool causal, bool backward, std::int64_t window) const {
  const double s = static_cast<double>(seq), d = static_cast<double>(head_dim);
  const double keys = keys_per_query(seq, causal, window);
  // FLOPs in proportion to the pairs computed: the causal half, or the window's band.
  const double flops = attention_flops(heads, seq, head_dim, false, backward) * keys / s;
  const double knee = backward ? a.backward_head_dim_knee : a.head_dim_knee;
  const double ramp = backward ? a.backward_ramp_tokens : a.ramp_tokens;
  const double head = (d / (d + knee)) / (128.0 / (128.0 + knee));
  const double utilization = (backward ? a.backward_utilization : a.forward_utilization) * head * keys /
                             (keys + ramp) * (causal ? a.causal_efficiency : 1.0);
  // Attention keeps its softmax in 16 bits even when GEMMs run in FP8 (Transformer Engine's default).
  const double peak = device_.peak_for(Dtype::kBf16).value() > 0 ? device_.peak_for(Dtype::kBf16).value()
                                                                   : device_.peak_for(Dtype::kFp16).value();
  return figures_->gemm_launch + core::Seconds(flops / (peak * utilization * held_fraction_));
}

core::Seconds KernelModel::unfused_attention_gemm(const model::GemmShape& shape, Dtype dtype, double operand_bytes,
                                                  int alignment_bytes) const {
  const core::Seconds launch = figures_->gemm_launch;
  return launch + (gemm(shape, dtype, operand_bytes, alignment_bytes) - launch) / figures_->unfused_attention_gemm_efficiency;
}

core::Seconds KernelModel::stream(core::Bytes bytes) const {
  if (bytes.value() <= 0) return core::Seconds(0);
  return figures_->memory_launch + bytes / (device_.hbm_bandwidth * figures_->memory_fraction);
}


}  // namespace dtsim::hw
