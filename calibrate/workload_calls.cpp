#include "calibrate/workload_calls.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "dtsim/driver/simulation.hpp"
#include "dtsim/hw/measured.hpp"

namespace dtsim::calibrate {

std::vector<exec::GpuCalibrationOptions::Call> workload_calls(const std::vector<int>& tps,
                                                              const std::vector<hw::Dtype>& dtypes) {
  std::set<hw::GemmCallKey> seen;
  std::vector<exec::GpuCalibrationOptions::Call> out;
  for (const std::string& model : driver::bundled("workloads")) {
    for (hw::Dtype dtype : dtypes) {
      if (dtype != hw::Dtype::kBf16 && dtype != hw::Dtype::kFp8) continue;
      for (int tp : tps) {
        const std::string strategy =
            fmt::format("tp={},gpus={},mbs=1,gbs=1,dtype={}{}", tp, tp, hw::to_string(dtype), tp > 1 ? ",sp=on" : "");
        driver::SimulationRequest request{model, "dgx-h100", strategy, std::nullopt, std::nullopt, std::nullopt, false, {}, {}};
        std::optional<driver::Simulation> sim;
        try {
          sim.emplace(driver::simulate(request));
        } catch (const std::exception&) {
          continue;  // not a transformer (resnet50, mlp), or tp does not divide its heads
        }
        for (const auto& c : exec::gemm_calls_of(sim->tasks, dtype)) {
          if (seen.insert({c.call.gemm.m, c.call.gemm.n, c.call.gemm.k, c.call.count, c.dtype}).second) out.push_back(c);
        }
      }
    }
  }
  return out;
}

}  // namespace dtsim::calibrate
