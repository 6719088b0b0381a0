#include "dtsim/plan/lower.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "dtsim/plan/layer_steps.hpp"
#include "dtsim/plan/memory.hpp"
#include "dtsim/plan/rank_layout.hpp"

namespace dtsim::plan {
namespace {

using core::Bytes;
using core::Flops;
using TaskRef = std::optional<std::uint32_t>;

class Lowering {
 public:
  Lowering(const model::Graph& graph, const ResolvedStrategy& r, const LowerOptions& options,
           core::Bytes runtime_allowance, int gpus_per_node)
      : runtime_allowance_(runtime_allowance), full_(options.full), spmd_ranks_(options.spmd_ranks && !options.full), graph_(graph), r_(r), layout_(r), virtual_stages_(r.s.pp * r.s.vpp), chunks_(stage_layers(graph, r.s)),
        steps_(graph, r, tg_.kernels) {
    tg_.world = r.world;
    if (r.expert_grid()) experts_.emplace(r);
    // Per-layer sizes every micro-batch of every rank asks for, worked out once.
    for (const model::Layer& l : graph.layers) {
      saved_bytes_.push_back(saved_activation_bytes(l, r));
      std::array<double, 2> params{};  // dense, experts
      for (const model::Op& op : l.ops) params[op.expert ? 1 : 0] += params_on_rank(op, r.s);
      grad_bytes_.push_back({Bytes(params[0] * bytes_per_param(r.s).reduce), Bytes(params[1] * bytes_per_param(r.s).reduce)});
    }
    tg_.dtype = r.s.dtype;
    tg_.tp_comm_overlap = r.s.tp_overlap;
    if (r.s.placement == "spread") {
      tg_.gpu_of_rank = topo::Placement::spread(r.world, gpus_per_node).gpu_of_rank;
    } else if (r.s.placement == "random") {
      tg_.gpu_of_rank = topo::Placement::random(r.world).gpu_of_rank;
    } else {
      tg_.gpu_of_rank = topo::Placement::packed(r.world).gpu_of_rank;
    }
    const int all = RankLayout::kT | RankLayout::kC | RankLayout::kE | RankLayout::kD;
    for (int p = 0; p < r.s.pp; ++p) {
      Coord first{0, 0, 0, 0, p};
      if (!options.full) {
        ranks_.push_back(first);
        continue;
      }
      for (int rank : layout_.group(first, all)) ranks_.push_back(layout_.coord(rank));
    }
  }

  TaskGraph run() {
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      lower_rank(ranks_[i]);
      // Every rank lowers to about as many tasks as the first: reserve them
      // all once it has shown how many, rather than copying a graph of
      // millions of tasks at each doubling (issue 16: 11% of a search).
      if (i == 0 && ranks_.size() > 1) {
        const std::size_t ranks = ranks_.size();
        tg_.tasks.reserve(tg_.tasks.size() * ranks + tg_.tasks.size() / 8 + 64);
        tg_.deps.reserve(tg_.deps.size() * ranks + tg_.deps.size() / 8 + 64);
      }
    }
    if (!full_) {
      for (CommGroup& g : tg_.groups) {
        const std::optional<ExpertGrid::Span> span = expert_span(g.kind);
        g.copies = span ? experts_->copies(g.ranks, *span) : layout_.copies(g.ranks);
      }
      if (spmd_ranks_) add_spmd_ranks();
    }
    return std::move(tg_);
  }

 private:
  // Parameters a rank of a stage holds: dense weights and its experts'.
  struct StageParams {
    double dense = 0, experts = 0;
  };

  struct RankState {
    int rank = 0;
    Coord x;
    int tp_group = -1, cp_group = -1, ep_group = -1, dp_group = -1, expert_dp_group = -1, expert_tp_group = -1;
    std::int64_t tp_calls = 0, cp_calls = 0, ep_calls = 0, dp_calls = 0, expert_tp_calls = 0;
    std::vector<int> pp_links;  // group of the link from virtual stage v to v + 1, once looked up
    TaskRef last_compute;
    TaskRef unfinished_send;  // with blocking transfers, the next compute waits for it
    std::vector<std::uint32_t> grad_comms;
    // overlap=off: buckets wait for the pipeline flush, every chunk's
    // (Megatron-LM 2021 reduced after the whole schedule, also when interleaved).
    struct Held {
      bool experts;
      Bytes bytes;
      int mb, layer;
    };
    std::vector<Held> held;
    std::vector<bool> gathered;  // param_overlap: layers whose weights this step has gathered
    // ZeRO-3: the last compute task of every layer run so far, in order; a
    // gather with a bounded prefetch waits for the one that frees its slot.
    std::vector<std::uint32_t> layers_done;
  };

  // Every rank of each stage runs its simulated rank's tasks: each copy of
  // a group becomes a group of its own, each call one per copy, and each
  // rank learns, per call, which one it makes (TaskGraph::spmd_ranks).
  void add_spmd_ranks() {
    const std::size_t groups = tg_.groups.size(), calls = tg_.calls.size();
    const auto world = static_cast<std::size_t>(tg_.world);
    std::vector<std::vector<int>> concrete(groups);      // per group: itself, then each copy's group
    std::vector<std::vector<int>> copy_of_rank(groups);  // per group and rank: which of them it is in (-1: none)
    for (std::size_t gi = 0; gi < groups; ++gi) {
      const GroupKind kind = tg_.groups[gi].kind;
      std::vector<std::vector<int>> copies = std::move(tg_.groups[gi].copies);
      tg_.groups[gi].copies.clear();
      copy_of_rank[gi].assign(world, -1);
      for (int r : tg_.groups[gi].ranks) copy_of_rank[gi][static_cast<std::size_t>(r)] = 0;
      concrete[gi].push_back(static_cast<int>(gi));
      for (std::vector<int>& ranks : copies) {
        for (int r : ranks) copy_of_rank[gi][static_cast<std::size_t>(r)] = static_cast<int>(concrete[gi].size());
        concrete[gi].push_back(group(kind, std::move(ranks)));
      }
    }
    std::vector<std::vector<int>> concrete_calls(calls);  // per call: the same call on each of its group's copies
    for (std::size_t c = 0; c < calls; ++c) {
      const CommCall call_c = tg_.calls[c];
      for (int g : concrete[static_cast<std::size_t>(call_c.group)]) concrete_calls[c].push_back(call(call_c.op, g, call_c.bytes));
    }
    tg_.spmd_template_calls = calls;
    const int all = RankLayout::kT | RankLayout::kC | RankLayout::kE | RankLayout::kD;
    for (std::size_t s = 0; s < tg_.simulated.size(); ++s) {
      // The order --full lowers them in, so both replays break ties alike.
      for (int rank : layout_.group(Coord{0, 0, 0, 0, tg_.simulated[s].stage}, all)) {
        tg_.spmd_ranks.push_back({rank, static_cast<int>(s)});
        for (std::size_t c = 0; c < calls; ++c) {
          const int j = copy_of_rank[static_cast<std::size_t>(tg_.calls[c].group)][static_cast<std::size_t>(rank)];
          tg_.spmd_calls.push_back(j < 0 ? TaskGraph::kNoCall : static_cast<std::uint32_t>(concrete_calls[c][static_cast<std::size_t>(j)]));
        }
      }
    }
  }

  // Groups the expert grid forms (when the experts have one), by what they span.
  std::optional<ExpertGrid::Span> expert_span(GroupKind kind) const {
    if (!experts_) return std::nullopt;
    switch (kind) {
      case GroupKind::kEp: return ExpertGrid::Span::kExpert;
      case GroupKind::kExpertTp: return ExpertGrid::Span::kExpertTp;
      case GroupKind::kExpertDp: return ExpertGrid::Span::kExpertDp;
      default: return std::nullopt;
    }
  }

  // Virtual stage of chunk c on stage p (Megatron: chunk c holds model chunk c*pp + p).
  int virtual_stage(int p, int chunk) const { return chunk * r_.s.pp + p; }
  const std::vector<int>& layers_of(int p, int chunk) const {
    return chunks_[static_cast<std::size_t>(virtual_stage(p, chunk))];
  }

  int group(GroupKind kind, std::vector<int> ranks) {
    auto key = std::pair{kind, ranks};
    auto it = group_ids_.find(key);
    if (it != group_ids_.end()) return it->second;
    tg_.groups.push_back({kind, std::move(ranks)});
    return group_ids_[key] = static_cast<int>(tg_.groups.size() - 1);
  }
  // The link from virtual stage v to v + 1, between the ranks that hold them.
  int pp_link(RankState& s, int v) {
    // Every micro-batch crosses the same links: look each up once per rank.
    if (s.pp_links.empty()) s.pp_links.assign(static_cast<std::size_t>(virtual_stages_), -1);
    int& id = s.pp_links[static_cast<std::size_t>(v)];
    if (id >= 0) return id;
    Coord from = s.x, to = s.x;
    from.p = v % r_.s.pp;
    to.p = (v + 1) % r_.s.pp;
    return id = group(GroupKind::kPp, {layout_.rank(from), layout_.rank(to)});
  }
  std::int64_t p2p_tag(int micro_batch, int v, bool backward) const {
    return (static_cast<std::int64_t>(micro_batch) * virtual_stages_ + v) * 2 + (backward ? 1 : 0);
  }

  int call(CommOp op, int group_id, Bytes bytes) {
    auto key = std::tuple{op, group_id, bytes.value()};
    auto it = call_ids_.find(key);
    if (it != call_ids_.end()) return it->second;
    tg_.calls.push_back({op, group_id, bytes});
    return call_ids_[key] = static_cast<int>(tg_.calls.size() - 1);
  }

  std::uint32_t add_task(Task task, std::initializer_list<TaskRef> deps) {
    task.deps_begin = static_cast<std::uint32_t>(tg_.deps.size());
    for (const TaskRef& d : deps) {
      if (d) tg_.deps.push_back(*d);
    }
    task.deps_end = static_cast<std::uint32_t>(tg_.deps.size());
    tg_.tasks.push_back(task);
    return static_cast<std::uint32_t>(tg_.tasks.size() - 1);
  }

  std::uint32_t comm(RankState& s, Stream stream, CommOp op, int group_id, std::int64_t tag, Bytes bytes, Phase phase,
                     int mb, int layer, std::initializer_list<TaskRef> deps) {
    Task task;
    task.kind = TaskKind::kComm;
    task.stream = stream;
    task.phase = phase;
    task.rank = s.rank;
    task.payload = call(op, group_id, bytes);
    TaskGraph::set_tag(task, tag);
    task.micro_batch = mb;
    task.layer = layer;
    return add_task(task, deps);
  }

  bool sharded_params() const { return r_.s.zero >= 3 && replicas() > 1; }
  bool overlapped_param_gather() const { return r_.s.param_overlap && r_.s.zero >= 1 && r_.s.zero < 3 && replicas() > 1; }
  int replicas() const { return r_.dense_replicas(); }
  // Gradient bytes of a layer's dense weights, or of its experts.
  Bytes grad_bytes(int layer, bool experts = false) const {
    return grad_bytes_[static_cast<std::size_t>(layer)][experts ? 1 : 0];
  }
  Bytes weight_bytes(int layer, bool experts = false) const {
    return grad_bytes(layer, experts) * (bytes_per_param(r_.s).gather / bytes_per_param(r_.s).reduce);
  }
  Bytes boundary_bytes() const {
    const double hidden = graph_.transformer ? static_cast<double>(graph_.transformer->hidden) : 0;
    // Megatron sends 1/tp of the activation and all-gathers it over NVLink (scatter-gather optimisation).
    return Bytes(static_cast<double>(graph_.seq_len) * hidden * hw::activation_bytes(r_.s.dtype) * r_.s.mbs /
                 (r_.s.tp * r_.s.cp));
  }

  // ZeRO-3 / FSDP: gather a layer's weights before it runs, in both passes.
  // Gathers depend on nothing, so the dp stream runs them ahead of compute
  // (FSDP's prefetch); the backward issues the next one before the current
  // reduce-scatter, as FSDP's backward prefetch does.
  TaskRef gather(RankState& s, int layer, bool backward, int mb, int ahead = 0) {
    if (overlapped_param_gather() && !backward && grad_bytes(layer).value() > 0) {
      // Megatron-Core --overlap-param-gather: the distributed optimizer's
      // all-gather of updated weights runs layer by layer ahead of the first
      // forward that needs them, instead of after the step.
      auto& done = s.gathered;
      if (done.empty()) done.assign(graph_.layers.size(), false);
      if (done[static_cast<std::size_t>(layer)]) return std::nullopt;
      done[static_cast<std::size_t>(layer)] = true;
      const std::uint32_t dense = comm(s, Stream::kDpComm, CommOp::kAllGather, s.dp_group, s.dp_calls++,
                                       weight_bytes(layer), Phase::kForward, mb, layer, {});
      return gather_experts(s, layer, Phase::kForward, mb, {}).value_or(dense);
    }
    if (!sharded_params() || grad_bytes(layer).value() <= 0) return std::nullopt;
    const Phase phase = backward ? Phase::kBackward : Phase::kForward;
    const std::uint32_t dense = comm(s, Stream::kDpComm, CommOp::kAllGather, s.dp_group, s.dp_calls++,
                                     weight_bytes(layer), phase, mb, layer, {slot_freed(s, ahead)});
    return gather_experts(s, layer, phase, mb, slot_freed(s, ahead)).value_or(dense);
  }

  // The layer's expert weights gathered over the ranks that hold the same
  // experts, after its dense ones on the same stream (so the layer waits for
  // this one alone); none without experts or expert replicas.
  TaskRef gather_experts(RankState& s, int layer, Phase phase, int mb, TaskRef after) {
    if (s.expert_dp_group < 0 || grad_bytes(layer, true).value() <= 0) return std::nullopt;
    return comm(s, Stream::kDpComm, CommOp::kAllGather, s.expert_dp_group, s.dp_calls++, weight_bytes(layer, true),
                phase, mb, layer, {after});
  }

  // The layer run whose end lets a gather start that many layers ahead of
  // the next one to run (0: the gather is for the next layer itself): with
  // prefetch p, at most p + 1 layers' gathered weights are held at once.
  TaskRef slot_freed(const RankState& s, int ahead) const {
    if (r_.s.prefetch < 0) return std::nullopt;
    const auto back = static_cast<std::int64_t>(r_.s.prefetch) - ahead;
    const auto index = static_cast<std::int64_t>(s.layers_done.size()) - 1 - back;
    if (index < 0 || index >= static_cast<std::int64_t>(s.layers_done.size())) return std::nullopt;
    return s.layers_done[static_cast<std::size_t>(index)];
  }

  // One layer's steps, lowered a run at a time so that two passes can take
  // turns (ep_overlap); it holds what a layer's lowering carries from one
  // step to the next.
  struct LayerCursor {
    const std::vector<Step>* steps = nullptr;  // the layer's forward or backward steps
    int layer = 0;
    bool backward = false;
    int mb = 0;
    std::size_t next = 0;                // the next step to lower
    [[nodiscard]] bool done() const { return next == steps->size(); }
    std::size_t last_compute_index = 0;  // the layer's last compute step
    TaskRef pending;                     // what the next compute waits for
    TaskRef overlapped;  // a transfer running alongside the current compute step, awaited by the next one
    TaskRef gathered;
    bool first_compute = true;
  };

  LayerCursor start_layer(int layer, bool backward, int mb, TaskRef first_dep, TaskRef gathered) {
    const std::vector<Step>& steps = backward ? steps_.backward(layer) : steps_.forward(layer);
    LayerCursor c;
    c.steps = &steps;
    c.layer = layer;
    c.backward = backward;
    c.mb = mb;
    c.pending = first_dep;
    c.gathered = gathered;
    c.last_compute_index = steps.size();
    for (std::size_t i = 0; i < steps.size(); ++i) {
      if (!steps[i].is_comm) c.last_compute_index = i;
    }
    return c;
  }

  // Lowers the layer's steps until it is done or, with pause_after_ep, until
  // it has issued an expert-parallel all-to-all; true when it paused there.
  // Activations: without full recomputation a layer keeps its saved tensors
  // from forward to backward; with it, only its input, and the recomputed
  // forward holds the rest for the length of the layer's backward.
  bool run_steps(RankState& s, LayerCursor& c, bool pause_after_ep) {
    const std::vector<Step>& steps = *c.steps;
    const bool full = r_.s.recompute == Recompute::kFull;
    const model::Layer& l = graph_.layers[static_cast<std::size_t>(c.layer)];
    const Bytes saved = saved_bytes_[static_cast<std::size_t>(c.layer)];
    const Bytes kept = full && graph_.transformer
                           ? layer_input_bytes(l.tokens > 0 ? l.tokens : graph_.seq_len, graph_.transformer->hidden, r_)
                           : saved;
    const Phase phase = c.backward ? Phase::kBackward : Phase::kForward;
    while (c.next < steps.size()) {
      const std::size_t i = c.next++;
      const Step& step = steps[i];
      if (step.is_comm) {
        auto [stream, group_id, calls] = channel(s, step.group);
        std::uint32_t id = comm(s, stream, step.op, group_id, (*calls)++, step.bytes, phase, c.mb, c.layer, {s.last_compute});
        (step.overlapped ? c.overlapped : c.pending) = id;
        if (pause_after_ep && step.group == GroupKind::kEp) return true;
        continue;
      }
      Task task;
      task.kind = TaskKind::kCompute;
      task.phase = phase;
      task.rank = s.rank;
      task.payload = step.kernel;
      task.micro_batch = c.mb;
      task.layer = c.layer;
      tg_.set_activation_change(task, c.first_compute ? (c.backward ? (full ? saved : Bytes(0)) : kept) : Bytes(0),
                                c.backward && i == c.last_compute_index ? (full ? saved + kept : saved) : Bytes(0));
      s.last_compute = add_task(task, {c.pending, c.gathered, s.unfinished_send});
      s.unfinished_send.reset();
      c.pending = c.overlapped;
      c.overlapped.reset();
      c.gathered.reset();
      c.first_compute = false;
    }
    return false;
  }

  struct Channel {
    Stream stream;
    int group;
    std::int64_t* calls;
  };
  Channel channel(RankState& s, GroupKind kind) {
    switch (kind) {
      case GroupKind::kCp: return {Stream::kCpComm, s.cp_group, &s.cp_calls};
      case GroupKind::kEp: return {Stream::kEpComm, s.ep_group, &s.ep_calls};
      case GroupKind::kExpertTp: return {Stream::kEpComm, s.expert_tp_group, &s.expert_tp_calls};
      default: return {Stream::kTpComm, s.tp_group, &s.tp_calls};
    }
  }

  // Gradients of dense weights reduce over every replica (cp, ep and dp
  // ranks), those of experts over the cp and dp ranks that hold the same experts.
  struct Bucket {
    bool experts = false;
    Bytes bytes;
  };

  void fill(RankState& s, Bucket& b, int layer, int mb, bool last_layer) {
    b.bytes += grad_bytes(layer, b.experts);
    if (b.bytes.value() <= 0 || (b.bytes < r_.s.bucket && !last_layer)) return;
    if (r_.s.overlap) {
      s.grad_comms.push_back(reduce(s, b.experts, b.bytes, mb, layer));
    } else {
      s.held.push_back({b.experts, b.bytes, mb, layer});
    }
    b.bytes = Bytes(0);
  }

  std::uint32_t reduce(RankState& s, bool experts, Bytes bytes, int mb, int layer) {
    const CommOp op = r_.s.zero >= 1 ? CommOp::kReduceScatter : CommOp::kAllReduce;
    return comm(s, Stream::kDpComm, op, experts ? s.expert_dp_group : s.dp_group, s.dp_calls++, bytes, Phase::kBackward,
                mb, layer, {s.last_compute});
  }

  // One forward or backward pass of a model chunk, lowered a run at a time.
  struct PassCursor {
    bool backward = false;
    int mb = 0, chunk = 0;
    bool last_of_chunk = false;  ///< backward: the chunk's last micro-batch, whose gradients reduce
    const std::vector<int>* layers = nullptr;  ///< the chunk's, first to last; null until the pass starts
    std::size_t next_layer = 0;                ///< of those the pass has run (a backward runs them last to first)
    std::optional<LayerCursor> layer{};  ///< the layer under way
    TaskRef recv{}, next_gather{};
    std::array<Bucket, 2> buckets{Bucket{false, Bytes(0)}, Bucket{true, Bytes(0)}};
    TaskRef last_compute{};  ///< the pass's own, while two take turns
  };

  // Lowers the pass until it is done (true) or, with pause_after_ep, until it
  // has issued an expert-parallel all-to-all (false).
  bool advance(RankState& s, PassCursor& p, bool pause_after_ep) {
    const int v = virtual_stage(s.x.p, p.chunk);
    // Backward prefetch (PyTorch FSDP's BACKWARD_PRE): the next layer's
    // gather is issued before this layer's gradients are computed, one layer
    // ahead; without prefetch each layer gathers when it starts.
    const bool ahead = p.backward && r_.s.prefetch != 0;
    if (!p.layers) {
      p.layers = &layers_of(s.x.p, p.chunk);
      if (!p.backward && v > 0) {
        p.recv = comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_link(s, v - 1), p2p_tag(p.mb, v - 1, false),
                      boundary_bytes(), Phase::kForward, p.mb, -1, {});
      }
      if (p.backward && v < virtual_stages_ - 1) {
        p.recv = comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_link(s, v), p2p_tag(p.mb, v, true), boundary_bytes(),
                      Phase::kBackward, p.mb, -1, {});
      }
      if (ahead && !p.layers->empty()) p.next_gather = gather(s, p.layers->back(), true, p.mb);
    }
    const std::size_t count = p.layers->size();
    // The pass's i-th layer: first to last forward, last to first backward.
    auto nth = [&](std::size_t i) { return (*p.layers)[p.backward ? count - 1 - i : i]; };
    while (p.next_layer < count) {
      const int layer = nth(p.next_layer);
      const bool last_layer = p.next_layer + 1 == count;
      if (!p.layer) {
        TaskRef gathered;
        if (!p.backward) {
          gathered = gather(s, layer, false, p.mb);
        } else {
          gathered = ahead ? p.next_gather : gather(s, layer, true, p.mb);
          p.next_gather = ahead && !last_layer ? gather(s, nth(p.next_layer + 1), true, p.mb, 1) : std::nullopt;
        }
        p.layer = start_layer(layer, p.backward, p.mb, p.recv, gathered);
      }
      const bool paused = run_steps(s, *p.layer, pause_after_ep);
      if (!p.layer->done()) return false;
      p.layer.reset();
      ++p.next_layer;
      finish_layer(s, p, layer, last_layer);
      if (paused && !last_layer) return false;
    }
    if (!p.backward && v < virtual_stages_ - 1) {
      TaskRef send = comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_link(s, v), p2p_tag(p.mb, v, false),
                          boundary_bytes(), Phase::kForward, p.mb, -1, {s.last_compute});
      if (!r_.s.p2p_overlap) s.unfinished_send = send;
    }
    if (p.backward && v > 0) {
      TaskRef send = comm(s, Stream::kPointToPoint, CommOp::kSendRecv, pp_link(s, v - 1), p2p_tag(p.mb, v - 1, true),
                          boundary_bytes(), Phase::kBackward, p.mb, -1, {s.last_compute});
      if (!r_.s.p2p_overlap) s.unfinished_send = send;
    }
    return true;
  }

  // What follows a layer's last step: ZeRO-3's bookkeeping and its
  // gradients' reduce-scatter, or the gradient buckets it fills.
  void finish_layer(RankState& s, PassCursor& p, int layer, bool last_layer) {
    if (sharded_params() && s.last_compute) s.layers_done.push_back(*s.last_compute);
    p.recv.reset();
    if (!p.backward) return;
    if (sharded_params()) {
      // Sharded gradients cannot wait for the last micro-batch: reduce-scatter each one.
      if (grad_bytes(layer).value() > 0) {
        s.grad_comms.push_back(comm(s, Stream::kDpComm, CommOp::kReduceScatter, s.dp_group, s.dp_calls++,
                                    grad_bytes(layer), Phase::kBackward, p.mb, layer, {s.last_compute}));
      }
      if (s.expert_dp_group >= 0 && grad_bytes(layer, true).value() > 0) {
        s.grad_comms.push_back(comm(s, Stream::kDpComm, CommOp::kReduceScatter, s.expert_dp_group, s.dp_calls++,
                                    grad_bytes(layer, true), Phase::kBackward, p.mb, layer, {s.last_compute}));
      }
      return;
    }
    const bool replicated = s.dp_group >= 0 || s.expert_dp_group >= 0;
    if (!p.last_of_chunk || !replicated) return;
    for (Bucket& b : p.buckets) {
      if ((b.experts ? s.expert_dp_group : s.dp_group) >= 0) fill(s, b, layer, p.mb, last_layer);
    }
  }

  // Megatron-Core's --overlap-moe-expert-parallel-comm: a backward and a
  // forward pass of the steady state run as one, taking turns at every
  // expert-parallel all-to-all, so that each one's all-to-all runs beside
  // the other's compute (model_chunk_schedule_plan.py: the backward's
  // combine, the forward's attention, the backward's experts and the
  // forward's dispatch, ...). The backward starts.
  void run_merged(RankState& s, PassCursor forward_pass, PassCursor backward_pass) {
    std::array<PassCursor*, 2> turns{&backward_pass, &forward_pass};
    std::array<bool, 2> done{false, false};
    forward_pass.last_compute = backward_pass.last_compute = s.last_compute;
    for (std::size_t t = 0; !done[0] || !done[1]; t = 1 - t) {
      if (done[t]) continue;
      PassCursor& p = *turns[t];
      // Each pass's collectives follow its own compute, not the other's.
      s.last_compute = p.last_compute;
      done[t] = advance(s, p, true);
      p.last_compute = s.last_compute;
    }
    // The later of the two in program order is the rank's last compute.
    const TaskRef a = forward_pass.last_compute, b = backward_pass.last_compute;
    s.last_compute = !a ? b : !b ? a : std::max(*a, *b);
  }

  // Bytes per parameter the step streams through HBM.
  //  - Fused (Megatron's, apex's, DeepSpeed's FusedAdam): the fp32 gradient
  //    read for its global norm (clipping); Adam reading master weights, m,
  //    v and gradient (16) and writing the first three back (12) with, in
  //    mixed precision, the 16-bit weights (2); the gradients zeroed for the
  //    next step (4); with fp16 loss scaling, one more read to unscale and
  //    check for infinities (4).
  //  - Unfused (torch.optim.AdamW's default foreach path, _multi_tensor_adamw
  //    in PyTorch 2.x; a per-tensor loop such as Composer's DecoupledAdamW
  //    makes the same passes): clip_grad_norm_ reads the gradients and scales
  //    them in place (4 + 8); then weight decay on the weights (8), m lerped
  //    toward the gradient (12), v scaled (8) and given grad² (12), sqrt(v)
  //    into a new tensor (8), divided (8) and given eps (8), the weights
  //    updated from m and that (16): 80; zero_grad sets the gradients to
  //    None; GradScaler's unscale with fp16 (8).
  double optimizer_bytes_per_param() const {
    const bool fp16 = r_.s.dtype == hw::Dtype::kFp16;
    if (!r_.s.fused_optimizer()) return 12.0 + 80.0 + (fp16 ? 8.0 : 0.0);
    const bool mixed = r_.s.dtype != hw::Dtype::kFp32 && r_.s.dtype != hw::Dtype::kTf32;
    return 4.0 + 16.0 + 12.0 + (mixed ? 2.0 : 0.0) + 4.0 + (fp16 ? 4.0 : 0.0);
  }

  void optimizer(RankState& s, const StageParams& params) {
    for (const RankState::Held& h : s.held) s.grad_comms.push_back(reduce(s, h.experts, h.bytes, h.mb, h.layer));
    const bool sharded = r_.s.zero >= 1;
    const double updated = params.dense / (sharded ? r_.dense_replicas() : 1) +
                           params.experts / (sharded ? r_.expert_replicas() : 1);
    Kernel k{"optimizer.adam", {}, Flops(0), Flops(0)};
    hw::OpWork update;
    update.kind = model::OpKind::kElementwise;
    update.bytes_moved = Bytes(optimizer_bytes_per_param() * updated);
    k.ops.push_back(update);
    tg_.kernels.push_back(k);
    Task task;
    task.kind = TaskKind::kCompute;
    task.phase = Phase::kOptimizer;
    task.rank = s.rank;
    task.payload = static_cast<int>(tg_.kernels.size() - 1);
    task.deps_begin = static_cast<std::uint32_t>(tg_.deps.size());
    for (std::uint32_t c : s.grad_comms) tg_.deps.push_back(c);
    task.deps_end = static_cast<std::uint32_t>(tg_.deps.size());
    tg_.tasks.push_back(task);
    s.last_compute = static_cast<std::uint32_t>(tg_.tasks.size() - 1);
    if (r_.s.zero >= 1 && r_.s.zero < 3 && s.dp_group >= 0 && !overlapped_param_gather()) {
      // The updated shards come back to every replica: dense weights over
      // the data-parallel group, experts over their expert-dp group.
      Bytes weights(params.dense * bytes_per_param(r_.s).gather);
      comm(s, Stream::kDpComm, CommOp::kAllGather, s.dp_group, s.dp_calls++, weights, Phase::kOptimizer, 0, -1,
           {s.last_compute});
      if (s.expert_dp_group >= 0 && params.experts > 0) {
        comm(s, Stream::kDpComm, CommOp::kAllGather, s.expert_dp_group, s.dp_calls++,
             Bytes(params.experts * bytes_per_param(r_.s).gather), Phase::kOptimizer, 0, -1, {s.last_compute});
      }
    }
  }

  StageParams stage_params(int p) const {
    StageParams params;
    for (int chunk = 0; chunk < r_.s.vpp; ++chunk) {
      for (int layer : layers_of(p, chunk)) {
        for (const model::Op& op : graph_.layers[static_cast<std::size_t>(layer)].ops) {
          (op.expert ? params.experts : params.dense) += params_on_rank(op, r_.s);
        }
      }
    }
    return params;
  }

  // Buffers the communication libraries hold beside the model: FSDP's gathered
  // weights of the running and the prefetched layer, the fusion buffer of an
  // all-reduce over buckets, and a send and a receive buffer per pipeline link.
  Bytes communication_buffers(int p) const {
    Bytes buffers;
    if (sharded_params()) {
      Bytes largest;
      for (int chunk = 0; chunk < r_.s.vpp; ++chunk) {
        for (int layer : layers_of(p, chunk)) largest = std::max(largest, weight_bytes(layer) + weight_bytes(layer, true));
      }
      // The running layer's weights and those gathered ahead of it (the
      // unbounded ideal is held to one ahead, as it was before `prefetch`).
      buffers += largest * (r_.s.prefetch < 0 ? 2.0 : 1.0 + r_.s.prefetch);
    } else if (replicas() > 1) {
      buffers += r_.s.bucket;
    }
    if (r_.s.pp > 1) buffers += boundary_bytes() * 4.0;  // send and receive, activations and gradients
    return buffers;
  }

  void lower_rank(const Coord& x) {
    RankState s;
    s.rank = layout_.rank(x);
    s.x = x;
    using L = RankLayout;
    if (r_.s.tp > 1) s.tp_group = group(GroupKind::kTp, layout_.group(x, L::kT));
    if (r_.s.cp > 1) s.cp_group = group(GroupKind::kCp, layout_.group(x, L::kC));
    if (r_.s.ep > 1 && !experts_) s.ep_group = group(GroupKind::kEp, layout_.group(x, L::kE));
    if (replicas() > 1) s.dp_group = group(GroupKind::kDp, layout_.group(x, L::kC | L::kE | L::kD));
    const bool moe = graph_.transformer && graph_.transformer->experts > 0;
    if (experts_) {
      using S = ExpertGrid::Span;
      if (r_.s.ep > 1) s.ep_group = group(GroupKind::kEp, experts_->group(s.rank, S::kExpert));
      if (r_.s.etp > 1) s.expert_tp_group = group(GroupKind::kExpertTp, experts_->group(s.rank, S::kExpertTp));
      if (r_.expert_replicas() > 1) s.expert_dp_group = group(GroupKind::kExpertDp, experts_->group(s.rank, S::kExpertDp));
    } else if (r_.expert_replicas() > 1 && moe) {
      s.expert_dp_group = group(GroupKind::kExpertDp, layout_.group(x, L::kC | L::kD));
    }
    const int p = x.p;
    const StageParams params = stage_params(p);
    StaticMemory memory = static_memory(params.dense, params.experts, r_, runtime_allowance_);
    memory.other += communication_buffers(p);
    tg_.simulated.push_back({s.rank, p, memory});
    const int m = r_.micro_batches;
    std::vector<int> backwards_left(static_cast<std::size_t>(r_.s.vpp), m);
    auto pass = [&](const PassStep& step) {
      const bool last = step.backward && --backwards_left[static_cast<std::size_t>(step.chunk)] == 0;
      return PassCursor{.backward = step.backward, .mb = step.micro_batch, .chunk = step.chunk, .last_of_chunk = last};
    };
    const std::vector<PassStep> order = stage_order(r_.s.schedule, p, r_.s.pp, m, r_.s.vpp, r_.s.ep_overlap ? 1 : 0);
    for (std::size_t i = 0; i < order.size(); ++i) {
      // ep_overlap: a forward and a backward next to each other (the steady
      // state) run as one.
      if (r_.s.ep_overlap && s.ep_group >= 0 && i + 1 < order.size() && order[i].backward != order[i + 1].backward) {
        PassCursor first = pass(order[i]), second = pass(order[i + 1]);
        if (first.backward) std::swap(first, second);
        run_merged(s, std::move(first), std::move(second));
        ++i;
        continue;
      }
      PassCursor one = pass(order[i]);
      advance(s, one, false);
    }
    optimizer(s, params);
  }

  core::Bytes runtime_allowance_;
  bool full_;
  bool spmd_ranks_;
  const model::Graph& graph_;
  const ResolvedStrategy& r_;
  RankLayout layout_;
  std::optional<ExpertGrid> experts_;  ///< with an expert grid only
  int virtual_stages_;
  std::vector<std::vector<int>> chunks_;
  TaskGraph tg_;
  LayerSteps steps_;
  std::vector<Coord> ranks_;
  std::vector<Bytes> saved_bytes_;                ///< per layer (a strategy search asked 2% of its time)
  std::vector<std::array<Bytes, 2>> grad_bytes_;  ///< per layer: dense weights, experts
  std::map<std::pair<GroupKind, std::vector<int>>, int> group_ids_;
  struct CallKeyHash {
    std::size_t operator()(const std::tuple<CommOp, int, double>& k) const {
      const auto [op, group, bytes] = k;
      return std::hash<double>{}(bytes) ^ (static_cast<std::size_t>(group) << 8) ^ static_cast<std::size_t>(op);
    }
  };
  std::unordered_map<std::tuple<CommOp, int, double>, int, CallKeyHash> call_ids_;
};

}  // namespace

TaskGraph lower(const model::Graph& graph, const ResolvedStrategy& strategy, const topo::Cluster& cluster,
                const LowerOptions& options) {
  return Lowering(graph, strategy, options, cluster.device().runtime_allowance, cluster.gpus_per_node()).run();
}

}  // namespace dtsim::plan
