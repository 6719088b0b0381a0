#include "dtsim/cuda/gpu_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "dtsim/core/linear_fit.hpp"
#include "dtsim/cuda/check.hpp"
#include "dtsim/cuda/device_info.hpp"
#include "dtsim/cuda/device_kernels.hpp"
#include "dtsim/cuda/gpu_timer.hpp"
#include "dtsim/cuda/lt_gemm.hpp"
#include "dtsim/cuda/nccl_calibration.hpp"
#include "dtsim/cuda/stream_kernels.hpp"

namespace dtsim::cuda {
namespace {

nlohmann::json times_us(const GpuSeries& s) {
  nlohmann::json out = nlohmann::json::array();
  for (double t : s.seconds) out.push_back(std::round(t * 1e9) / 1e3);
  return out;
}

double flops(const model::GemmShape& s, std::int64_t count) {
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) * static_cast<double>(count);
}

std::vector<core::Bytes> steps_of_four(core::Bytes first, core::Bytes last) {
  std::vector<core::Bytes> out;
  for (double b = first.value(); b <= last.value() * 1.0001; b *= 4) out.emplace_back(b);
  return out;
}

// A GEMM timed, then as long idle as the timing took: back-to-back GEMMs
// draw an H100's whole 700 W and its power limiter lowers the SM clock by
// 15-35% within seconds (seen here: the same 4096^3 GEMM at 776 TFLOP/s
// alone, 647 after GPT-3 175B's), while a training step's mix of GEMMs,
// memory-bound kernels and the optimizer drew 550-620 W and held the
// maximum clock (tests/gpu/long_runs.sh). Half the time idle keeps the
// calibration at the clock a step runs at.
GpuSeries time_gemm(cudaStream_t stream, const std::function<void()>& body, int warmup, int repeats) {
  const auto start = std::chrono::steady_clock::now();
  GpuSeries s = time_on_stream(stream, body, warmup, repeats);
  std::this_thread::sleep_for(std::chrono::steady_clock::now() - start);
  return s;
}

std::string rate(double value, const char* unit) { return fmt::format("{:.4g} T{}", value / 1e12, unit); }

}  // namespace

nlohmann::json calibrate_gpu(const exec::GpuCalibrationOptions& o, std::ostream& log) {
  check(cudaSetDevice(0));
  nlohmann::json provenance = describe_gpu();
  provenance["arguments"] = o.arguments;
  fmt::print(log, "{} ({} SMs, {} GiB), driver {}, CUDA {}, cuBLASLt {}, NCCL {}\n", provenance["gpu"].get<std::string>(),
             provenance["sms"].get<int>(), provenance["memory_gib"].get<double>(), provenance["driver"].get<std::string>(),
             provenance["cuda_runtime"].get<std::string>(), provenance["cublaslt"].get<std::string>(),
             provenance["nccl"].get<std::string>());
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const GpuSeries launch = time_on_stream(stream, [&] { empty(stream); }, o.warmup, o.repeats);
  provenance["launch_overhead_us"] = std::round(launch.median() * 1e8) / 100;

  nlohmann::json kernels, by_dtype = nlohmann::json::object(), skipped = nlohmann::json::object(), clocks;
  nlohmann::json peaks = nlohmann::json::object();
  bool main_grid = false;
  {
    LtGemm gemm(stream);
    // The whole calls first: they are what plans run.
    std::size_t free = 0, capacity = 0;
    check(cudaMemGetInfo(&free, &capacity));
    nlohmann::json calls = nlohmann::json::array(), too_large = nlohmann::json::array();
    for (const exec::GpuCalibrationOptions::Call& c : o.calls) {
      const model::GemmShape& shape = c.call.gemm;
      // Timed as the executor runs it: an FP8 call with no FP8 algorithm runs in bf16, filed under the plan's dtype.
      const hw::Dtype runs = gemm.runnable(shape, c.call.count, c.dtype);
      if (!gemm.supported(shape, c.call.count, runs)) {
        fmt::print(log, "  warning: no {} algorithm for {} GEMMs of {}x{}x{}; left to the grid\n", hw::to_string(runs),
                   c.call.count, shape.m, shape.n, shape.k);
        continue;
      }
      // A call whose operands take more than half the GPU is left to the grid (grown buffers would not fit beside it).
      if (gemm.operand_bytes(shape, c.call.count, runs) > free / 2) {
        too_large.push_back({{"m", shape.m}, {"n", shape.n}, {"k", shape.k}, {"count", c.call.count},
                             {"dtype", hw::to_string(c.dtype)}});
        continue;
      }
      // Buffers grown for earlier calls plus this one's could outgrow the GPU: start afresh.
      if (gemm.device_bytes() + gemm.operand_bytes(shape, c.call.count, runs) > free * 6 / 10) gemm.release_operands();
      gemm.reserve(shape, c.call.count, runs);
      const GpuSeries s = time_gemm(stream, [&] { gemm.run(shape, c.call.count, runs); }, o.warmup, o.repeats);
      nlohmann::json row{{"m", shape.m}, {"n", shape.n}, {"k", shape.k}, {"count", c.call.count},
                         {"dtype", hw::to_string(c.dtype)}, {"median_us", s.median() * 1e6}, {"times_us", times_us(s)}};
      if (runs != c.dtype) row["ran_as"] = hw::to_string(runs);
      calls.push_back(row);
    }
    if (!calls.empty()) {
      provenance["clocks_after_gemm_calls"] = read_clocks();
      kernels["gemm_calls"] = calls;
      fmt::print(log, "  GEMM calls: {} measured whole\n", calls.size());
    }
    if (!too_large.empty()) {
      provenance["gemm_calls_too_large"] = too_large;
      fmt::print(log, "  GEMM calls left to the grid: {} whose operands take more than half the GPU's memory\n",
                 too_large.size());
    }
    // The grids after, with the calls' operands released: a long sequence's
    // attention scores (llama3-405b: 128 heads of 8192^2) took the room.
    gemm.release_operands();
    for (hw::Dtype dtype : o.dtypes) {
      const std::string name(hw::to_string(dtype));
      const std::int64_t top = *std::max_element(o.gemm_sizes.begin(), o.gemm_sizes.end());
      if (!gemm.supported({top, top, top, 1}, 1, dtype)) {
        skipped[name] = "cuBLASLt offers no algorithm for it on this GPU";
        fmt::print(log, "  GEMM {}: not available on this GPU\n", name);
        continue;
      }
      gemm.reserve({top, top, top, 1}, 1, dtype);
      nlohmann::json rows = nlohmann::json::array();
      double best = 0;
      for (std::int64_t m : o.gemm_sizes) {
        for (std::int64_t n : o.gemm_sizes) {
          for (std::int64_t k : o.gemm_sizes) {
            const model::GemmShape shape{m, n, k, 1};
            gemm.reserve(shape, 1, dtype);
            const GpuSeries s = time_gemm(stream, [&] { gemm.run(shape, 1, dtype); }, o.warmup, o.repeats);
            best = std::max(best, flops(shape, 1) / s.median());
            rows.push_back({{"m", m}, {"n", n}, {"k", k}, {"median_us", s.median() * 1e6}, {"times_us", times_us(s)}});
          }
        }
      }
      clocks[name] = read_clocks();
      peaks[name] = rate(best, "FLOP/s");
      fmt::print(log, "  GEMM {}: {} shapes, best {}\n", name, rows.size(), rate(best, "FLOP/s"));
      if (!main_grid) {
        kernels["gemm"] = rows;
        kernels["gemm_dtype"] = name;
        main_grid = true;
      } else {
        by_dtype[name] = rows;
      }
    }
    if (!main_grid) throw std::runtime_error("no GEMM dtype could be measured on this GPU");
    if (!by_dtype.empty()) kernels["gemm_by_dtype"] = by_dtype;

  }

  double copy_bandwidth = 0;
  {
    StreamKernels memory(stream);
    for (hw::KernelFamily family : hw::kMemoryFamilies) {
      nlohmann::json rows = nlohmann::json::array();
      for (core::Bytes bytes : steps_of_four(o.min_stream, o.max_stream)) {
        memory.reserve(family, bytes);
        const GpuSeries s = time_on_stream(stream, [&] { memory.run(family, bytes); }, o.warmup, o.repeats);
        rows.push_back({{"bytes", bytes.value()}, {"median_us", s.median() * 1e6}, {"times_us", times_us(s)}});
        if (family == hw::KernelFamily::kCopy) copy_bandwidth = bytes.value() / s.median();
      }
      kernels[std::string(hw::to_string(family))] = rows;
    }
    fmt::print(log, "  streaming kernels: copy of {:.3g} GiB at {}\n", o.max_stream.value() / 1073741824.0,
               rate(copy_bandwidth, "B/s"));
  }
  check(cudaStreamDestroy(stream));

  // Collectives: dtsim's fits need two ranks or more; one GPU's NCCL calls are kept as nccl-tests rows only.
  nlohmann::json collectives = nlohmann::json::array(), nccl_rows = nlohmann::json::array();
  const int gpus = provenance["gpus"].get<int>();
  const std::vector<CollectiveSeries> measured =
      o.collectives ? measure_nccl(gpus, steps_of_four(o.min_message, o.max_message), o.warmup, o.repeats)
                    : std::vector<CollectiveSeries>{};
  for (const CollectiveSeries& c : measured) {
    std::vector<core::SizeSample> samples;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& [bytes, s] : c.points) {
      const double t = s.median();
      samples.push_back({bytes, core::Seconds(t)});
      rows.push_back({{"bytes", bytes.value()}, {"median_us", t * 1e6}, {"times_us", times_us(s)}});
      nccl_rows.push_back({{"op", c.op}, {"ranks", c.ranks}, {"size_bytes", bytes.value()}, {"time_us", t * 1e6},
                           {"algbw_gbps", bytes.value() / t / 1e9},
                           {"busbw_gbps", bytes.value() / t / 1e9 * bus_bandwidth_factor(c.op, c.ranks)}});
    }
    if (c.ranks < 2) continue;
    const core::LinearFit fit = core::fit_latency_bandwidth(samples);
    collectives.push_back({{"op", c.op}, {"ranks", c.ranks},
                           {"fit", {{"latency", fmt::format("{:.4g} us", fit.latency.value() * 1e6)},
                                    {"bandwidth", fmt::format("{:.4g} GB/s", fit.bandwidth.value() / 1e9)}}},
                           {"samples", rows}});
  }
  provenance["nccl_tests"] = nccl_rows;
  if (o.collectives) {
    fmt::print(log, "  NCCL: {} GPU(s), {} measurements{}\n", gpus, nccl_rows.size(),
               gpus < 2 ? " (one GPU: no collective fit; dtsim keeps its fabric model)" : "");
  }
  provenance["clocks_after_gemm_grid"] = clocks;
  provenance["gemm_peak_measured"] = peaks;
  provenance["copy_bandwidth_measured"] = rate(copy_bandwidth, "B/s");
  if (!skipped.empty()) provenance["gemm_dtypes_skipped"] = skipped;

  const std::string device = provenance["catalog_device"].get<std::string>();
  nlohmann::json profile{{"schema", "dtsim.profile/1"},
                         {"device", device.empty() ? provenance["gpu"].get<std::string>() : device},
                         {"provenance", provenance},
                         {"kernels", kernels}};
  if (!collectives.empty()) profile["collectives"] = collectives;
  return profile;
}

}  // namespace dtsim::cuda
