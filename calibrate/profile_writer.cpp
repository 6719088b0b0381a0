#include "calibrate/profile_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <mpi.h>

#include "dtsim/core/linear_fit.hpp"
#include "dtsim/core/version.hpp"
#include "dtsim/core/utc_date.hpp"
#include "dtsim/exec/cpu_kernels.hpp"

namespace dtsim::calibrate {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

nlohmann::json times_us(const Series& s) {
  nlohmann::json out = nlohmann::json::array();
  for (core::Seconds t : s.times) out.push_back(std::round(t.value() * 1e9) / 1e3);
  return out;
}

nlohmann::json size_point(const SizePoint& p) {
  return {{"bytes", p.bytes.value()}, {"median_us", p.series.median().value() * 1e6}, {"times_us", times_us(p.series)}};
}

std::string quantity(double value, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (value >= 1000 && i < 4) {
    value /= 1000;
    ++i;
  }
  return fmt::format("{:.4g} {}{}", value, prefixes[i], unit);
}

}  // namespace

nlohmann::json collect_provenance(const std::string& arguments, int ranks) {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int length = 0;
  MPI_Get_library_version(mpi, &length);
  std::string mpi_version(mpi, static_cast<std::size_t>(length));
  mpi_version.erase(std::find(mpi_version.begin(), mpi_version.end(), '\0'), mpi_version.end());
  if (auto nl = mpi_version.find('\n'); nl != std::string::npos) mpi_version.resize(nl);
  return {{"machine", host},
          {"cpu_model", cpu_model()},
          {"cores", std::thread::hardware_concurrency()},
          {"ranks", ranks},
          {"blas", exec::blas_description()},
          {"mpi", mpi_version},
          {"compiler", __VERSION__},
          {"dtsim_version", core::version()},
          {"arguments", arguments},
          {"date", core::utc_now()}};
}

nlohmann::json to_profile(const Measurements& m, const nlohmann::json& provenance) {
  nlohmann::json kernels;
  kernels["gemm"] = nlohmann::json::array();
  double best = 0;
  for (const GemmPoint& g : m.gemm) {
    const double seconds = g.series.median().value();
    best = std::max(best, 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) / seconds);
    kernels["gemm"].push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"median_us", seconds * 1e6},
                               {"times_us", times_us(g.series)}});
  }
  if (!m.gemm_calls.empty()) {
    kernels["gemm_calls"] = nlohmann::json::array();
    for (const GemmCallPoint& c : m.gemm_calls) {
      kernels["gemm_calls"].push_back({{"m", c.call.gemm.m}, {"n", c.call.gemm.n}, {"k", c.call.gemm.k},
                                       {"count", c.call.count}, {"dtype", hw::to_string(c.dtype)},
                                       {"median_us", c.series.median().value() * 1e6}, {"times_us", times_us(c.series)}});
    }
  }
  for (std::size_t f = 0; f < 3; ++f) {
    nlohmann::json rows = nlohmann::json::array();
    for (const SizePoint& p : m.memory[f]) rows.push_back(size_point(p));
    kernels[std::string(hw::to_string(hw::kMemoryFamilies[f]))] = rows;
  }
  // The device's memory bandwidth: bytes over time of the largest copy, past every cache.
  double bandwidth = 0;
  if (!m.memory[0].empty()) {
    const SizePoint& largest = m.memory[0].back();
    bandwidth = largest.bytes.value() / largest.series.median().value();
  }
  nlohmann::json collectives = nlohmann::json::array();
  for (const CollectivePoints& c : m.collectives) {
    std::vector<core::SizeSample> samples;
    nlohmann::json rows = nlohmann::json::array();
    for (const SizePoint& p : c.points) {
      samples.push_back({p.bytes, p.series.median()});
      rows.push_back(size_point(p));
    }
    const core::LinearFit fit = core::fit_latency_bandwidth(samples);
    collectives.push_back({{"op", c.op},
                           {"ranks", c.ranks},
                           {"fit", {{"latency", fmt::format("{:.4g} us", fit.latency.value() * 1e6)},
                                    {"bandwidth", quantity(fit.bandwidth.value(), "B/s")}}},
                           {"samples", rows}});
  }
  nlohmann::json with_share = provenance;
  with_share["cpu_share"] = std::round(m.cpu_share * 1000) / 1000;
  if (m.probe_before.total().value() > 0) {
    auto us = [](core::Seconds t) { return std::round(t.value() * 1e7) / 10; };
    with_share["reference_probe_us"] = {
        {"before", us(m.probe_before.total())},
        {"after", us(m.probe_after.total())},
        {"gemm", {{"before", us(m.probe_before.gemm)}, {"after", us(m.probe_after.gemm)}}},
        {"copy", {{"before", us(m.probe_before.copy)}, {"after", us(m.probe_after.copy)}}}};
  }
  return {{"schema", "dtsim.profile/1"},
          {"device", "CPU"},
          {"provenance", with_share},
          {"device_figures", {{"dtype", "fp32"},
                              {"peak", quantity(best, "FLOP/s")},
                              {"memory_bandwidth", quantity(bandwidth, "B/s")},
                              {"memory", fmt::format("{:.4g} GiB", m.machine_memory.value() / 1073741824.0)}}},
          {"kernels", kernels},
          {"collectives", collectives}};
}

}  // namespace dtsim::calibrate
