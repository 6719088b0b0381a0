#include "dtsim/report/writers.hpp"

#include "dtsim/core/version.hpp"

namespace dtsim::report {

nlohmann::json to_json(const Report& r) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageMemory& m : r.per_stage) {
    stages.push_back({{"stage", m.stage},
                      {"params_bytes", m.params.value()},
                      {"grads_bytes", m.grads.value()},
                      {"optimizer_bytes", m.optimizer.value()},
                      {"activations_bytes", m.activations.value()},
                      {"other_bytes", m.other.value()},
                      {"peak_bytes", m.peak.value()}});
  }
  nlohmann::json bottlenecks = nlohmann::json::array();
  for (const Bottleneck& b : r.bottlenecks) {
    bottlenecks.push_back({{"kind", b.kind}, {"time_s", b.time.value()}, {"fraction", b.fraction}, {"message", b.message}});
  }
  const Breakdown& b = r.breakdown;
  nlohmann::json out = {
      {"schema", "dtsim.report/1"},
      {"dtsim_version", core::version()},
      {"model", r.info.model},
      {"cluster", r.info.cluster},
      {"device", r.info.device},
      {"strategy", r.info.strategy},
      {"gpus", r.gpus},
      {"nodes", r.info.nodes},
      {"parameters", r.info.parameters},
      {"global_batch", r.info.global_batch},
      {"micro_batches", r.micro_batches},
      {"step_time_s", r.step_time.value()},
      {"samples_per_s", r.samples_per_s},
      {"model_flops_per_step", r.model_flops_per_step.value()},
      {"hardware_flops_per_step", r.hardware_flops_per_step.value()},
      {"model_tflops_per_gpu", r.model_tflops_per_gpu},
      {"hardware_tflops_per_gpu", r.hardware_tflops_per_gpu},
      {"mfu", r.mfu},
      {"hfu", r.hfu},
      {"memory", {{"peak_bytes", r.peak_bytes.value()}, {"capacity_bytes", r.info.memory_capacity.value()}, {"per_stage", stages}}},
      {"fits_in_memory", r.fits_in_memory},
      {"breakdown",
       {{"rank", b.rank},
        {"compute_s", b.compute.value()},
        {"compute_slowed_s", b.compute_slowed.value()},
        {"exposed_comm_s",
         {{"tp", b.exposed_comm.tp.value()},
          {"cp", b.exposed_comm.cp.value()},
          {"ep", b.exposed_comm.ep.value()},
          {"dp", b.exposed_comm.dp.value()},
          {"pp", b.exposed_comm.pp.value()}}},
        {"bubble_s", b.bubble.value()},
        {"host_wait_s", b.host_wait.value()}}},
      {"bottlenecks", bottlenecks},
  };
  if (!r.info.host.empty()) out["host"] = {{"name", r.info.host}, {"kernel_launch_s", r.info.host_launch.value()}};
  if (r.parameter_server) {
    const ParameterServerStats& ps = *r.parameter_server;
    out["parameter_server"] = {{"shards", ps.shards},
                               {"mode", ps.synchronous ? "sync" : "async"},
                               {"steps_simulated", ps.iterations},
                               {"staleness", {{"mean", ps.mean_staleness}, {"max", ps.max_staleness},
                                              {"histogram", ps.staleness_histogram}}}};
  }
  if (r.info.seq_len > 0) {
    out["seq_len"] = r.info.seq_len;
    out["tokens_per_s"] = r.tokens_per_s;
    if (!r.info.seq_len_source.empty()) out["seq_len_source"] = r.info.seq_len_source;
  }
  return out;
}

}  // namespace dtsim::report
