#include "dtsim/plan/lower.hpp"

#include <map>
#include <optional>
#include <tuple>

#include "dtsim/plan/memory.hpp"

namespace dtsim::plan {
namespace {

using core::Bytes;
using core::Flops;

// One layer in one phase: compute segments separated by tensor-parallel collectives.
struct Step {
  bool is_comm = false;
  int kernel = -1;
  Bytes comm_bytes;
};

// The tag space of a group: collectives count calls; sends name micro-batch and direction.
std::int64_t p2p_tag(int micro_batch, bool backward) { return 2 * static_cast<std::int64_t>(micro_batch) + (backward ? 1 : 0); }

class Lowering {
 public:
  Lowering(const model::Graph& graph, const ResolvedStrategy& r, const topo::Cluster& cluster, const LowerOptions& options)
      : graph_(graph), r_(r), stages_(stage_layers(graph, r.s.pp)) {
    tg_.world = r.world;
    tg_.dtype = r.s.dtype;
    tg_.gpu_of_rank = topo::Placement::node_major(r.world).gpu_of_rank;
    (void)cluster;
    act_bytes_ = hw::activation_bytes(r.s.dtype);
    steps_.resize(graph.layers.size() * 2);
    for (int p = 0; p < r.s.pp; ++p) {
      for (int d = 0; d < (options.full ? r.s.dp : 1); ++d) {
        for (int t = 0; t < (options.full ? r.s.tp : 1); ++t) ranks_.push_back({t, d, p});
      }
    }
  }

  TaskGraph run() {
    for (auto [t, d, p] : ranks_) lower_rank(t, d, p);
    return std::move(tg_);
  }

 private:
  int rank_of(int t, int d, int p) const { return t + r_.s.tp * (d + r_.s.dp * p); }

  int group(GroupKind kind, std::vector<int> ranks) {
    auto key = std::pair{kind, ranks};
    auto it = group_ids_.find(key);
    if (it != group_ids_.end()) return it->second;
    tg_.groups.push_back({kind, std::move(ranks)});
    return group_ids_[key] = static_cast<int>(tg_.groups.size() - 1);
  }
  int tp_group(int d, int p) {
    std::vector<int> ranks;
    for (int t = 0; t < r_.s.tp; ++t) ranks.push_back(rank_of(t, d, p));
    return group(GroupKind::kTp, std::move(ranks));
  }
  int dp_group(int t, int p) {
    std::vector<int> ranks;
    for (int d = 0; d < r_.s.dp; ++d) ranks.push_back(rank_of(t, d, p));
    return group(GroupKind::kDp, std::move(ranks));
  }
  int pp_pair(int t, int d, int p) { return group(GroupKind::kPp, {rank_of(t, d, p), rank_of(t, d, p + 1)}); }

  int call(CommOp op, int group_id, Bytes bytes) {
    auto key = std::tuple{op, group_id, bytes.value()};
    auto it = call_ids_.find(key);
    if (it != call_ids_.end()) return it->second;
    tg_.calls.push_back({op, group_id, bytes});
    return call_ids_[key] = static_cast<int>(tg_.calls.size() - 1);
  }

  hw::OpWork work(const model::Op& op, bool backward) const {
    const double mbs = r_.s.mbs;
    const double split = op.split == model::TensorSplit::kSharded ? r_.s.tp : 1;
    hw::OpWork w;
    w.kind = op.kind;
    w.flops = (backward ? op.backward_flops : op.forward_flops) * (mbs / split);
    w.bytes_moved = Bytes((backward ? op.backward_elements_moved : op.forward_elements_moved) * act_bytes_ * mbs / split);
    if (op.kind == model::OpKind::kAttention && r_.s.flash_attention) {
      // FlashAttention reads Q, K, V and writes O once; its backward recomputes
      // the scores: 5 GEMMs against the forward's 2, i.e. 2.5x the forward.
      w.fused = true;
      w.bytes_moved = Bytes(4.0 * static_cast<double>(op.gemm.m * op.gemm.k * op.gemm.batch / 2) * act_bytes_ * mbs / split *
                            (backward ? 2 : 1));
      if (backward) w.flops = op.forward_flops * (2.5 * mbs / split);
    }
    w.gemm = op.gemm;
    w.gemm.m *= r_.s.mbs;
    w.gemm.n = std::max<std::int64_t>(1, w.gemm.n / static_cast<std::int64_t>(split));
    return w;
  }

  // Compute segments and tp collectives of one layer in one phase; built once.
  const std::vector<Step>& steps(int layer, bool backward) {
    std::vector<Step>& out = steps_[static_cast<std::size_t>(2 * layer + (backward ? 1 : 0))];
    if (!out.empty()) return out;
    const model::Layer& l = graph_.layers[static_cast<std::size_t>(layer)];
    const Bytes tp_bytes(static_cast<double>(graph_.transformer ? graph_.seq_len * graph_.transformer->hidden : 0) *
                         act_bytes_ * r_.s.mbs);
    Kernel current{l.name + (backward ? ".bwd" : ".fwd"), {}, Flops(0), Flops(0)};
    auto flush = [&] {
      if (current.ops.empty()) return;
      tg_.kernels.push_back(current);
      out.push_back({false, static_cast<int>(tg_.kernels.size() - 1), Bytes(0)});
      current.ops.clear();
      current.model_flops = current.hardware_flops = Flops(0);
    };
    auto add = [&](const model::Op& op) {
      hw::OpWork w = work(op, backward);
      current.ops.push_back(w);
      // Model FLOPs count the algorithm's work once; recomputed scores are hardware FLOPs only.
      current.model_flops += (backward ? op.backward_flops : op.forward_flops) *
                             (static_cast<double>(r_.s.mbs) / (op.split == model::TensorSplit::kSharded ? r_.s.tp : 1));
      current.hardware_flops += w.flops;
    };
    const bool tp = r_.s.tp > 1;
    if (!backward) {
      for (const model::Op& op : l.ops) {
        add(op);
        if (tp && op.tp_reduce_after) flush(), out.push_back({true, -1, tp_bytes});
      }
    } else {
      for (auto it = l.ops.rbegin(); it != l.ops.rend(); ++it) {
        add(*it);
        if (tp && it->tp_gather_before) flush(), out.push_back({true, -1, tp_bytes});
      }
    }
    flush();
    return out;
  }

  std::uint32_t add_task(Task task, std::initializer_list<std::optional<std::uint32_t>> deps) {
    task.deps_begin = static_cast<std::uint32_t>(tg_.deps.size());
    for (const auto& d : deps) {
      if (d) tg_.deps.push_back(*d);
    }
    task.deps_end = static_cast<std::uint32_t>(tg_.deps.size());
    tg_.tasks.push_back(task);
    return static_cast<std::uint32_t>(tg_.tasks.size() - 1);
  }

  struct RankState {
    int rank, t, d, p;
    int tp_group = -1, dp_group = -1;
    std::int64_t tp_calls = 0, dp_calls = 0;
    std::optional<std::uint32_t> last_compute;
  };

  std::uint32_t comm(RankState& s, Stream stream, CommOp op, int group_id, std::int64_t tag, Bytes bytes,
                     Phase phase, int mb, int layer, std::initializer_list<std::optional<std::uint32_t>> deps) {
    Task task;
    task.kind = TaskKind::kComm;
    task.stream = stream;
    task.phase = phase;
    task.rank = s.rank;
    task.payload = call(op, group_id, bytes);
    task.tag = tag;
    task.micro_batch = mb;
    task.layer = layer;
    return add_task(task, deps);
  }

  // Runs one layer's steps; returns the last compute task.
  // ZeRO-3 / FSDP: gather a layer's weights before it runs, in both passes.
  // Gathers depend on nothing, so the dp stream runs them ahead of compute
  // (FSDP's prefetch); the backward issues the next one before the current
  // reduce-scatter, as FSDP's backward prefetch does.
  std::optional<std::uint32_t> gather(RankState& s, int layer, bool backward, int mb) {
    if (!sharded_params() || grad_bytes(layer).value() <= 0) return std::nullopt;
    return comm(s, Stream::kDpComm, CommOp::kAllGather, s.dp_group, s.dp_calls++, weight_bytes(layer),
                backward ? Phase::kBackward : Phase::kForward, mb, layer, {});
  }

  void run_layer(RankState& s, int layer, bool backward, int mb, std::optional<std::uint32_t> first_dep,
                 std::optional<std::uint32_t> gathered) {
    const auto& layer_steps = steps(layer, backward);
    const Bytes saved = saved_activation_bytes(graph_.layers[static_cast<std::size_t>(layer)], r_);
    std::optional<std::uint32_t> pending = first_dep;
    for (std::size_t i = 0; i < layer_steps.size(); ++i) {
      const Step& step = layer_steps[i];
      if (step.is_comm) {
        pending = comm(s, Stream::kTpComm, CommOp::kAllReduce, s.tp_group, s.tp_calls++, step.comm_bytes,
                       backward ? Phase::kBackward : Phase::kForward, mb, layer, {s.last_compute});
        continue;
      }
      Task task;
      task.kind = TaskKind::kCompute;
      task.phase = backward ? Phase::kBackward : Phase::kForward;
      task.rank = s.rank;
      task.payload = step.kernel;
      task.micro_batch = mb;
      task.layer = layer;
      if (!backward && i == 0) task.alloc_at_start = saved;
      if (backward && i + 1 == layer_steps.size()) task.free_at_end = saved;
      s.last_compute = add_task(task, {pending, gathered});
      pending.reset();
      gathered.reset();
    }
  }

  void forward(RankState& s, int mb) {
    const int last = r_.s.pp - 1;
    const Bytes p2p_bytes = boundary_bytes();
    std::optional<std::uint32_t> recv;
    if (s.p > 0) {
      recv = comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_pair(s.t, s.d, s.p - 1), p2p_tag(mb, false),
                  p2p_bytes, Phase::kForward, mb, -1, {});
    }
    for (int layer : stages_[static_cast<std::size_t>(s.p)]) {
      run_layer(s, layer, false, mb, recv, gather(s, layer, false, mb));
      recv.reset();
    }
    if (s.p < last) {
      comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_pair(s.t, s.d, s.p), p2p_tag(mb, false), p2p_bytes,
           Phase::kForward, mb, -1, {s.last_compute});
    }
  }

  void backward(RankState& s, int mb, bool last_micro_batch, std::vector<std::uint32_t>& grad_comms) {
    const int last = r_.s.pp - 1;
    const Bytes p2p_bytes = boundary_bytes();
    std::optional<std::uint32_t> recv;
    if (s.p < last) {
      recv = comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_pair(s.t, s.d, s.p), p2p_tag(mb, true), p2p_bytes,
                  Phase::kBackward, mb, -1, {});
    }
    const auto& layers = stages_[static_cast<std::size_t>(s.p)];
    const CommOp reduce = r_.s.zero >= 1 ? CommOp::kReduceScatter : CommOp::kAllReduce;
    std::vector<std::pair<int, Bytes>> held;  // buckets waiting for the end of the backward (overlap=off)
    Bytes bucket;
    std::optional<std::uint32_t> next_gather = layers.empty() ? std::nullopt : gather(s, layers.back(), true, mb);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      std::optional<std::uint32_t> gathered = next_gather;
      next_gather = std::next(it) != layers.rend() ? gather(s, *std::next(it), true, mb) : std::nullopt;
      run_layer(s, *it, true, mb, recv, gathered);
      recv.reset();
      if (sharded_params()) {
        // Sharded gradients cannot wait for the last micro-batch: reduce-scatter each one.
        if (grad_bytes(*it).value() > 0) {
          grad_comms.push_back(comm(s, Stream::kDpComm, CommOp::kReduceScatter, s.dp_group, s.dp_calls++,
                                    grad_bytes(*it), Phase::kBackward, mb, *it, {s.last_compute}));
        }
        continue;
      }
      if (!last_micro_batch || r_.s.dp == 1) continue;
      bucket += grad_bytes(*it);
      if (bucket >= r_.s.bucket || std::next(it) == layers.rend()) {
        if (r_.s.overlap) {
          grad_comms.push_back(comm(s, Stream::kDpComm, reduce, s.dp_group, s.dp_calls++, bucket, Phase::kBackward,
                                    mb, *it, {s.last_compute}));
        } else {
          held.emplace_back(*it, bucket);
        }
        bucket = Bytes(0);
      }
    }
    for (auto [layer, bytes] : held) {
      grad_comms.push_back(comm(s, Stream::kDpComm, reduce, s.dp_group, s.dp_calls++, bytes, Phase::kBackward, mb,
                                layer, {s.last_compute}));
    }
    if (s.p > 0) {
      comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_pair(s.t, s.d, s.p - 1), p2p_tag(mb, true), p2p_bytes,
           Phase::kBackward, mb, -1, {s.last_compute});
    }
  }

  void optimizer(RankState& s, const std::vector<std::uint32_t>& grad_comms, double params) {
    const double shards = r_.s.zero >= 1 ? r_.s.dp : 1;
    Kernel k{"optimizer.adam", {}, Flops(0), Flops(0)};
    hw::OpWork update;
    update.kind = model::OpKind::kElementwise;
    // Adam reads master weights, m, v and the gradient and writes them back with
    // the low-precision copy: 28 bytes per parameter in either precision.
    update.bytes_moved = Bytes(28.0 * params / shards);
    k.ops.push_back(update);
    tg_.kernels.push_back(k);
    Task task;
    task.kind = TaskKind::kCompute;
    task.phase = Phase::kOptimizer;
    task.rank = s.rank;
    task.payload = static_cast<int>(tg_.kernels.size() - 1);
    task.tag = 0;
    task.deps_begin = static_cast<std::uint32_t>(tg_.deps.size());
    for (std::uint32_t c : grad_comms) tg_.deps.push_back(c);
    task.deps_end = static_cast<std::uint32_t>(tg_.deps.size());
    tg_.tasks.push_back(task);
    s.last_compute = static_cast<std::uint32_t>(tg_.tasks.size() - 1);
    if (r_.s.zero >= 1 && r_.s.zero < 3 && r_.s.dp > 1) {
      Bytes weights(params * bytes_per_param(r_.s.dtype).params);
      comm(s, Stream::kDpComm, CommOp::kAllGather, s.dp_group, s.dp_calls++, weights, Phase::kOptimizer, 0, -1,
           {s.last_compute});
    }
  }

  Bytes boundary_bytes() const {
    const double hidden = graph_.transformer ? static_cast<double>(graph_.transformer->hidden) : 0;
    return Bytes(static_cast<double>(graph_.seq_len) * hidden * act_bytes_ * r_.s.mbs / r_.s.tp);
  }

  bool sharded_params() const { return r_.s.zero >= 3 && r_.s.dp > 1; }

  Bytes weight_bytes(int layer) const {
    return grad_bytes(layer) * (bytes_per_param(r_.s.dtype).params / bytes_per_param(r_.s.dtype).grads);
  }

  Bytes grad_bytes(int layer) const {
    double params = 0;
    for (const model::Op& op : graph_.layers[static_cast<std::size_t>(layer)].ops) params += params_on_rank(op, r_.s.tp);
    return Bytes(params * bytes_per_param(r_.s.dtype).grads);
  }

  double stage_params(int p) const {
    double params = 0;
    for (int layer : stages_[static_cast<std::size_t>(p)]) {
      for (const model::Op& op : graph_.layers[static_cast<std::size_t>(layer)].ops) params += params_on_rank(op, r_.s.tp);
    }
    return params;
  }

  void lower_rank(int t, int d, int p) {
    RankState s{rank_of(t, d, p), t, d, p, -1, -1, 0, 0, std::nullopt};
    if (r_.s.tp > 1) s.tp_group = tp_group(d, p);
    if (r_.s.dp > 1) s.dp_group = dp_group(t, p);
    const double params = stage_params(p);
    tg_.simulated.push_back({s.rank, p, static_cast_memory(params)});

    // 1F1B: stage p runs min(pp - p - 1, m) forwards before its first backward.
    const int m = r_.micro_batches;
    const int warmup = std::min(r_.s.pp - p - 1, m);
    std::vector<std::uint32_t> grad_comms;
    int next_forward = 0, next_backward = 0;
    for (; next_forward < warmup; ++next_forward) forward(s, next_forward);
    while (next_backward < m) {
      if (next_forward < m) forward(s, next_forward++);
      backward(s, next_backward, next_backward == m - 1, grad_comms);
      ++next_backward;
    }
    optimizer(s, grad_comms, params);
  }

  StaticMemory static_cast_memory(double params) const { return static_memory(params, r_); }

  const model::Graph& graph_;
  const ResolvedStrategy& r_;
  std::vector<std::vector<int>> stages_;
  std::vector<std::tuple<int, int, int>> ranks_;
  TaskGraph tg_;
  double act_bytes_ = 2;
  std::vector<std::vector<Step>> steps_;
  std::map<std::pair<GroupKind, std::vector<int>>, int> group_ids_;
  std::map<std::tuple<CommOp, int, double>, int> call_ids_;
};

}  // namespace

std::vector<std::vector<int>> stage_layers(const model::Graph& graph, int stages) {
  std::vector<int> blocks;
  std::vector<int> embedding, head;
  for (std::size_t i = 0; i < graph.layers.size(); ++i) {
    switch (graph.layers[i].role) {
      case model::LayerRole::kEmbedding: embedding.push_back(static_cast<int>(i)); break;
      case model::LayerRole::kHead: head.push_back(static_cast<int>(i)); break;
      default: blocks.push_back(static_cast<int>(i)); break;
    }
  }
  std::vector<std::vector<int>> out(static_cast<std::size_t>(stages));
  out.front() = embedding;
  const std::size_t n = blocks.size();
  for (std::size_t b = 0; b < n; ++b) out[b * static_cast<std::size_t>(stages) / n].push_back(blocks[b]);
  out.back().insert(out.back().end(), head.begin(), head.end());
  return out;
}

TaskGraph lower(const model::Graph& graph, const ResolvedStrategy& strategy, const topo::Cluster& cluster,
                const LowerOptions& options) {
  return Lowering(graph, strategy, cluster, options).run();
}

}  // namespace dtsim::plan
