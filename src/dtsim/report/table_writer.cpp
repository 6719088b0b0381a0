#include <fmt/format.h>
#include <fmt/ostream.h>

#include "dtsim/report/writers.hpp"

namespace dtsim::report {
namespace {

std::string gib(core::Bytes b) { return fmt::format("{:.2f} GiB", b.value() / 1073741824.0); }

std::string duration(core::Seconds s) {
  if (s.value() >= 1) return fmt::format("{:.3f} s", s.value());
  if (s.value() >= 1e-3) return fmt::format("{:.2f} ms", s.value() * 1e3);
  return fmt::format("{:.1f} us", s.value() * 1e6);
}

std::string share(core::Seconds part, core::Seconds whole) {
  return fmt::format("{:>10}  {:5.1f}%", duration(part), whole.value() > 0 ? 100 * (part / whole) : 0.0);
}

}  // namespace

void write_table(std::ostream& out, const Report& r) {
  const Breakdown& b = r.breakdown;
  fmt::print(out, "dtsim prediction\n");
  fmt::print(out, "  model      {} ({:.2f} B parameters)\n", r.info.model, r.info.parameters / 1e9);
  fmt::print(out, "  cluster    {} ({} node{} of {}): {} GPUs used\n", r.info.cluster, r.info.nodes, r.info.nodes == 1 ? "" : "s",
             r.info.device, r.gpus);
  if (!r.info.host.empty()) fmt::print(out, "  host       {}, {} a kernel launched\n", r.info.host, duration(r.info.host_launch));
  fmt::print(out, "  strategy   {} (global batch {}, {} micro-batch(es) per rank{})\n", r.info.strategy, r.info.global_batch,
             r.micro_batches, r.info.seq_len > 0 ? fmt::format(", seq_len {}{}", r.info.seq_len,
                                                r.info.seq_len_source.empty() ? "" : " from " + r.info.seq_len_source)
                                : "");
  fmt::print(out, "\n");
  fmt::print(out, "  step time            {}\n", duration(r.step_time));
  fmt::print(out, "  throughput           {:.2f} samples/s", r.samples_per_s);
  if (r.info.seq_len > 0) fmt::print(out, ", {:.0f} tokens/s", r.tokens_per_s);
  fmt::print(out, "\n");
  fmt::print(out, "  model TFLOP/s/GPU    {:.1f}   (MFU {:.1f}%)\n", r.model_tflops_per_gpu, 100 * r.mfu);
  fmt::print(out, "  hw TFLOP/s/GPU       {:.1f}   (HFU {:.1f}%)\n", r.hardware_tflops_per_gpu, 100 * r.hfu);
  fmt::print(out, "\n  step breakdown (rank {})\n", b.rank);
  fmt::print(out, "    compute            {}\n", share(b.compute, r.step_time));
  if (b.compute_slowed.value() > 0) {
    fmt::print(out, "      slowed by comm   {}\n", share(b.compute_slowed, r.step_time));
  }
  fmt::print(out, "    exposed tp comm    {}\n", share(b.exposed_comm.tp, r.step_time));
  if (b.exposed_comm.cp.value() > 0) fmt::print(out, "    exposed cp comm    {}\n", share(b.exposed_comm.cp, r.step_time));
  if (b.exposed_comm.ep.value() > 0) fmt::print(out, "    exposed ep comm    {}\n", share(b.exposed_comm.ep, r.step_time));
  fmt::print(out, "    exposed dp comm    {}\n", share(b.exposed_comm.dp, r.step_time));
  fmt::print(out, "    exposed pp comm    {}\n", share(b.exposed_comm.pp, r.step_time));
  fmt::print(out, "    bubble / idle      {}\n", share(b.bubble, r.step_time));
  if (b.host_wait.value() > 0) fmt::print(out, "      waiting on host  {}\n", share(b.host_wait, r.step_time));
  fmt::print(out, "\n  memory per GPU (capacity {})\n", gib(r.info.memory_capacity));
  fmt::print(out, "    {:>5} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "stage", "params", "grads", "optimizer",
             "activations", "other", "peak");
  for (const StageMemory& m : r.per_stage) {
    fmt::print(out, "    {:>5} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", m.stage, gib(m.params), gib(m.grads),
               gib(m.optimizer), gib(m.activations), gib(m.other), gib(m.peak));
  }
  fmt::print(out, "    fits in memory: {}\n", r.fits_in_memory ? "yes" : "NO");
  if (r.parameter_server) {
    const ParameterServerStats& ps = *r.parameter_server;
    fmt::print(out, "\n  parameter servers: {} shard(s), {}, {} steps simulated (step time is their mean)\n", ps.shards,
               ps.synchronous ? "synchronous" : "asynchronous", ps.iterations);
    fmt::print(out, "    gradient staleness: mean {:.2f}, max {} updates; histogram", ps.mean_staleness, ps.max_staleness);
    for (std::size_t i = 0; i < ps.staleness_histogram.size(); ++i) fmt::print(out, " {}:{}", i, ps.staleness_histogram[i]);
    fmt::print(out, "\n");
  }
  fmt::print(out, "\n  bottlenecks\n");
  for (const Bottleneck& bn : r.bottlenecks) fmt::print(out, "    - {}\n", bn.message);
}

}  // namespace dtsim::report
