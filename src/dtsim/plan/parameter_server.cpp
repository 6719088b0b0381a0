#include "dtsim/plan/parameter_server.hpp"

#include "dtsim/plan/layer_steps.hpp"
#include "dtsim/plan/memory.hpp"

namespace dtsim::plan {
namespace {

using core::Bytes;

struct Builder {
  TaskGraph tg;

  std::uint32_t add(Task task, const std::vector<std::uint32_t>& deps) {
    task.deps_begin = static_cast<std::uint32_t>(tg.deps.size());
    tg.deps.insert(tg.deps.end(), deps.begin(), deps.end());
    task.deps_end = static_cast<std::uint32_t>(tg.deps.size());
    tg.tasks.push_back(task);
    return static_cast<std::uint32_t>(tg.tasks.size() - 1);
  }

  std::uint32_t transfer(int worker, int call, Phase phase, int iteration, const std::vector<std::uint32_t>& deps) {
    Task t;
    t.kind = TaskKind::kComm;
    t.stream = Stream::kServer;
    t.phase = phase;
    t.rank = worker;
    t.payload = call;
    TaskGraph::set_tag(t, iteration);
    t.micro_batch = iteration;
    return add(t, deps);
  }
};

}  // namespace

TaskGraph lower_parameter_server(const model::Graph& graph, const ResolvedStrategy& r, const topo::Cluster& cluster) {
  const int workers = r.world, shards = r.s.ps;
  Builder b;
  b.tg.world = workers + shards;
  b.tg.dtype = r.s.dtype;
  b.tg.ps_shards = shards;
  b.tg.iterations = r.s.steps;
  for (int w = 0; w < workers; ++w) b.tg.gpu_of_rank.push_back(w);
  for (int j = 0; j < shards; ++j) b.tg.gpu_of_rank.push_back(cluster.host_endpoint(j % cluster.nodes()));

  double params = 0;
  for (const model::Layer& layer : graph.layers) {
    for (const model::Op& op : layer.ops) params += params_on_rank(op, r.s);
  }
  const BytesPerParam per = bytes_per_param(r.s);
  // Workers pull weights and push gradients as the framework moves them; each shard holds 1/shards of them.
  const Bytes pull_bytes(params * per.gather / shards), push_bytes(params * per.reduce / shards);
  std::vector<int> pull_call(static_cast<std::size_t>(workers * shards)), push_call(pull_call.size());
  for (int w = 0; w < workers; ++w) {
    for (int j = 0; j < shards; ++j) {
      b.tg.groups.push_back({GroupKind::kPs, {w, workers + j}});
      const int group = static_cast<int>(b.tg.groups.size() - 1);
      b.tg.calls.push_back({CommOp::kSendRecv, group, pull_bytes});
      pull_call[static_cast<std::size_t>(w * shards + j)] = static_cast<int>(b.tg.calls.size() - 1);
      b.tg.calls.push_back({CommOp::kSendRecv, group, push_bytes});
      push_call[static_cast<std::size_t>(w * shards + j)] = static_cast<int>(b.tg.calls.size() - 1);
    }
  }

  LayerSteps steps(graph, r, b.tg.kernels);
  // What each layer holds from its forward to its backward, as the
  // collective lowering counts it (full recomputation included).
  std::vector<HeldActivations> activations;
  for (std::size_t l = 0; l < graph.layers.size(); ++l) {
    const model::Layer& layer = graph.layers[l];
    activations.push_back(
        held_activations(graph, layer, saved_activation_bytes(layer, r), steps.recomputed(static_cast<int>(l)), r));
  }
  std::vector<std::vector<std::uint32_t>> pushes(static_cast<std::size_t>(workers));
  StaticMemory memory = static_memory(params, r, cluster.device().runtime_allowance);
  memory.optimizer = Bytes(0);  // the shards hold the optimizer state, on their hosts
  for (int w = 0; w < workers; ++w) b.tg.simulated.push_back({w, 0, memory});

  for (int it = 0; it < r.s.steps; ++it) {
    std::vector<std::vector<std::uint32_t>> next(static_cast<std::size_t>(workers));
    std::vector<std::uint32_t> everyone;
    for (const auto& p : pushes) everyone.insert(everyone.end(), p.begin(), p.end());
    for (int w = 0; w < workers; ++w) {
      const auto& wait_for = r.s.sync ? everyone : pushes[static_cast<std::size_t>(w)];
      std::vector<std::uint32_t> pulls;
      for (int j = 0; j < shards; ++j) {
        pulls.push_back(b.transfer(w, pull_call[static_cast<std::size_t>(w * shards + j)], Phase::kPull, it, wait_for));
      }
      std::vector<std::uint32_t> before = pulls;
      std::uint32_t last = 0;
      for (int mb = 0; mb < r.micro_batches; ++mb) {
        for (std::size_t l = 0; l < graph.layers.size(); ++l) {
          Task t;
          t.rank = w;
          t.micro_batch = mb;
          t.layer = static_cast<int>(l);
          t.phase = Phase::kForward;
          const auto& fwd = steps.forward(static_cast<int>(l));
          for (std::size_t k = 0; k < fwd.size(); ++k) {
            t.payload = fwd[k].kernel;
            b.tg.set_activation_change(t, k == 0 ? activations[l].kept : Bytes(0), Bytes(0));
            last = b.add(t, before);
            before.clear();
          }
        }
        for (std::size_t l = graph.layers.size(); l-- > 0;) {
          Task t;
          t.rank = w;
          t.micro_batch = mb;
          t.layer = static_cast<int>(l);
          t.phase = Phase::kBackward;
          const auto& bwd = steps.backward(static_cast<int>(l));
          const HeldActivations& a = activations[l];
          for (std::size_t k = 0; k < bwd.size(); ++k) {
            t.payload = bwd[k].kernel;
            b.tg.set_activation_change(t, k == 0 ? a.recomputed : Bytes(0),
                                       k + 1 == bwd.size() ? a.kept + a.recomputed : Bytes(0));
            last = b.add(t, {});
          }
        }
      }
      for (int j = 0; j < shards; ++j) {
        next[static_cast<std::size_t>(w)].push_back(
            b.transfer(w, push_call[static_cast<std::size_t>(w * shards + j)], Phase::kPush, it, {last}));
      }
    }
    pushes = std::move(next);
  }
  return std::move(b.tg);
}

}  // namespace dtsim::plan
