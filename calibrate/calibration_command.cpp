#include "calibrate/calibration_command.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "calibrate/workload_calls.hpp"
#include "dtsim/core/host_memory.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/quantity_parse.hpp"
#include "dtsim/exec/gpu_backend.hpp"

namespace dtsim::calibrate {
namespace {

std::pair<core::Bytes, core::Bytes> size_range(const std::string& flag, const std::string& text) {
  try {
    auto range = core::parse_size_range(text);
    if (!(range.first.value() >= 4) || range.second <= range.first) throw std::invalid_argument("expected small:large");
    return range;
  } catch (const std::invalid_argument& e) {
    throw core::InputError(flag, "", fmt::format("{} (a range is written 4KiB:64MiB), got \"{}\"", e.what(), text));
  }
}

}  // namespace

core::Bytes streaming_limit(core::Bytes last_level_cache, core::Bytes available_memory, int ranks) {
  constexpr double kFloor = 64.0 * 1048576;
  double limit = 4096;
  while (limit < std::max(kFloor, 2 * last_level_cache.value())) limit *= 4;
  while (limit > kFloor && 1.5 * limit * std::max(1, ranks) > available_memory.value() / 2) limit /= 4;
  return core::Bytes(limit);
}

void add_options(CLI::App& app, CommandOptions& o) {
  app.add_option("--out,-o", o.out, "where to write the profile")->capture_default_str();
  app.add_option("--ranks,-n", o.ranks, "MPI ranks (one per core); started with mpirun unless already under it")
      ->capture_default_str();
  app.add_option("--gemm-sizes", o.gemm_sizes, "the GEMM grid: every (m, n, k) from this list")->capture_default_str();
  app.add_option("--stream-sizes", o.stream_sizes, "streaming-kernel sizes, x4 steps (auto: past twice the last-level cache)")
      ->capture_default_str();
  app.add_option("--message-sizes", o.message_sizes, "collective sizes, x4 steps")->capture_default_str();
  app.add_flag("--quick", o.quick, "fewer iterations per point (tests; noisier)");
  app.add_option("--backend", o.backend, "cpu: BLAS and MPI on this machine's cores; cuda: cuBLASLt, the streaming "
                                          "kernels and NCCL on its GPUs")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--dtypes", o.dtypes, "cuda: the dtypes of the GEMM grids (the first is the main table)")
      ->capture_default_str();
  app.add_option("--workload-tp", o.workload_tp, "cuda: also measure, whole, the GEMM calls the bundled transformers "
                                                  "lower to under these tensor-parallel sizes (\"\" for none)")
      ->capture_default_str();
}

CalibrationOptions to_calibration(const CommandOptions& o) {
  if (o.ranks < 1) throw core::InputError("--ranks", "", fmt::format("expected at least 1 rank, got {}", o.ranks));
  CalibrationOptions c;
  c.gemm_sizes.clear();
  std::stringstream list(o.gemm_sizes);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1 || v > 16384) throw std::invalid_argument("range");
      c.gemm_sizes.push_back(v);
    } catch (const std::exception&) {
      throw core::InputError("--gemm-sizes", "", fmt::format("expected sizes from 1 to 16384 separated by commas, got \"{}\"", item));
    }
  }
  if (c.gemm_sizes.empty()) throw core::InputError("--gemm-sizes", "", "expected at least one size");
  std::string streams = o.stream_sizes;
  constexpr std::string_view kAuto = ":auto";
  if (streams.size() > kAuto.size() && streams.compare(streams.size() - kAuto.size(), kAuto.size(), kAuto) == 0) {
    const core::Bytes limit = streaming_limit(core::last_level_cache(), core::meminfo("MemAvailable:"), o.ranks);
    streams = streams.substr(0, streams.size() - kAuto.size()) + fmt::format(":{:.0f}B", limit.value());
  }
  std::tie(c.min_stream, c.max_stream) = size_range("--stream-sizes", streams);
  std::tie(c.min_message, c.max_message) = size_range("--message-sizes", o.message_sizes);
  if (size_steps(c.min_stream, c.max_stream, 4).size() < 2) {
    throw core::InputError("--stream-sizes", "", "expected a range of at least two x4 steps");
  }
  if (size_steps(c.min_message, c.max_message, 4).size() < 2) {
    throw core::InputError("--message-sizes", "", "expected a range of at least two x4 steps");
  }
  if (o.quick) {
    c.timing.warmup = 1;
    c.timing.min_iterations = 3;
    c.timing.max_iterations = 10;
    c.timing.target = core::Seconds(0.01);
  }
  return c;
}

nlohmann::json calibrate_profile(const CalibrationOptions& options, const std::string& arguments, MPI_Comm world) {
  int ranks = 1;
  MPI_Comm_size(world, &ranks);
  Measurements m = calibrate_cpu(world, options);
  return to_profile(m, collect_provenance(arguments, ranks));
}

int run_calibration(const CommandOptions& o, const std::string& arguments, MPI_Comm world, std::ostream& out) {
  const CalibrationOptions options = to_calibration(o);
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  nlohmann::json profile = calibrate_profile(options, arguments, world);
  if (rank != 0) return 0;
  std::ofstream file(o.out);
  file << profile.dump(1) << "\n";
  if (!file) throw core::InputError("--out", "", fmt::format("could not write \"{}\"", o.out));
  print_summary(profile, out);
  fmt::print(out, "profile written to {}\n", o.out);
  return 0;
}

std::vector<int> workload_tps(const CommandOptions& o) {
  std::vector<int> out;
  std::stringstream list(o.workload_tp);
  for (std::string item; std::getline(list, item, ',');) {
    if (item.empty()) continue;
    try {
      std::size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size() || v < 1 || v > 64) throw std::invalid_argument("range");
      out.push_back(v);
    } catch (const std::exception&) {
      throw core::InputError("--workload-tp", "", fmt::format("expected tensor-parallel sizes from 1 to 64 separated by "
                                                              "commas, got \"{}\"", item));
    }
  }
  return out;
}

int run_gpu_calibration(const CommandOptions& o, const std::string& arguments, std::ostream& out) {
  const CalibrationOptions sizes = to_calibration(o);
  exec::GpuCalibrationOptions c;
  if (o.gemm_sizes_given) c.gemm_sizes = sizes.gemm_sizes;
  c.dtypes.clear();
  std::stringstream list(o.dtypes);
  for (std::string item; std::getline(list, item, ',');) {
    const std::optional<hw::Dtype> dtype = hw::parse_dtype(item);
    if (!dtype || *dtype == hw::Dtype::kFp4) {
      throw core::InputError("--dtypes", "", fmt::format("expected dtypes from fp32, tf32, fp16, bf16, fp8, got \"{}\"", item));
    }
    c.dtypes.push_back(*dtype);
  }
  if (c.dtypes.empty()) throw core::InputError("--dtypes", "", "expected at least one dtype");
  c.calls = workload_calls(workload_tps(o), c.dtypes);
  if (o.stream_sizes != CommandOptions{}.stream_sizes) std::tie(c.min_stream, c.max_stream) = std::pair(sizes.min_stream, sizes.max_stream);
  if (o.message_sizes != CommandOptions{}.message_sizes) std::tie(c.min_message, c.max_message) = std::pair(sizes.min_message, sizes.max_message);
  if (o.quick) c.repeats = 3;
  c.arguments = arguments;
  std::unique_ptr<exec::GpuBackend> backend;
  try {
    backend = exec::load_cuda_backend();
  } catch (const exec::GpuUnavailable& e) {
    throw core::InputError("--backend", "", fmt::format("cuda: {}", e.what()));
  }
  const nlohmann::json profile = backend->calibrate(c);
  std::ofstream file(o.out);
  file << profile.dump(1) << "\n";
  if (!file) throw core::InputError("--out", "", fmt::format("could not write \"{}\"", o.out));
  fmt::print(out, "profile of {} written to {}\n", profile.at("device").get<std::string>(), o.out);
  return 0;
}

void print_summary(const nlohmann::json& p, std::ostream& out) {
  const nlohmann::json& prov = p.at("provenance");
  fmt::print(out, "{} ({} cores, {} ranks), {}\n", prov.at("cpu_model").get<std::string>(), prov.at("cores").get<int>(),
             prov.at("ranks").get<int>(), prov.at("date").get<std::string>());
  const nlohmann::json& f = p.at("device_figures");
  fmt::print(out, "  GEMM fp32, best of {} shapes: {}\n", p.at("kernels").at("gemm").size(), f.at("peak").get<std::string>());
  fmt::print(out, "  memory bandwidth (largest copy): {}\n", f.at("memory_bandwidth").get<std::string>());
  for (const auto& c : p.at("collectives")) {
    fmt::print(out, "  {:<15} {} ranks: latency {}, bandwidth {}\n", c.at("op").get<std::string>(), c.at("ranks").get<int>(),
               c.at("fit").at("latency").get<std::string>(), c.at("fit").at("bandwidth").get<std::string>());
  }
}

}  // namespace dtsim::calibrate
