// `dtsim run --backend cuda` and `dtsim validate --backend cuda`: the plan of
// one GPU run for real on this machine's GPU through the CUDA backend
// (libdtsim_cuda.so), and compared with the prediction from a profile this
// GPU measured; validate also shows the uncalibrated prediction's error, what
// dtsim says of this GPU from its bundled kernel model alone.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/run_support.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/version.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/exec/gpu_backend.hpp"
#include "dtsim/report/validation.hpp"

namespace dtsim::cli {
namespace {

driver::SimulationRequest request_for(const RunOptions& o, std::optional<std::string> profile) {
  driver::SimulationRequest request{o.model, o.cluster, o.strategy, std::nullopt, std::nullopt, std::move(profile), true, {}, {}};
  request.every_rank_tasks = true;  // the executor runs the ranks' own tasks
  request.own_executor = true;
  return request;
}

// Checked before the GPU is touched: a GPU cluster and a plan of one GPU.
void check_plan(const RunOptions& o) {
  const driver::SimulationRequest request = request_for(o, std::nullopt);
  if (driver::cluster_device(request) == "CPU") {
    throw core::InputError("--cluster", "", fmt::format("--backend cuda runs a GPU cluster's plan (dgx-h100, hgx-h200, "
                                                        "...); {} is a CPU cluster", o.cluster));
  }
  if (const int world = driver::resolve_world(request); world != 1) {
    throw core::InputError("--strategy", "", fmt::format("--backend cuda runs a plan of one GPU (add gpus=1); this one "
                                                         "has {}; several GPUs are not built yet", world));
  }
}

std::unique_ptr<exec::GpuBackend> open_backend() {
  try {
    return exec::load_cuda_backend();
  } catch (const exec::GpuUnavailable& e) {
    throw core::InputError("--backend", "", fmt::format("cuda: {}", e.what()));
  }
}

struct GpuRun {
  driver::Simulation sim;
  exec::Execution execution;
};

GpuRun run_plan(exec::GpuBackend& backend, const RunOptions& o, const std::string& profile) {
  GpuRun r{driver::simulate(request_for(o, profile)), {}};
  r.execution = backend.execute(r.sim.tasks, r.sim.timeline, {{o.warmup, o.steps}, r.sim.strategy.s.dtype});
  return r;
}

std::string header(const RunOptions& o, const GpuRun& r, const nlohmann::json& gpu) {
  return fmt::format("{} on {} ({}), strategy {}: median of {} steps", r.sim.graph.name, r.sim.cluster.name(),
                     gpu.value("gpu", std::string("GPU")), o.strategy, r.execution.step_times.size());
}

}  // namespace

int run_run_on_gpu(const RunOptions& o, std::ostream& out) {
  check_plan(o);
  std::unique_ptr<exec::GpuBackend> backend = open_backend();
  const nlohmann::json gpu = backend->describe();
  GpuRun r = run_plan(*backend, o, *o.profile);
  write_trace(o.trace, r.sim.tasks, r.execution.timeline);
  const report::Validation v = report::validate(r.sim.tasks, r.sim.timeline, r.execution.timeline);
  if (o.json) {
    out << nlohmann::json{{"schema", "dtsim.run/1"}, {"dtsim_version", core::version()}, {"backend", "cuda"}, {"gpu", gpu},
                          {"step_times_s", step_times_json(r.execution)}, {"step_time_s", v.step.measured.value()},
                          {"peak_memory_bytes", v.measured_peak_memory.value()},
                          {"device_memory_in_use_bytes", r.execution.max_rss.front().value()},
                          {"kernel_scratch_bytes", r.execution.scratch_bytes.value()}}.dump(2)
        << "\n";
    return 0;
  }
  fmt::print(out, "dtsim run: {}\n", header(o, r, gpu));
  fmt::print(out, "  step time      {:.3f} ms (steps: ", v.step.measured.value() * 1e3);
  for (core::Seconds t : r.execution.step_times) fmt::print(out, "{:.3f} ", t.value() * 1e3);
  fmt::print(out, "ms)\n  peak memory    {:.2f} GiB held by the plan, {:.2f} GiB in use on the GPU\n",
             v.measured_peak_memory.value() / 1073741824.0, r.execution.max_rss.front().value() / 1073741824.0);
  return 0;
}

int run_validate_on_gpu(const ValidateOptions& o, std::ostream& out) {
  check_plan(o.run);
  const double limit = o.max_error ? parse_max_error(*o.max_error) : 0.0;  // 0: no limit
  std::unique_ptr<exec::GpuBackend> backend = open_backend();
  const nlohmann::json gpu = backend->describe();
  // What dtsim predicts for this GPU with no measurement of it; its calls are also what a calibration measures.
  const driver::Simulation uncalibrated = driver::simulate(request_for(o.run, std::nullopt));

  std::string profile;
  if (o.run.profile) {
    profile = *o.run.profile;
  } else {
    // A calibration of this plan: its own GEMM calls measured whole, a
    // small grid for anything else, the streaming kernels; no collectives
    // (a plan of one GPU has none).
    exec::GpuCalibrationOptions c;
    c.gemm_sizes = {512, 2048, 8192};
    c.dtypes = {uncalibrated.strategy.s.dtype};
    c.calls = exec::gemm_calls_of(uncalibrated.tasks, uncalibrated.strategy.s.dtype);
    for (const auto& call : c.calls) {
      if (std::find(c.dtypes.begin(), c.dtypes.end(), call.dtype) == c.dtypes.end()) c.dtypes.push_back(call.dtype);
    }
    c.max_stream = core::Bytes(1.0 * 1073741824);
    c.collectives = false;
    if (o.quick_calibration) c.repeats = 3;
    c.arguments = "dtsim validate --backend cuda";
    const nlohmann::json p = backend->calibrate(c);
    profile = o.save_profile.value_or((std::filesystem::temp_directory_path() /
                                       fmt::format("dtsim-validate-{}.json", ::getpid())).string());
    std::ofstream file(profile);
    file << p.dump(1) << "\n";
    if (!file) throw core::InputError("--save-profile", "", fmt::format("could not write \"{}\"", profile));
  }
  GpuRun r = run_plan(*backend, o.run, profile);
  if (!o.run.profile && !o.save_profile) std::filesystem::remove(profile);
  write_trace(o.run.trace, r.sim.tasks, r.execution.timeline);
  const report::Validation v = report::validate(r.sim.tasks, r.sim.timeline, r.execution.timeline);
  const core::Seconds measured = v.step.measured, bundled(static_cast<double>(uncalibrated.timeline.makespan.count) * 1e-9);
  const double bundled_error = bundled / measured - 1;
  const bool failed = limit > 0 && std::abs(v.step.error()) > limit;
  if (o.run.json) {
    nlohmann::json j = report::to_json(v);
    j["schema"] = "dtsim.validate/1";
    j["dtsim_version"] = core::version();
    j["backend"] = "cuda";
    j["gpu"] = gpu;
    j["model"] = r.sim.graph.name;
    j["cluster"] = r.sim.cluster.name();
    j["strategy"] = o.run.strategy;
    j["ranks"] = 1;
    if (o.run.profile || o.save_profile) j["profile"] = profile;
    j["step_times_s"] = step_times_json(r.execution);
    const auto [low, high] = error_range(v.step.predicted, r.execution);
    j["step"]["error_range"] = {low, high};
    j["device_memory_in_use_bytes"] = r.execution.max_rss.front().value();
    j["kernel_scratch_bytes"] = r.execution.scratch_bytes.value();
    j["uncalibrated"] = {{"predicted_s", bundled.value()}, {"error", bundled_error},
                         {"predicted_peak_memory_bytes", uncalibrated.timeline.peak_memory.front().value()}};
    if (limit > 0) {
      j["max_error"] = limit;
      j["passed"] = !failed;
    }
    out << j.dump(2) << "\n";
  } else {
    fmt::print(out, "dtsim validate: {}\n", header(o.run, r, gpu));
    report::write_validation_table(out, v);
    fmt::print(out, "  uncalibrated prediction (the bundled {} kernel model): {:.3f} ms, {:+.1f}%\n",
               r.sim.cluster.device().name, bundled.value() * 1e3, 100 * bundled_error);
    fmt::print(out, "  GPU memory in use at the peak: {:.2f} GiB (CUDA context, the pool's reserve and {:.2f} GiB of "
                    "kernel operand scratch included)\n",
               r.execution.max_rss.front().value() / 1073741824.0, r.execution.scratch_bytes.value() / 1073741824.0);
    fmt::print(out, "  profile: {}\n", o.run.profile || o.save_profile ? profile
                                                                        : std::string("calibrated for this run, not kept (--save-profile keeps it)"));
  }
  if (failed) {
    std::fprintf(stderr, "dtsim: step-time error %+.1f%% exceeds --max-error %s\n", 100 * v.step.error(), o.max_error->c_str());
    return 1;
  }
  return 0;
}

}  // namespace dtsim::cli
