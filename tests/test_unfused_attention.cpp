// dtsim's unfused attention kernels on the A100 against two kernel
// measurements: Megatron-LM's and PyTorch's attention as FlashAttention's
// paper timed them on an A100 40GB (tests/validation/flash-attention-1-megatron.json,
// which the A100's unfused GEMM efficiency was fitted to: its fit is checked
// here, point by point), and PyTorch's as FlashAttention-2's paper timed it
// on an A100 80GB (tests/validation/flash-attention-2-pytorch.json, which no
// figure comes from: an independent check of it). Each test costs the
// kernels the benchmark's code runs, as
// KernelModel.UnfusedAttentionAgainstFlashAttention3sStandardAttention does
// on the H100 (README, "Validation").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dtsim/hw/kernel_model.hpp"
#include "kernel_model_of.hpp"

using namespace dtsim;

namespace {

// One point of the benchmark: batch x seq = 16k tokens, hidden 2048.
struct Point {
  std::int64_t seq = 0, head_dim = 0;
  bool causal = false, backward = false;
  /// Sequences x heads: 16k tokens of hidden 2048.
  [[nodiscard]] std::int64_t heads() const { return (2048 / head_dim) * (16384 / seq); }
};

// The kernels of attention_pytorch (flash-attention benchmarks/
// benchmark_flash_attention.py at 60499abc) and of their autograd backward,
// at dtsim's GEMM and streaming rates. Forward: q and k copied out of the
// packed qkv into (b·h) layouts, baddbmm writing the scores, under the
// causal mask an add that writes them anew, the softmax, v copied for
// einsum's batched GEMM. Backward: four batched GEMMs (the scores' and v's
// gradients through einsum, q's and k's through baddbmm), the softmax's
// backward (it reads the probabilities and their gradient, writes one),
// q's, k's and v's gradients copied back into the packed gradient. The
// softmax is costed at one read and one write a pass, the least any of
// PyTorch's kernels moves: up to 1,024 keys its warp kernel does exactly
// that; beyond, its block kernels read a row again or stage it in shared
// memory, which only adds time, so the gap there is a lower bound.
double modelled_seconds(const hw::KernelModel& a100, const Point& p) {
  const std::int64_t heads = p.heads();
  const double scores = static_cast<double>(heads) * static_cast<double>(p.seq * p.seq);
  const double tensor_bytes = 16384.0 * 2048.0 * 2.0;  // q, k, v or a gradient, fp16
  const auto gemm = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    return a100.unfused_attention_gemm({m, n, k, heads}, hw::Dtype::kFp16, 2, 16).value();
  };
  const auto stream = [&](double bytes) { return a100.stream(core::Bytes(bytes)).value(); };
  const std::int64_t s = p.seq, d = p.head_dim;
  if (!p.backward) {
    return stream(3 * 2 * tensor_bytes) + gemm(s, s, d) + (p.causal ? stream(2 * 2 * scores) : 0.0) +
           stream(2 * 2 * scores) + gemm(s, d, s);
  }
  return gemm(s, s, d) + 3 * gemm(s, d, s) + stream(3 * 2 * scores) + stream(3 * 2 * tensor_bytes);
}

// Megatron-LM's CoreAttention of 2022 (megatron/model/transformer.py), as
// tests/validation/fit_unfused_attention.py costs it: forward, baddbmm into
// the scores, the fused softmax (read, write), dropout (read, write, its
// one-byte mask), bmm with v, the context's permute copy; backward, that
// copy's, four batched GEMMs, dropout's backward (read the gradient and the
// mask, write) and the softmax's (read two, write one). PyTorch's attention
// in the same tables is costed with the same kernels: the paper's benchmark
// of it is not in hand, and its torch.softmax moves what Megatron's does.
double megatron_seconds(const hw::KernelModel& a100, std::int64_t sequences_x_heads, std::int64_t seq,
                        std::int64_t head_dim, bool backward, bool dropout) {
  const double scores = static_cast<double>(sequences_x_heads) * static_cast<double>(seq * seq);
  const double context = static_cast<double>(sequences_x_heads * seq * head_dim);
  const auto gemm = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    return a100.unfused_attention_gemm({m, n, k, sequences_x_heads}, hw::Dtype::kFp16, 2, 16).value();
  };
  const auto stream = [&](double bytes) { return a100.stream(core::Bytes(bytes)).value(); };  // 0 bytes: 0 s
  const double dropout_bytes = dropout ? 5.0 * scores : 0.0;
  const std::int64_t s = seq, d = head_dim;
  if (!backward) return gemm(s, s, d) + gemm(s, d, s) + stream(4 * scores) + stream(dropout_bytes) + stream(4 * context);
  return gemm(s, s, d) + 3 * gemm(s, d, s) + stream(4 * context) + stream(dropout_bytes) + stream(6 * scores);
}

}  // namespace

// The fit's own points (Megatron at 1k and 2k tokens) and the rest: every
// point printed; the fitted ones each within 20% and on average within 6%,
// PyTorch's at the same sizes within 20%. Below 1k tokens every method of
// the paper takes 0.2-0.4 ms whatever its work (the host's time for the
// call), so those points are printed, not held.
TEST(KernelModel, UnfusedAttentionAgainstFlashAttentionsMegatronAttention) {
  hw::DeviceCatalog catalog;
  const hw::KernelModel a100 = test_support::model_of(catalog, "A100-SXM-40GB");
  EXPECT_LT(a100.figures().unfused_attention_gemm_efficiency, 1.0) << "the A100 has its measured figure";
  const auto root = std::filesystem::path(DTSIM_SOURCE_DIR);
  const nlohmann::json fa1 = nlohmann::json::parse(std::ifstream(root / "tests/validation/flash-attention-1-megatron.json"));
  const nlohmann::json& shape = fa1.at("shape");
  const std::int64_t bh = shape.at("batch").get<std::int64_t>() * shape.at("heads").get<std::int64_t>();
  const std::int64_t head_dim = shape.at("head_dim");
  int fitted = 0, checked = 0;
  double fitted_log_sum = 0;
  for (const auto& series : fa1.at("series")) {
    const std::string kernel = series.at("kernel");
    const bool backward = series.at("pass") == "bwd", dropout = series.at("dropout");
    for (std::size_t i = 0; i < series.at("ms").size(); ++i) {
      const std::int64_t seq = fa1.at("sequence_lengths")[i];
      const double measured = series.at("ms")[i].get<double>() * 1e-3;
      const double dtsim = megatron_seconds(a100, bh, seq, head_dim, backward, dropout);
      const double error = dtsim / measured - 1;
      fmt::print("  {:<8} {} {:<10} {:>5} tokens: dtsim {:6.2f} ms, measured {:6.2f}: {:+.1f}%{}\n", kernel,
                 backward ? "backward" : "forward ", dropout ? "dropout" : "no dropout", seq, dtsim * 1e3,
                 measured * 1e3, 100 * error, seq < 1024 ? " (the host's time)" : "");
      if (seq < 1024) continue;
      EXPECT_LE(std::abs(error), 0.20) << kernel << " " << seq;
      ++checked;
      if (kernel == "megatron") {
        fitted_log_sum += std::abs(std::log(dtsim / measured));
        ++fitted;
      }
    }
  }
  EXPECT_EQ(fitted, 8);
  EXPECT_EQ(checked, 16);
  fmt::print("  Megatron at 1k and 2k tokens: mean |log error| {:.3f}\n", fitted_log_sum / fitted);
  EXPECT_LE(fitted_log_sum / fitted, 0.06);
}

TEST(KernelModel, UnfusedAttentionAgainstFlashAttention2sPyTorchAttention) {
  hw::DeviceCatalog catalog;
  const hw::KernelModel a100 = test_support::model_of(catalog, "A100-SXM-80GB");
  const auto root = std::filesystem::path(DTSIM_SOURCE_DIR);
  const nlohmann::json fa2 = nlohmann::json::parse(std::ifstream(root / "tests/validation/flash-attention-2-pytorch.json"));
  int points = 0;
  double lowest = 1e9, highest = 0, log_sum = 0;
  for (const auto& series : fa2.at("series")) {
    for (std::size_t i = 0; i < series.at("tflops").size(); ++i) {
      if (series.at("tflops")[i].is_null()) continue;  // out of memory
      const Point p{fa2.at("sequence_lengths")[i], series.at("head_dim"), series.at("causal"), series.at("pass") == "bwd"};
      const double flops = hw::attention_flops(p.heads(), p.seq, p.head_dim, p.causal, p.backward);
      const double dtsim = flops / modelled_seconds(a100, p) / 1e12, measured = series.at("tflops")[i];
      const double ratio = dtsim / measured;
      fmt::print("  PyTorch attention {} head size {:>3}{:>8} {:>5} tokens: dtsim {:>3.0f} TFLOP/s, measured {:>3.0f}: {:.2f}x\n",
                 p.backward ? "backward" : "forward ", p.head_dim, p.causal ? ", causal" : "", p.seq, dtsim, measured, ratio);
      lowest = std::min(lowest, ratio);
      highest = std::max(highest, ratio);
      log_sum += std::log(ratio);
      ++points;
    }
  }
  fmt::print("  {} points: dtsim {:.2f}x to {:.2f}x the measured rate, {:.2f}x on (geometric) average\n", points, lowest,
             highest, std::exp(log_sum / points));
  EXPECT_EQ(points, 32);
  // Before the A100 had its unfused GEMM figure (thirty-seventh session)
  // dtsim ran 1.26x to 2.66x the measured rate, 1.59x on average. An
  // independent check of that figure now: on average within 15%, and no
  // point further off than the one the figure puts at half its neighbour's
  // rate (the head-size-128 backward at 512 tokens).
  const double average = std::exp(log_sum / points);
  EXPECT_GE(average, 0.87);
  EXPECT_LE(average, 1.15);
  EXPECT_GE(lowest, 0.8);
  EXPECT_LE(highest, 1.8);
}
