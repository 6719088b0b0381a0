#include "dtsim/hw/kernel_figures_reader.hpp"

#include <fmt/format.h>

namespace dtsim::hw {
namespace {

double fraction(core::JsonReader& r, const std::string& key) {
  const double v = r.number(key);
  if (!(v > 0 && v <= 1)) r.fail(key, fmt::format("expected a fraction in (0, 1], got {}", v));
  return v;
}

double non_negative(core::JsonReader& r, const std::string& key) {
  const double v = r.number(key);
  if (!(v >= 0)) r.fail(key, fmt::format("expected a number >= 0, got {}", v));
  return v;
}

GemmAnchor read_anchor(core::JsonReader a) {
  GemmAnchor out;
  out.dtype = *parse_dtype(a.choice("dtype", {"fp32", "tf32", "fp16", "bf16", "fp8"}));
  out.rate = a.flop_rate("rate");
  if (!(out.rate.value() > 0)) a.fail("rate", "expected a positive rate like \"794.5 TFLOP/s\"");
  out.shape = {a.count("m"), a.count("n"), a.count("k"), 1};
  out.source = a.string("source");
  a.finish();
  return out;
}

AttentionKernel read_attention(core::JsonReader k) {
  AttentionKernel out;
  out.name = k.choice("name", {"flash1", "flash2", "flash3", "flash4", "cudnn", "ck", "triton"});
  out.forward_utilization = fraction(k, "forward_utilization");
  out.backward_utilization = fraction(k, "backward_utilization");
  out.ramp_tokens = non_negative(k, "ramp_tokens");
  out.head_dim_knee = non_negative(k, "head_dim_knee");
  // Optional: a kernel measured in one pass only keeps one shape for both.
  out.backward_ramp_tokens = k.has("backward_ramp_tokens") ? non_negative(k, "backward_ramp_tokens") : out.ramp_tokens;
  out.backward_head_dim_knee =
      k.has("backward_head_dim_knee") ? non_negative(k, "backward_head_dim_knee") : out.head_dim_knee;
  out.causal_efficiency = fraction(k, "causal_efficiency");
  out.source = k.string("source");
  k.finish();
  return out;
}

// Either the two rates a matmul benchmark measured on the device (or its
// twin), or the two clocks the vendor states.
SustainedRate read_sustained(core::JsonReader s) {
  double burst = 0, held = 0;
  std::string burst_key = "burst", held_key = "held", unit = "MHz";
  if (s.has("burst_clock_mhz")) {
    burst_key = "burst_clock_mhz";
    held_key = "held_clock_mhz";
    burst = s.number(burst_key);
    held = s.number(held_key);
  } else {
    burst = s.flop_rate(burst_key).value() / 1e12;
    held = s.flop_rate(held_key).value() / 1e12;
    unit = "TFLOP/s";
  }
  if (!(burst > 0)) s.fail(burst_key, fmt::format("expected a positive figure, got {:g} {}", burst, unit));
  if (!(held > 0 && held <= burst)) {
    s.fail(held_key, fmt::format("expected a positive figure no higher than {} ({:g} {}), got {:g} {}", burst_key,
                                 burst, unit, held, unit));
  }
  SustainedRate out{held / burst, s.string("source")};
  s.finish();
  return out;
}

}  // namespace

KernelFigures read_kernel_figures(core::JsonReader r) {
  KernelFigures f;
  f.file = r.file();
  f.sms = static_cast<int>(r.count("sms"));
  r.ignore("source");

  core::JsonReader gemm = r.object("gemm");
  f.pipeline_k = static_cast<int>(gemm.integer("pipeline_k"));
  if (f.pipeline_k < 0) gemm.fail("pipeline_k", "expected a number of k elements >= 0");
  f.gemm_launch = gemm.duration("launch");
  for (core::JsonReader& t : gemm.objects("tiles")) {
    f.tiles.push_back({static_cast<int>(t.count("m")), static_cast<int>(t.count("n")), fraction(t, "efficiency")});
    t.finish();
  }
  if (f.tiles.empty()) gemm.fail("tiles", "expected at least one tile");
  if (gemm.has("stream_k_efficiency")) f.stream_k_efficiency = fraction(gemm, "stream_k_efficiency");
  if (gemm.has("persistent")) {
    core::JsonReader persistent = gemm.object("persistent");
    f.gemm_beside_held_sms_source = persistent.string("source");  // required: why, and the measurement
    for (core::JsonReader& p : persistent.objects("beside_held_sms")) {
      const auto held = p.integer("held_sms");
      if (held < 1 || held >= f.sms) p.fail("held_sms", fmt::format("expected 1 to {} SMs, got {}", f.sms - 1, held));
      if (!f.gemm_beside_held_sms.empty() && held <= f.gemm_beside_held_sms.back().held_sms) {
        p.fail("held_sms", "expected the points in ascending held SMs, each once");
      }
      const double slowdown = p.number("slowdown");
      if (!(slowdown >= 1.0 && slowdown <= 100.0)) p.fail("slowdown", fmt::format("expected 1 to 100, got {}", slowdown));
      f.gemm_beside_held_sms.push_back({static_cast<int>(held), slowdown});
      p.finish();
    }
    if (f.gemm_beside_held_sms.empty()) persistent.fail("beside_held_sms", "expected at least one {held_sms, slowdown}");
    persistent.finish();
  }
  if (gemm.has("beside_traffic")) {
    core::JsonReader traffic = gemm.object("beside_traffic");
    f.gemm_beside_traffic_source = traffic.string("source");  // required: the measurement
    for (core::JsonReader& p : traffic.objects("points")) {
      const core::BytesPerSecond rate = p.bandwidth("traffic");
      if (!(rate.value() > 0)) p.fail("traffic", "expected a positive rate");
      if (!f.gemm_beside_traffic.empty() && rate.value() <= f.gemm_beside_traffic.back().traffic.value()) {
        p.fail("traffic", "expected the points in ascending traffic, each once");
      }
      const double slowdown = p.number("slowdown");
      if (!(slowdown >= 1.0 && slowdown <= 100.0)) p.fail("slowdown", fmt::format("expected 1 to 100, got {}", slowdown));
      f.gemm_beside_traffic.push_back({rate, slowdown});
      p.finish();
    }
    if (f.gemm_beside_traffic.empty()) traffic.fail("points", "expected at least one {traffic, slowdown}");
    traffic.finish();
  }
  for (core::JsonReader& a : gemm.objects("anchors")) {
    GemmAnchor anchor = read_anchor(a);
    for (const GemmAnchor& seen : f.anchors) {
      if (seen.dtype == anchor.dtype) gemm.fail("anchors", fmt::format("two anchors for {}", to_string(anchor.dtype)));
    }
    f.anchors.push_back(anchor);
  }
  if (gemm.has("misaligned_k")) {
    core::JsonReader misaligned = gemm.object("misaligned_k");
    for (core::JsonReader& r : misaligned.objects("rates")) {
      const auto alignment = r.integer("alignment_bytes");
      if (alignment != 2 && alignment != 4 && alignment != 8) r.fail("alignment_bytes", fmt::format("expected 2, 4 or 8, got {}", alignment));
      if (!f.misaligned_k.empty() && alignment <= f.misaligned_k.back().alignment_bytes) {
        r.fail("alignment_bytes", "expected the rates in ascending alignment, each once");
      }
      f.misaligned_k.push_back({static_cast<int>(alignment), fraction(r, "efficiency")});
      r.finish();
    }
    if (f.misaligned_k.empty()) misaligned.fail("rates", "expected at least one {alignment_bytes, efficiency}");
    f.misaligned_k_source = misaligned.string("source");
    misaligned.finish();
  }
  bool sixteen = false;
  for (const GemmAnchor& a : f.anchors) sixteen |= a.dtype == Dtype::kBf16 || a.dtype == Dtype::kFp16;
  if (!sixteen) gemm.fail("anchors", "expected a bf16 or fp16 anchor (the other dtypes scale from it)");
  gemm.string("source");
  gemm.finish();

  core::JsonReader memory = r.object("memory");
  f.memory_fraction = fraction(memory, "fraction");
  f.memory_launch = memory.duration("launch");
  memory.string("source");
  memory.finish();

  if (auto attention = r.optional_object("attention")) {
    for (core::JsonReader& k : attention->objects("kernels")) f.attention.push_back(read_attention(k));
    auto known = [&](const std::string& key) {
      std::string name = attention->string(key);
      if (!f.find_attention(name)) {
        attention->fail(key, fmt::format("expected the name of one of the kernels listed here, got \"{}\"", name));
      }
      return name;
    };
    f.megatron_attention = known("megatron");
    f.pytorch_attention = known("pytorch");
    if (auto unfused = attention->optional_object("unfused")) {
      f.unfused_attention_gemm_efficiency = fraction(*unfused, "gemm_efficiency");
      f.unfused_attention_source = unfused->string("source");
      unfused->finish();
    }
    attention->ignore("source");  // optional: why those two
    attention->finish();
  }
  if (auto sustained = r.optional_object("sustained")) f.sustained = read_sustained(std::move(*sustained));
  r.finish();
  return f;
}

}  // namespace dtsim::hw
