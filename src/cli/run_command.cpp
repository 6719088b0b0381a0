// `dtsim run` and `dtsim validate`: the same plan the simulator replays, run
// for real on MPI ranks (the CPU backend), and compared with the prediction.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include "calibrate/calibration_command.hpp"
#include "cli/commands.hpp"
#include "cli/run_support.hpp"
#include "dtsim/core/host_memory.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/quantity_parse.hpp"
#include "dtsim/core/version.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/exec/cpu_kernels.hpp"
#include "dtsim/exec/executor.hpp"
#include "dtsim/exec/gpu_backend.hpp"
#include "dtsim/exec/launch.hpp"
#include "dtsim/exec/reference_probe.hpp"
#include "dtsim/hw/kernel_calls.hpp"
#include "dtsim/report/critical_path.hpp"
#include "dtsim/report/validation.hpp"
#include "dtsim/report/writers.hpp"

namespace dtsim::cli {
namespace {

void add_common(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("--model,-m", o.model, "workload: a bundled name or a path")->capture_default_str();
  cmd->add_option("--cluster,-c", o.cluster, "cluster: a bundled name or a path")->capture_default_str();
  cmd->add_option("--strategy,-s", o.strategy, "as for simulate; CPU ranks need dtype=fp32")->capture_default_str();
  cmd->add_option("--steps", o.steps, "timed steps; the median is reported")->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "untimed steps first")->capture_default_str();
  cmd->add_option("--trace", o.trace, "write the measured timeline as a Chrome trace");
  cmd->add_flag("--json", o.json, "print JSON");
  cmd->add_option("--backend", o.backend, "cpu: MPI ranks on this machine's cores; cuda: this machine's GPU (a plan of gpus=1)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
}

// What every rank needs: the plan with all ranks lowered, and its prediction.
driver::Simulation plan_for(const RunOptions& o, const std::string& profile) {
  driver::SimulationRequest request{o.model, o.cluster, o.strategy, std::nullopt, std::nullopt, profile, true, {}, {}};
  request.every_rank_tasks = true;  // each rank executes its own tasks
  request.own_executor = true;
  driver::Simulation sim = driver::simulate(request);
  if (sim.tasks.ps_shards > 0) {
    throw core::InputError("--strategy", "/ps", "the real executor does not run parameter servers; simulate them instead");
  }
  return sim;
}

void check_options(const RunOptions& o) {
  if (o.steps < 1) throw core::InputError("--steps", "", fmt::format("expected at least 1 step, got {}", o.steps));
  if (o.warmup < 0) throw core::InputError("--warmup", "", fmt::format("expected 0 or more steps, got {}", o.warmup));
}

// Every rank of the plan shares this machine's memory: a plan that does not
// fit is refused before any rank allocates, not left to the OOM killer.
void check_fits_this_machine(const driver::Simulation& sim) {
  double needed = 0;
  for (core::Bytes b : sim.timeline.peak_memory) needed += b.value();
  if (const core::Bytes available = core::meminfo("MemAvailable:"); available.value() > 0 && needed > 0.9 * available.value()) {
    throw core::InputError("--strategy", "", fmt::format("the plan needs {:.1f} GiB over its {} ranks and this machine has "
                                                         "{:.1f} GiB available: a smaller model, batch or mbs",
                                                         needed / 1073741824.0, sim.strategy.world,
                                                         available.value() / 1073741824.0));
  }
}

// Outside a launcher: resolve the plan's world size and re-execute under mpirun.
void launch_if_needed(const RunOptions& o, const std::optional<std::string>& profile, const std::vector<std::string>& args,
                      const std::vector<std::filesystem::path>& scratch = {}) {
  if (exec::launched_by_mpi()) return;
  driver::SimulationRequest request{o.model, o.cluster, o.strategy, std::nullopt, std::nullopt, std::nullopt, false, {}, {}};
  // Checked before mpirun starts a rank per GPU of the plan on this machine's cores.
  if (const std::string device = driver::cluster_device(request); device != "CPU") {
    throw core::InputError("--cluster", "", fmt::format("the real executor runs CPU clusters (such as localhost-cpu); {} "
                                                        "has {} GPUs, whose backend is not built yet", o.cluster, device));
  }
  int world = 1;
  if (profile) {
    const driver::Simulation sim = plan_for(o, *profile);
    check_fits_this_machine(sim);  // once, before mpirun starts ranks that would each say it
    world = sim.strategy.world;
  } else {
    // Without a profile the CPU cluster cannot be simulated, but the strategy still says how many ranks.
    world = driver::resolve_world(request);
  }
  exec::relaunch_with_mpirun(world, args, scratch);
}

// The reference probe at calibration, before and after it measured, and
// just before and after the run.
struct Conditions {
  std::optional<exec::ProbeTimes> calibration_before, calibration_after;
  exec::ProbeTimes before_run, after_run;
  /// The probe of the calibration: the mean of its two, half by half.
  [[nodiscard]] std::optional<exec::ProbeTimes> calibration() const {
    if (!calibration_before || !calibration_after) return std::nullopt;
    return exec::mean(*calibration_before, *calibration_after);
  }
  /// How far the calibration's own two probes are apart: a machine that
  /// changed speed while the tables were measured left them inconsistent.
  [[nodiscard]] double calibration_drift() const {
    return calibration_before && calibration_after ? exec::probe_drift(*calibration_before, *calibration_after) : 0.0;
  }
  /// The largest relative change of either probe half: of a run probe from
  /// the calibration's (or of the after-run probe from the before-run one,
  /// for a profile without probes), or within the calibration.
  [[nodiscard]] double drift() const {
    const exec::ProbeTimes reference = calibration().value_or(before_run);
    return std::max({exec::probe_drift(reference, before_run), exec::probe_drift(reference, after_run),
                     calibration_drift()});
  }
  /// The largest change of a step whose matmuls take `gemm_share` of it that
  /// the probe foretells: from the calibration's probes to the run's (each
  /// pair's mean: the tables were measured between the one pair, the steps
  /// between the other), within the calibration, or within the run. A
  /// profile without probes has the run's only.
  [[nodiscard]] double step_drift(double gemm_share) const {
    auto change = [&](const exec::ProbeTimes& then, const exec::ProbeTimes& now) {
      return std::abs(exec::step_drift(then, now, gemm_share));
    };
    double largest = change(before_run, after_run);
    if (const std::optional<exec::ProbeTimes> tables = calibration()) {
      largest = std::max({largest, change(*calibration_before, *calibration_after),
                          change(*tables, exec::mean(before_run, after_run))});
    }
    return largest;
  }
};

// The share of the predicted busy time in matmuls, which the probe's GEMMs
// stand for; the rest streams memory as the probe's copy does.
double gemm_share(const report::Validation& v) {
  double matmul = 0, all = 0;
  for (const report::ValidationRow& k : v.kinds) {
    all += k.predicted.value();
    if (k.what == report::kMatmulKind) matmul += k.predicted.value();
  }
  return all > 0 ? matmul / all : 0.5;
}

struct Measured {
  driver::Simulation sim;
  exec::Execution execution;
  Conditions conditions;
};

// One of the calibration's probes from its provenance: its two halves, or,
// from a profile written before they were kept, the total as the gemm half.
std::optional<exec::ProbeTimes> calibration_probe(const nlohmann::json& provenance, const char* when) {
  if (!provenance.is_object() || !provenance.contains("reference_probe_us")) return std::nullopt;
  const nlohmann::json& p = provenance.at("reference_probe_us");
  if (!p.is_object() || !p.value(when, nlohmann::json()).is_number()) return std::nullopt;
  auto half = [&](const char* name) -> std::optional<core::Seconds> {
    const nlohmann::json h = p.value(name, nlohmann::json());
    if (!h.is_object() || !h.value(when, nlohmann::json()).is_number()) return std::nullopt;
    return core::Seconds(h.at(when).get<double>() * 1e-6);
  };
  const std::optional<core::Seconds> gemm = half("gemm"), copy = half("copy");
  if (gemm && copy) return exec::ProbeTimes{*gemm, *copy};
  return exec::ProbeTimes{core::Seconds(p.at(when).get<double>() * 1e-6), core::Seconds(0)};
}

Measured run_everywhere(const RunOptions& o, const std::string& profile) {
  Measured m{plan_for(o, profile), {}, {}};
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != m.sim.strategy.world) {
    throw core::InputError("--strategy", "", fmt::format("the plan has {} ranks but MPI started {}; start it with mpirun -n {}",
                                                         m.sim.strategy.world, size, m.sim.strategy.world));
  }
  check_fits_this_machine(m.sim);
  m.conditions.calibration_before = calibration_probe(m.sim.profile->provenance, "before");  // plan_for always passes a profile
  m.conditions.calibration_after = calibration_probe(m.sim.profile->provenance, "after");
  m.conditions.before_run = exec::time_reference_probe(MPI_COMM_WORLD);
  m.execution = exec::execute(m.sim.tasks, m.sim.timeline, MPI_COMM_WORLD, {o.warmup, o.steps});
  m.conditions.after_run = exec::time_reference_probe(MPI_COMM_WORLD);
  return m;
}

std::string header(const RunOptions& o, const Measured& m) {
  return fmt::format("{} on {}, strategy {}: {} ranks, median of {} steps", m.sim.graph.name, m.sim.cluster.name(),
                     o.strategy, m.sim.strategy.world, m.execution.step_times.size());
}

// Below this share of a core, a rank was time-sliced with something else.
constexpr double kBusy = 0.9;
// Beyond this change of the step foretold by the reference probe, the
// machine ran at another speed for the run than for the calibration (memory
// bandwidth or cache taken by a neighbour, another clock frequency): a third
// of the loop test's 15%.
constexpr double kStepDrift = 0.05;

// The probe's halves as the warning tells them: "reference GEMMs took 2100
// and 2080 us at calibration, 2110 us before the run and 2090 us after; ...".
std::string probe_story(const Conditions& c) {
  std::string story;
  const bool recorded = c.calibration_before && c.calibration_after;
  for (const auto& [name, part] : {std::pair{"reference GEMMs", &exec::ProbeTimes::gemm},
                                   std::pair{"reference copy", &exec::ProbeTimes::copy}}) {
    std::string at_calibration = "(not recorded)";
    if (recorded && c.calibration_before->has_halves()) {
      at_calibration = fmt::format("{:.0f} and {:.0f} us", ((*c.calibration_before).*part).value() * 1e6,
                                   ((*c.calibration_after).*part).value() * 1e6);
    } else if (recorded) {
      at_calibration = fmt::format("(the whole probe) {:.0f} and {:.0f} us", c.calibration_before->total().value() * 1e6,
                                   c.calibration_after->total().value() * 1e6);
    }
    if (!story.empty()) story += "; ";
    story += fmt::format("the {} took {} at calibration, {:.0f} us before the run and {:.0f} us after", name,
                         at_calibration, (c.before_run.*part).value() * 1e6, (c.after_run.*part).value() * 1e6);
  }
  return story;
}

nlohmann::json conditions_json(const Conditions& c, double matmul_share) {
  auto us = [](core::Seconds t) { return t.value() * 1e6; };
  const std::optional<exec::ProbeTimes> calibration = c.calibration();
  nlohmann::json probe{{"before_run", us(c.before_run.total())}, {"after_run", us(c.after_run.total())}};
  probe["calibration"] = calibration ? nlohmann::json(us(calibration->total())) : nlohmann::json();
  nlohmann::json halves;
  for (const auto& [name, part] : {std::pair{"gemm", &exec::ProbeTimes::gemm}, std::pair{"copy", &exec::ProbeTimes::copy}}) {
    halves[name] = {{"before_run", us(c.before_run.*part)}, {"after_run", us(c.after_run.*part)}};
    halves[name]["calibration"] = calibration && calibration->has_halves() ? nlohmann::json(us((*calibration).*part))
                                                                            : nlohmann::json();
  }
  probe["halves"] = halves;
  const double step_drift = c.step_drift(matmul_share);
  return {{"reference_probe_us", probe},
          {"calibration_drift", c.calibration_drift()},
          {"drift", c.drift()},
          {"gemm_share", matmul_share},
          {"step_drift", step_drift},
          {"steady", step_drift <= kStepDrift}};
}

}  // namespace

void add_run(CLI::App& app, RunOptions& o) {
  CLI::App* cmd = app.add_subcommand("run", "run the plan for real on MPI ranks (CPU backend) and report the measured step");
  add_common(cmd, o);
  cmd->add_option("--profile", o.profile, "calibration profile (dtsim-calibrate); orders the tasks as predicted")->required();
}

void add_validate(CLI::App& app, ValidateOptions& o) {
  CLI::App* cmd = app.add_subcommand("validate", "calibrate, predict, run for real and report the prediction error");
  add_common(cmd, o.run);
  cmd->add_option("--profile", o.run.profile, "use this profile instead of calibrating first");
  cmd->add_option("--save-profile", o.save_profile, "where to keep the profile the calibration writes");
  cmd->add_option("--max-error", o.max_error, "fail (exit 1) when the step-time error exceeds this, e.g. 15%");
  cmd->add_flag("--quick-calibration", o.quick_calibration, "fewer iterations per calibration point");
}

int run_run(const RunOptions& o, const std::vector<std::string>& args, std::ostream& out) {
  check_options(o);
  if (o.backend == "cuda") return run_run_on_gpu(o, out);
  launch_if_needed(o, o.profile, args);
  MPI_Init(nullptr, nullptr);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  exec::use_one_blas_thread();
  Measured m = run_everywhere(o, *o.profile);
  if (rank == 0) {
    write_trace(o.trace, m.sim.tasks, m.execution.timeline);
    const report::Validation v = report::validate(m.sim.tasks, m.sim.timeline, m.execution.timeline);
    if (o.json) {
      out << nlohmann::json{{"schema", "dtsim.run/1"}, {"dtsim_version", core::version()}, {"step_times_s", step_times_json(m.execution)},
                            {"cpu_share", m.execution.cpu_share},
                            {"step_time_s", v.step.measured.value()},
                            {"peak_memory_bytes", v.measured_peak_memory.value()},
                            {"kernel_scratch_bytes", m.execution.scratch_bytes.value()}}.dump(2) << "\n";
    } else {
      fmt::print(out, "dtsim run: {}\n", header(o, m));
      fmt::print(out, "  step time      {:.2f} ms (steps: ", v.step.measured.value() * 1e3);
      for (core::Seconds t : m.execution.step_times) fmt::print(out, "{:.2f} ", t.value() * 1e3);
      fmt::print(out, "ms)\n  peak memory    {:.1f} MiB allocated on the largest rank, {:.1f} MiB resident "
                      "({:.1f} MiB of GEMM operand and MPI buffers apart)\n",
                 v.measured_peak_memory.value() / 1048576.0,
                 (*std::max_element(m.execution.max_rss.begin(), m.execution.max_rss.end())).value() / 1048576.0,
                 m.execution.scratch_bytes.value() / 1048576.0);
    }
  }
  MPI_Finalize();
  return 0;
}

namespace {

// The profile validate calibrated, kept only when asked for (--save-profile).
class CalibratedProfile {
 public:
  CalibratedProfile(std::string path, bool keep, int rank) : path_(std::move(path)), keep_(keep), rank_(rank) {}
  CalibratedProfile(const CalibratedProfile&) = delete;
  CalibratedProfile& operator=(const CalibratedProfile&) = delete;
  ~CalibratedProfile() {
    std::error_code ignored;
    if (!keep_ && rank_ == 0) std::filesystem::remove(path_, ignored);
  }

 private:
  std::string path_;
  bool keep_;
  int rank_;
};

}  // namespace

int run_validate(const ValidateOptions& o, const std::vector<std::string>& args, std::ostream& out) {
  check_options(o.run);
  if (o.run.backend == "cuda") return run_validate_on_gpu(o, out);
  const double limit = o.max_error ? parse_max_error(*o.max_error) : 0.0;  // 0: no limit
  // The profile validate calibrates for itself lives in the temporary
  // directory. Started from a shell, this process names it for the ranks and
  // removes it after mpirun, also when Ctrl-C stops the ranks; under a user's
  // own mpirun, rank 0 removes it at the end.
  constexpr const char* kScratchProfileVariable = "DTSIM_VALIDATE_PROFILE";
  if (!o.run.profile && !o.save_profile && !exec::launched_by_mpi()) {
    const std::filesystem::path scratch =
        std::filesystem::temp_directory_path() / fmt::format("dtsim-validate-{}.json", ::getpid());
    ::setenv(kScratchProfileVariable, scratch.c_str(), 1);
    launch_if_needed(o.run, o.run.profile, args, {scratch});
  }
  launch_if_needed(o.run, o.run.profile, args);
  MPI_Init(nullptr, nullptr);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  exec::use_one_blas_thread();

  std::string profile;
  std::optional<CalibratedProfile> calibrated;
  if (o.run.profile) {
    profile = *o.run.profile;
  } else {
    calibrate::CommandOptions defaults;
    defaults.quick = o.quick_calibration;
    // The grid's own range, not past the cache: the plan's memory-bound
    // calls past it are timed whole below, at the sizes the plan streams.
    defaults.stream_sizes = "4KiB:64MiB";
    const calibrate::CalibrationOptions options = calibrate::to_calibration(defaults);
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    calibrate::Measurements measured = calibrate::calibrate_cpu(MPI_COMM_WORLD, options);
    const nlohmann::json provenance = calibrate::collect_provenance("dtsim validate", ranks);
    const char* named = std::getenv(kScratchProfileVariable);
    profile = o.save_profile.value_or(
        named && *named ? std::string(named)
                        : (std::filesystem::temp_directory_path() / fmt::format("dtsim-validate-{}.json", ::getppid())).string());
    auto write_profile = [&] {
      if (rank == 0) {
        std::ofstream file(profile);
        file << calibrate::to_profile(measured, provenance).dump(1) << "\n";
        if (!file) throw core::InputError("--save-profile", "", fmt::format("could not write \"{}\"", profile));
      }
      MPI_Barrier(MPI_COMM_WORLD);
    };
    write_profile();
    calibrated.emplace(profile, o.save_profile.has_value(), rank);
    // Then the plan's own GEMM calls, measured whole (as validate on a GPU
    // does): the grid's factor-4 steps leave a plan's shapes to
    // interpolation. On the CI's 2-core machine the mlp's calls with m = 64
    // or k = 64, between grid points 32 and 128, ran 11-25% slower than the
    // grid said in all 10 attempts, where the same model's m = 128 calls
    // scattered either side (2026-12-03). The plan is made on the grid's
    // profile; which calls it makes does not depend on their costs.
    const driver::Simulation planned = plan_for(o.run, profile);
    std::vector<calibrate::GemmCallPoint> calls;
    for (const exec::GpuCalibrationOptions::Call& c : exec::gemm_calls_of(planned.tasks, planned.strategy.s.dtype)) {
      calls.push_back({c.call, c.dtype, {}});
    }
    measured.gemm_calls = calibrate::time_gemm_calls(MPI_COMM_WORLD, calls, options.timing);
    // And its memory-bound calls past the streaming tables' largest size
    // (an optimizer step over all the weights, as a rule), which the tables
    // would scale from a point a cache may have served.
    std::vector<hw::KernelCall> streams;
    for (const plan::Kernel& kernel : planned.tasks.kernels) {
      for (const hw::OpWork& w : kernel.ops) {
        for (const hw::KernelCall& c : hw::kernel_calls(w)) {
          if (c.family != hw::KernelFamily::kGemm) streams.push_back(c);
        }
      }
    }
    calibrate::time_stream_calls_past_the_tables(MPI_COMM_WORLD, streams, options.timing, measured);
    write_profile();
  }
  Measured m = run_everywhere(o.run, profile);
  const nlohmann::json& provenance = m.sim.profile->provenance;  // plan_for always passes a profile
  const double calibration_share = provenance.is_object() ? provenance.value("cpu_share", 1.0) : 1.0;
  int status = 0;
  if (rank == 0) {
    write_trace(o.run.trace, m.sim.tasks, m.execution.timeline);
    const report::Validation v = report::validate(m.sim.tasks, m.sim.timeline, m.execution.timeline);
    const bool failed = limit > 0 && std::abs(v.step.error()) > limit;
    const auto [low, high] = error_range(v.step.predicted, m.execution);
    if (o.run.json) {
      nlohmann::json j = report::to_json(v);
      j["schema"] = "dtsim.validate/1";
      j["dtsim_version"] = core::version();
      j["model"] = m.sim.graph.name;
      j["cluster"] = m.sim.cluster.name();
      j["strategy"] = o.run.strategy;
      j["ranks"] = m.sim.strategy.world;
      if (!calibrated || o.save_profile) j["profile"] = profile;
      j["step_times_s"] = step_times_json(m.execution);
      j["cpu_share"] = {{"calibration", calibration_share}, {"run", m.execution.cpu_share}};
      j["step"]["error_range"] = {low, high};
      j["kernel_scratch_bytes"] = m.execution.scratch_bytes.value();
      j["conditions"] = conditions_json(m.conditions, gemm_share(v));
      if (limit > 0) {  // without a limit there is nothing to pass: the error is the answer
        j["max_error"] = limit;
        j["passed"] = !failed;
      }
      out << j.dump(2) << "\n";
    } else {
      fmt::print(out, "dtsim validate: {}\n", header(o.run, m));
      report::write_validation_table(out, v);
      fmt::print(out, "  step-time error over the {} timed steps: {:+.1f}% to {:+.1f}%\n", m.execution.step_times.size(),
                 100 * low, 100 * high);
      fmt::print(out, "  executor scratch, in neither memory column: {:.1f} MiB of GEMM operand and MPI buffers on the "
                      "largest rank\n",
                 m.execution.scratch_bytes.value() / 1048576.0);
      if (calibrated && !o.save_profile) fmt::print(out, "  profile: calibrated for this run, not kept (--save-profile keeps it)\n");
      else fmt::print(out, "  profile: {}\n", profile);
      const Conditions& c = m.conditions;
      const double share = gemm_share(v), step_drift = c.step_drift(share);
      if (step_drift > kStepDrift) {
        fmt::print(out, "  warning: the machine ran at another speed: {}; for a step of {:.0f}% matmuls that is a change "
                        "of up to {:.0f}%, so these errors measure the change, not the model\n",
                   probe_story(c), 100 * share, 100 * step_drift);
      }
      if (std::min(calibration_share, m.execution.cpu_share) < kBusy) {
        fmt::print(out, "  warning: a rank got only {:.0f}% of a core during the calibration and {:.0f}% during the run; "
                        "something else was running, so these errors measure the machine's load, not the model\n",
                   100 * calibration_share, 100 * m.execution.cpu_share);
      }
    }
    if (failed) {
      std::fprintf(stderr, "dtsim: step-time error %+.1f%% exceeds --max-error %s\n", 100 * v.step.error(),
                   o.max_error->c_str());
      status = 1;
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}

}  // namespace dtsim::cli
