// dtsim kernel: one GEMM, one attention or one streaming kernel costed on a
// device by its kernel model, with the figures it rests on. It is how the
// kernel model is checked against a kernel benchmark.
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/quantity_parse.hpp"
#include "dtsim/core/version.hpp"
#include "dtsim/hw/kernel_model.hpp"
#include "dtsim/hw/profile.hpp"

namespace dtsim::cli {

void add_kernel(CLI::App& app, KernelOptions& o) {
  CLI::App* sub = app.add_subcommand("kernel", "cost one GEMM, attention or streaming kernel on a device");
  sub->add_option("kind", o.kind, "gemm, attention or memory")->required();
  sub->add_option("--device", o.device, "catalog device (dtsim list)")->required();
  sub->add_option("--m", o.m, "GEMM rows (tokens)");
  sub->add_option("--n", o.n, "GEMM columns");
  sub->add_option("--k", o.k, "GEMM inner dimension");
  sub->add_option("--dtype", o.dtype, "fp32, tf32, fp16, bf16, fp8, fp4 (GEMM)");
  sub->add_option("--batch", o.batch, "independent GEMMs, or sequences for attention");
  sub->add_option("--seq", o.seq, "attention sequence length");
  sub->add_option("--heads", o.heads, "attention heads");
  sub->add_option("--head-dim", o.head_dim, "attention head size");
  sub->add_option("--window", o.window, "sliding-window attention: keys a query sees at most");
  sub->add_flag("--causal", o.causal, "causal mask: the lower triangle only");
  sub->add_flag("--backward", o.backward, "the backward kernel");
  sub->add_option("--kernel", o.kernel, "fused attention kernel (flash2, flash3, cudnn, ...); default: PyTorch's on the device");
  sub->add_option("--bytes", o.bytes, "bytes a streaming kernel reads and writes (\"1 GiB\")");
  sub->add_option("--profile", o.profile, "a profile whose kernel_model replaces the bundled one, or a calibration profile whose measured kernels are looked up");
  sub->add_flag("--json", o.json, "print a JSON object");
}

namespace {

std::int64_t positive(const std::optional<std::int64_t>& v, const char* flag, const std::string& kind) {
  if (!v) throw core::InputError(flag, "", fmt::format("missing: {} needs it", kind));
  if (*v < 1) throw core::InputError(flag, "", fmt::format("expected a positive integer, got {}", *v));
  return *v;
}

core::Bytes positive_bytes(const std::string& text) {
  if (text.empty()) throw core::InputError("--bytes", "", "missing: memory needs it (\"1 GiB\")");
  core::Bytes bytes;
  try {
    bytes = core::parse_bytes(text);
  } catch (const std::invalid_argument& e) {
    throw core::InputError("--bytes", "", e.what());
  }
  if (!(bytes.value() > 0)) throw core::InputError("--bytes", "", "expected a positive size like \"1 GiB\"");
  return bytes;
}

// A calibration profile's measured tables (dtsim-calibrate): the kernel as
// this machine was seen to run it, looked up as `simulate --profile` does.
int run_measured_kernel(const KernelOptions& o, const hw::Device& device, const hw::Profile& p, std::ostream& out) {
  if (p.device != device.name) {
    throw core::InputError(*o.profile, "/device", fmt::format("the profile measured the {}, not the {}", p.device, device.name));
  }
  nlohmann::json report{{"dtsim_version", core::version()}, {"device", device.name}, {"kind", o.kind},
                        {"measured", *o.profile}};
  std::string what, rate;
  core::Seconds time;
  if (o.kind == "gemm") {
    const auto dtype = hw::parse_dtype(o.dtype);
    if (!dtype) throw core::InputError("--dtype", "", fmt::format("expected fp32, tf32, fp16, bf16, fp8 or fp4, got \"{}\"", o.dtype));
    const model::GemmShape shape{positive(o.m, "--m", "gemm"), positive(o.n, "--n", "gemm"), positive(o.k, "--k", "gemm"), 1};
    const std::int64_t batch = positive(o.batch, "--batch", "gemm");
    time = p.kernels->time({hw::KernelFamily::kGemm, shape, batch, core::Bytes(0)}, *dtype);
    const double flops = 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) * static_cast<double>(shape.k) *
                         static_cast<double>(batch);
    what = fmt::format("gemm {} x {} x {}{} ({})", shape.m, shape.n, shape.k, batch > 1 ? fmt::format(", {} of them", batch) : "",
                       o.dtype);
    rate = fmt::format("{:.1f} TFLOP/s", flops / time.value() / 1e12);
    report["tflops"] = flops / time.value() / 1e12;
    report["flops"] = flops;
  } else if (o.kind == "memory") {
    const core::Bytes bytes = positive_bytes(o.bytes);
    time = p.kernels->time({hw::KernelFamily::kCopy, {}, 1, bytes});
    what = fmt::format("copy kernel over {:.0f} bytes", bytes.value());
    rate = fmt::format("{:.0f} GB/s", bytes.value() / time.value() / 1e9);
    report["bytes"] = bytes.value();
    report["bandwidth_GBps"] = bytes.value() / time.value() / 1e9;
  } else if (o.kind == "attention") {
    throw core::InputError(*o.profile, "/kernels", "a measured profile costs attention as its GEMMs (dtsim kernel gemm "
                                                   "--batch heads), not as a fused kernel");
  } else {
    throw core::InputError("kind", "", fmt::format("expected gemm, attention or memory, got \"{}\"", o.kind));
  }
  report["time_s"] = time.value();
  if (o.json) {
    fmt::print(out, "{}\n", report.dump(1));
    return 0;
  }
  fmt::print(out, "dtsim kernel: {} on the {}\n  time    {:.2f} us (measured)\n  rate    {}\n  profile {}\n", what,
             device.name, time.value() * 1e6, rate, *o.profile);
  return 0;
}

}  // namespace

int run_kernel(const KernelOptions& o, std::ostream& out) {
  hw::DeviceCatalog catalog;
  const hw::Device* found = catalog.find(o.device);
  if (!found) throw core::InputError("--device", "", fmt::format("expected one of {}, got \"{}\"", catalog.names(), o.device));
  hw::Device device = catalog.with_kernel_figures(*found);
  if (o.profile) {
    hw::Profile p = hw::load_profile(*o.profile);
    if (p.kernels) return run_measured_kernel(o, device, p, out);
    if (!p.kernel_model) {
      throw core::InputError(*o.profile, "/kernel_model", "missing: dtsim kernel needs a kernel_model section or measured kernels");
    }
    device.kernel_figures = p.kernel_model;
  }
  if (!device.kernel_figures) {
    throw core::InputError("--device", "", fmt::format("no kernel figures for the {} (no devices/{}.json); simulate "
                                                       "costs it with the roofline", device.name, device.name));
  }
  // Timed as a benchmark loop times it (boost clock); a training step holds
  // the device at its power limit, which the `held` line shows.
  const hw::KernelModel model(device, device.kernel_figures, hw::Clocks::kBurst);
  const hw::KernelModel held(device, device.kernel_figures, hw::Clocks::kSustained);
  std::optional<core::Seconds> held_time;
  nlohmann::json report{{"dtsim_version", core::version()}, {"device", device.name}, {"kind", o.kind}, {"figures", device.kernel_figures->file}};
  std::string what, rate;
  core::Seconds time;
  if (o.kind == "gemm") {
    const auto dtype = hw::parse_dtype(o.dtype);
    if (!dtype) throw core::InputError("--dtype", "", fmt::format("expected fp32, tf32, fp16, bf16, fp8 or fp4, got \"{}\"", o.dtype));
    if (device.peak_for(*dtype).value() <= 0) {
      throw core::InputError("--dtype", "", fmt::format("the {} has no {} units", device.name, o.dtype));
    }
    const model::GemmShape shape{positive(o.m, "--m", "gemm"), positive(o.n, "--n", "gemm"),
                                 positive(o.k, "--k", "gemm"), positive(o.batch, "--batch", "gemm")};
    time = model.gemm(shape, *dtype, hw::operand_bytes(*dtype));
    held_time = held.gemm(shape, *dtype, hw::operand_bytes(*dtype));
    const double flops = 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) *
                         static_cast<double>(shape.k) * static_cast<double>(shape.batch);
    const double tflops = flops / time.value() / 1e12;
    what = fmt::format("gemm {} x {} x {}{} ({})", shape.m, shape.n, shape.k,
                       shape.batch > 1 ? fmt::format(", {} of them", shape.batch) : "", o.dtype);
    rate = fmt::format("{:.1f} TFLOP/s ({:.1f}% of the {:.1f} TFLOP/s datasheet peak)", tflops,
                       100 * tflops * 1e12 / device.peak_for(*dtype).value(), device.peak_for(*dtype).value() / 1e12);
    report["tflops"] = tflops;
    report["flops"] = flops;
    report["anchor_tflops"] = model.anchor_rate(*dtype).value() / 1e12;
  } else if (o.kind == "attention") {
    const std::string name = o.kernel.empty() ? device.kernel_figures->pytorch_attention : o.kernel;
    const hw::AttentionKernel* kernel = device.kernel_figures->find_attention(name);
    if (!kernel) {
      throw core::InputError("--kernel", "", fmt::format("the {} has no figures for \"{}\"; it has {}", device.name, name,
                                                         device.kernel_figures->attention_names()));
    }
    const std::int64_t batch = positive(o.batch, "--batch", "attention"), seq = positive(o.seq, "--seq", "attention");
    const std::int64_t heads = positive(o.heads, "--heads", "attention"), dim = positive(o.head_dim, "--head-dim", "attention");
    const std::int64_t window = o.window ? positive(o.window, "--window", "attention") : 0;
    time = model.attention(*kernel, batch * heads, seq, dim, o.causal, o.backward, window);
    held_time = held.attention(*kernel, batch * heads, seq, dim, o.causal, o.backward, window);
    // The FLOPs it computes: the causal half, or the window's band.
    const double flops = hw::attention_flops(batch * heads, seq, dim, false, o.backward) *
                         hw::keys_per_query(seq, o.causal, window) / static_cast<double>(seq);
    const double tflops = flops / time.value() / 1e12;
    what = fmt::format("attention {} {}, {} x {} heads of {}, seq {}{}{}", name, o.backward ? "backward" : "forward", batch,
                       heads, dim, seq, o.causal ? ", causal" : "",
                       window > 0 ? fmt::format(", window {}", window) : "");
    rate = fmt::format("{:.1f} TFLOP/s", tflops);
    report["kernel"] = name;
    report["tflops"] = tflops;
    report["flops"] = flops;
    report["source"] = kernel->source;
  } else if (o.kind == "memory") {
    const core::Bytes bytes = positive_bytes(o.bytes);
    time = model.stream(bytes);
    what = fmt::format("streaming kernel over {:.0f} bytes", bytes.value());
    rate = fmt::format("{:.0f} GB/s", bytes.value() / time.value() / 1e9);
    report["bytes"] = bytes.value();
    report["bandwidth_GBps"] = bytes.value() / time.value() / 1e9;
  } else {
    throw core::InputError("kind", "", fmt::format("expected gemm, attention or memory, got \"{}\"", o.kind));
  }
  report["time_s"] = time.value();
  const bool throttles = held_time && held.held_fraction() < 1.0;
  if (throttles) {
    report["sustained_time_s"] = held_time->value();
    report["held_fraction"] = held.held_fraction();
  }
  if (o.json) {
    fmt::print(out, "{}\n", report.dump(1));
    return 0;
  }
  fmt::print(out, "dtsim kernel: {} on the {}\n  time    {:.2f} us (boost clock, as a benchmark loop times it)\n  rate    {}\n",
             what, device.name, time.value() * 1e6, rate);
  if (throttles) {
    fmt::print(out, "  held    {:.2f} us in a training step (at its power limit the device holds {:.1f}% of the burst rate)\n",
               held_time->value() * 1e6, 100 * held.held_fraction());
  }
  fmt::print(out, "  figures {}\n", device.kernel_figures->file);
  return 0;
}

}  // namespace dtsim::cli
