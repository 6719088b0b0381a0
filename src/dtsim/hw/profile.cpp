#include "dtsim/hw/profile.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/hw/kernel_figures_reader.hpp"

namespace dtsim::hw {
namespace {

Efficiency read_efficiency(core::JsonReader e) {
  Efficiency defaults;
  Efficiency out;
  out.gemm_fraction = e.number_or("gemm_fraction", defaults.gemm_fraction);
  out.attention_fraction = e.number_or("attention_fraction", defaults.attention_fraction);
  out.memory_fraction = e.number_or("memory_fraction", defaults.memory_fraction);
  out.gemm_overhead = e.duration_or("gemm_overhead", defaults.gemm_overhead);
  out.memory_overhead = e.duration_or("memory_overhead", defaults.memory_overhead);
  for (const char* key : {"gemm_fraction", "attention_fraction", "memory_fraction"}) {
    double v = e.raw().value(key, 0.5);
    if (!(v > 0 && v <= 1)) e.fail(key, "expected a fraction in (0, 1], got " + std::to_string(v));
  }
  e.finish();
  return out;
}

DeviceFigures read_figures(core::JsonReader f) {
  DeviceFigures out;
  const std::string dtype = f.choice("dtype", {"fp32", "tf32", "fp16", "bf16", "fp8"});
  out.dtype = *parse_dtype(dtype);
  out.peak = f.flop_rate("peak");
  out.memory_bandwidth = f.bandwidth("memory_bandwidth");
  out.memory = f.bytes("memory");
  if (!(out.peak.value() > 0)) f.fail("peak", "expected a positive rate");
  if (!(out.memory_bandwidth.value() > 0)) f.fail("memory_bandwidth", "expected a positive bandwidth");
  if (!(out.memory.value() > 0)) f.fail("memory", "expected a positive size like \"80 GiB\", got \"0 GiB\"");
  f.finish();
  return out;
}

// A measured point: {"bytes": 4096, "median_us": 1.9, "times_us": [...]}.
core::SizeSample read_size_sample(core::JsonReader s) {
  core::SizeSample out{core::Bytes(s.number("bytes")), core::Seconds(s.number("median_us") * 1e-6)};
  s.ignore("times_us");
  if (!(out.bytes.value() > 0)) s.fail("bytes", "expected a positive size");
  if (!(out.time.value() > 0)) s.fail("median_us", "expected a positive time");
  s.finish();
  return out;
}

Dtype read_dtype(core::JsonReader& r, const std::string& key) {
  const std::string text = r.choice(key, {"fp32", "tf32", "fp16", "bf16", "fp8", "fp4"});
  return *parse_dtype(text);
}

GemmTable read_gemm_grid(core::JsonReader& parent, const std::string& key) {
  std::vector<GemmSample> gemm;
  for (core::JsonReader& s : parent.objects(key)) {
    gemm.push_back({s.count("m"), s.count("n"), s.count("k"), core::Seconds(s.number("median_us") * 1e-6)});
    if (!(gemm.back().time.value() > 0)) s.fail("median_us", "expected a positive time");
    s.ignore("times_us");
    s.finish();
  }
  try {
    return GemmTable(gemm);
  } catch (const std::invalid_argument& e) {
    parent.fail(key, e.what());
  }
}

MeasuredKernels read_kernels(core::JsonReader k) {
  MeasuredKernels out;
  out.gemm = read_gemm_grid(k, "gemm");
  if (k.has("gemm_dtype")) read_dtype(k, "gemm_dtype");  // checked; the main grid serves every dtype without its own
  if (auto grids = k.optional_object("gemm_by_dtype")) {
    for (const auto& [name, ignored] : grids->raw().items()) {
      const std::optional<Dtype> dtype = parse_dtype(name);
      if (!dtype) grids->fail(name, "expected a dtype (fp32, tf32, fp16, bf16, fp8, fp4) as the key");
      out.gemm_by_dtype[*dtype] = read_gemm_grid(*grids, name);
    }
    grids->finish();
  }
  if (k.has("gemm_calls")) {
    for (core::JsonReader& s : k.objects("gemm_calls")) {
      const GemmCallKey key{s.count("m"), s.count("n"), s.count("k"), s.count("count"), read_dtype(s, "dtype")};
      const core::Seconds time(s.number("median_us") * 1e-6);
      if (!(time.value() > 0)) s.fail("median_us", "expected a positive time");
      s.ignore("times_us");
      s.ignore("ran_as");  // an FP8 call the GPU ran in bf16, timed so
      s.finish();
      out.gemm_calls[key] = time;
    }
  }
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string name(to_string(kMemoryFamilies[i]));
    std::vector<core::SizeSample> samples;
    for (core::JsonReader& s : k.objects(name)) samples.push_back(read_size_sample(s));
    try {
      out.memory[i] = core::SizeTable(samples);
    } catch (const std::invalid_argument& e) {
      k.fail(name, e.what());
    }
  }
  k.finish();
  return out;
}

MeasuredCollective read_collective(core::JsonReader c) {
  MeasuredCollective out;
  out.op = c.choice("op", {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv", "ring_exchange"});
  out.ranks = static_cast<int>(c.count("ranks"));
  core::JsonReader fit = c.object("fit");
  out.fit = {fit.duration("latency"), fit.bandwidth("bandwidth")};
  fit.finish();
  std::vector<core::SizeSample> samples;
  for (core::JsonReader& s : c.objects("samples")) samples.push_back(read_size_sample(s));
  // The samples, not the fit, cost the collective (net::CalibratedCollective): two sizes or more, or none.
  if (!samples.empty()) {
    try {
      out.medians = core::SizeTable(std::move(samples));
    } catch (const std::invalid_argument& e) {
      c.fail("samples", e.what());
    }
  }
  c.finish();
  return out;
}

}  // namespace

Profile parse_profile(const nlohmann::json& document, const std::string& file) {
  core::JsonReader r(document, file);
  r.choice("schema", {"dtsim.profile/1"});
  Profile profile;
  profile.device = r.string("device");
  if (r.has("provenance")) profile.provenance = r.object("provenance").raw();
  if (r.has("efficiency")) {
    profile.efficiency = read_efficiency(r.object("efficiency"));
    profile.has_efficiency = true;
  }
  if (r.has("device_figures")) profile.figures = read_figures(r.object("device_figures"));
  if (r.has("kernels")) profile.kernels = std::make_shared<const MeasuredKernels>(read_kernels(r.object("kernels")));
  if (r.has("kernel_model")) {
    profile.kernel_model = std::make_shared<const KernelFigures>(read_kernel_figures(r.object("kernel_model")));
  }
  if (r.has("collectives")) {
    for (core::JsonReader& c : r.objects("collectives")) profile.collectives.push_back(read_collective(c));
  }
  r.finish();
  return profile;
}

Profile load_profile(const std::filesystem::path& path) {
  return parse_profile(core::load_json_file(path), path.string());
}

Device apply_figures(Device device, const Profile& profile) {
  if (!profile.figures) return device;
  const DeviceFigures& f = *profile.figures;
  device.peak = {};
  device.peak[static_cast<std::size_t>(f.dtype)] = f.peak;
  device.hbm_bandwidth = f.memory_bandwidth;
  device.hbm_capacity = f.memory;
  device.source = fmt::format("{} (figures measured by the calibration profile)", device.source);
  return device;
}

}  // namespace dtsim::hw
