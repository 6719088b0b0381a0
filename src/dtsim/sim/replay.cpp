#include "dtsim/sim/replay.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include "dtsim/sim/event_queue.hpp"

namespace dtsim::sim {
namespace {

using core::Nanoseconds;
using plan::Task;
using plan::TaskKind;


class Replay {
 public:
  Replay(const plan::TaskGraph& graph, const TaskCosts& costs) : g_(graph), costs_(costs) {
    const std::size_t n = graph.tasks.size();
    timeline_.spans.assign(n, {});
    remaining_.assign(n, 0);
    index_of_rank_.assign(static_cast<std::size_t>(graph.world), -1);
    for (std::size_t i = 0; i < graph.simulated.size(); ++i) index_of_rank_[static_cast<std::size_t>(graph.simulated[i].rank)] = static_cast<int>(i);
    streams_.assign(graph.simulated.size() * plan::kStreamCount, {});
    build_successors();
    for (std::uint32_t id = 0; id < n; ++id) {
      const Task& t = graph.tasks[id];
      remaining_[id] = t.deps_end - t.deps_begin;
      if (ordered(t)) streams_[stream_of(t)].queue.push_back(id);
    }
    members_.assign(graph.groups.size(), 0);
    for (std::size_t gi = 0; gi < graph.groups.size(); ++gi) {
      for (int r : graph.groups[gi].ranks) members_[gi] += index_of_rank_[static_cast<std::size_t>(r)] >= 0 ? 1 : 0;
    }
    const std::size_t ranks = graph.simulated.size();
    in_use_.resize(ranks);
    timeline_.memory.resize(ranks);
    timeline_.peak_memory.resize(ranks);
    for (std::size_t i = 0; i < ranks; ++i) {
      in_use_[i] = graph.simulated[i].memory.total();
      timeline_.peak_memory[i] = in_use_[i];
      timeline_.memory[i].push_back({Nanoseconds{0}, in_use_[i]});
    }
  }

  plan::Timeline run() {
    for (std::size_t s = 0; s < streams_.size(); ++s) poke(s);
    for (std::uint32_t id = 0; id < g_.tasks.size(); ++id) {
      if (!ordered(g_.tasks[id]) && remaining_[id] == 0) release(id);
    }
    while (!queue_.empty()) {
      EventQueue::Event e = queue_.pop();
      now_ = e.time;
      finish(e.payload);
    }
    for (const plan::TaskSpan& span : timeline_.spans) {
      if (span.end.count < 0) throw std::logic_error("replay deadlocked: a task never ran (inconsistent TaskGraph)");
      timeline_.makespan = std::max(timeline_.makespan, span.end);
    }
    timeline_.events = queue_.scheduled();
    return std::move(timeline_);
  }

 private:
  struct StreamState {
    std::vector<std::uint32_t> queue;
    std::size_t head = 0;
    bool busy = false;
  };
  struct Server {
    std::vector<std::uint32_t> waiting;  // in arrival order
    std::size_t next = 0;
    bool busy = false;
  };
  struct Rendezvous {
    int arrived = 0;
    std::vector<std::uint32_t> tasks;
  };

  static bool ordered(const Task& t) {
    return t.stream != plan::Stream::kPointToPoint && t.stream != plan::Stream::kServer;
  }

  // A task free of its dependencies that no rank stream orders.
  void release(std::uint32_t id) {
    if (g_.tasks[id].stream != plan::Stream::kServer) {
      begin(id);
      return;
    }
    Server& server = servers_[server_of(id)];
    server.waiting.push_back(id);
    serve(server);
  }

  int server_of(std::uint32_t id) const {
    return g_.groups[static_cast<std::size_t>(g_.calls[static_cast<std::size_t>(g_.tasks[id].payload)].group)].ranks.back();
  }

  void serve(Server& server) {
    if (server.busy || server.next >= server.waiting.size()) return;
    server.busy = true;
    std::uint32_t id = server.waiting[server.next++];
    start(id, costs_.call[static_cast<std::size_t>(g_.tasks[id].payload)]);
  }

  std::size_t stream_of(const Task& t) const {
    // Without concurrent streams (a CPU rank's one thread), kernels and
    // collectives queue on one stream in program order.
    const plan::Stream stream = costs_.concurrent_streams ? t.stream : plan::Stream::kCompute;
    return static_cast<std::size_t>(index_of_rank_[static_cast<std::size_t>(t.rank)]) * plan::kStreamCount +
           static_cast<std::size_t>(stream);
  }

  void build_successors() {
    const std::size_t n = g_.tasks.size();
    succ_begin_.assign(n + 1, 0);
    for (std::uint32_t dep : g_.deps) ++succ_begin_[dep + 1];
    for (std::size_t i = 0; i < n; ++i) succ_begin_[i + 1] += succ_begin_[i];
    succ_.resize(g_.deps.size());
    std::vector<std::uint32_t> fill(succ_begin_.begin(), succ_begin_.end() - 1);
    for (std::uint32_t id = 0; id < n; ++id) {
      const Task& t = g_.tasks[id];
      for (std::uint32_t k = t.deps_begin; k < t.deps_end; ++k) succ_[fill[g_.deps[k]]++] = id;
    }
  }

  void poke(std::size_t s) {
    StreamState& st = streams_[s];
    if (st.busy || st.head >= st.queue.size()) return;
    std::uint32_t id = st.queue[st.head];
    if (remaining_[id] != 0) return;
    st.busy = true;
    begin(id);
  }

  void begin(std::uint32_t id) {
    const Task& t = g_.tasks[id];
    if (t.kind == TaskKind::kCompute) {
      Nanoseconds d = costs_.kernel[static_cast<std::size_t>(t.payload)];
      if (!costs_.rank_speed.empty()) {
        d = {static_cast<std::int64_t>(std::llround(static_cast<double>(d.count) /
                                                    costs_.rank_speed[static_cast<std::size_t>(t.rank)]))};
      }
      start(id, d);
      return;
    }
    const int group = g_.calls[static_cast<std::size_t>(t.payload)].group;
    const std::uint64_t key = (static_cast<std::uint64_t>(group) << 40) ^ static_cast<std::uint64_t>(t.tag);
    Rendezvous& rv = rendezvous_[key];
    rv.tasks.push_back(id);
    if (++rv.arrived < members_[static_cast<std::size_t>(group)]) return;
    for (std::uint32_t member : rv.tasks) start(member, costs_.call[static_cast<std::size_t>(g_.tasks[member].payload)]);
    rendezvous_.erase(key);
  }

  void start(std::uint32_t id, Nanoseconds duration) {
    const Task& t = g_.tasks[id];
    timeline_.spans[id].start = now_;
    if (t.alloc_at_start.value() > 0) change_memory(t, t.alloc_at_start);
    queue_.schedule(now_ + duration, id);
  }

  void finish(std::uint32_t id) {
    const Task& t = g_.tasks[id];
    timeline_.spans[id].end = now_;
    if (t.free_at_end.value() > 0) change_memory(t, core::Bytes(0) - t.free_at_end);
    for (std::uint32_t k = succ_begin_[id]; k < succ_begin_[id + 1]; ++k) {
      std::uint32_t next = succ_[k];
      if (--remaining_[next] != 0) continue;
      const Task& n = g_.tasks[next];
      if (!ordered(n)) release(next);
      else poke(stream_of(n));
    }
    if (t.stream == plan::Stream::kServer) {
      Server& server = servers_[server_of(id)];
      server.busy = false;
      serve(server);
    }
    if (ordered(t)) {
      StreamState& st = streams_[stream_of(t)];
      st.busy = false;
      ++st.head;
      poke(stream_of(t));
    }
  }

  void change_memory(const Task& t, core::Bytes delta) {
    const auto i = static_cast<std::size_t>(index_of_rank_[static_cast<std::size_t>(t.rank)]);
    in_use_[i] += delta;
    timeline_.peak_memory[i] = std::max(timeline_.peak_memory[i], in_use_[i]);
    timeline_.memory[i].push_back({now_, in_use_[i]});
  }

  const plan::TaskGraph& g_;
  const TaskCosts& costs_;
  plan::Timeline timeline_;
  EventQueue queue_;
  Nanoseconds now_{0};
  std::vector<std::uint32_t> remaining_;
  std::vector<std::uint32_t> succ_begin_;
  std::vector<std::uint32_t> succ_;
  std::vector<int> index_of_rank_;
  std::vector<StreamState> streams_;
  std::vector<int> members_;
  std::unordered_map<std::uint64_t, Rendezvous> rendezvous_;
  std::unordered_map<int, Server> servers_;
  std::vector<core::Bytes> in_use_;
};

}  // namespace

net::CollectiveOp to_net(plan::CommOp op) {
  switch (op) {
    case plan::CommOp::kAllReduce: return net::CollectiveOp::kAllReduce;
    case plan::CommOp::kReduceScatter: return net::CollectiveOp::kReduceScatter;
    case plan::CommOp::kAllGather: return net::CollectiveOp::kAllGather;
    case plan::CommOp::kSendRecv: return net::CollectiveOp::kSendRecv;
    case plan::CommOp::kRingExchange: return net::CollectiveOp::kRingExchange;
    case plan::CommOp::kAllToAll: return net::CollectiveOp::kAllToAll;
  }
  return net::CollectiveOp::kAllReduce;
}

TaskCosts cost_tasks(const plan::TaskGraph& graph, const hw::CostModel& cost_model, const net::Network& network) {
  TaskCosts costs;
  costs.concurrent_streams = cost_model.device().concurrent_streams;
  costs.kernel.reserve(graph.kernels.size());
  for (const plan::Kernel& k : graph.kernels) {
    core::Seconds total;
    std::array<double, model::kOpKindCount> by_kind{};
    for (const hw::OpWork& w : k.ops) {
      const core::Seconds t = cost_model.time(w, graph.dtype);
      total += t;
      by_kind[static_cast<std::size_t>(w.kind)] += t.value();
    }
    if (total.value() > 0) {
      for (double& share : by_kind) share /= total.value();
    }
    costs.kernel.push_back(core::to_nanoseconds(total));
    costs.kernel_op_share.push_back(by_kind);
  }
  costs.call.reserve(graph.calls.size());
  for (const plan::CommCall& c : graph.calls) {
    std::vector<int> gpus;
    for (int r : graph.groups[static_cast<std::size_t>(c.group)].ranks) gpus.push_back(graph.gpu_of_rank[static_cast<std::size_t>(r)]);
    costs.call.push_back(core::to_nanoseconds(network.cost(to_net(c.op), gpus, c.bytes).time));
  }
  return costs;
}

plan::Timeline replay(const plan::TaskGraph& graph, const TaskCosts& costs) { return Replay(graph, costs).run(); }

}  // namespace dtsim::sim
