#include "dtsim/sim/replay.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "dtsim/hw/kernel_model.hpp"
#include "dtsim/sim/event_queue.hpp"
#include "dtsim/sim/flow_transfers.hpp"
#include "dtsim/sim/host_clock.hpp"

namespace dtsim::sim {
namespace {

using core::Nanoseconds;
using plan::Task;
using plan::TaskKind;

// Event payloads with this bit set belong to a transfer (flow-level mode), not a task.
constexpr std::uint32_t kTransferEvent = FlowTransfers::kEventBit;
// Event payloads with this bit set wake a stream whose next kernel the host has now launched.
constexpr std::uint32_t kWakeEvent = 1u << 30;
// Event payloads with this bit set start a collective that waited for a persistent GEMM's SMs.
constexpr std::uint32_t kDeferredStartEvent = 1u << 29;

bool reverse_direction(const Task& t) { return t.phase == plan::Phase::kBackward || t.phase == plan::Phase::kPull; }

// kCopied: the graph has spmd ranks (a template, so that the replay of the
// simulated ranks alone, a strategy search's inner loop, pays nothing for them).
template <bool kCopied>
class Replay {
 public:
  Replay(const plan::TaskGraph& graph, const TaskCosts& costs)
      : g_(graph), costs_(costs), flow_(!costs.call_plan.empty()), flows_(costs.link_capacity, queue_) {
    const std::size_t n = graph.tasks.size(), sims = graph.simulated.size();
    timeline_.spans.assign(n, {});
    std::vector<int> sim_of_rank(static_cast<std::size_t>(graph.world), -1);
    for (std::size_t i = 0; i < sims; ++i) sim_of_rank[static_cast<std::size_t>(graph.simulated[i].rank)] = static_cast<int>(i);
    build_instances(sim_of_rank);
    index_of_rank_.assign(static_cast<std::size_t>(graph.world), -1);
    for (std::size_t i = 0; i < instances_.size(); ++i) index_of_rank_[static_cast<std::size_t>(instances_[i].rank)] = static_cast<int>(i);
    // Each simulated rank's streams in program order; its copies walk the same lists.
    template_queues_.assign(sims * plan::kStreamCount, {});
    for (std::uint32_t id = 0; id < n; ++id) {
      const Task& t = graph.tasks[id];
      if (!ordered(t)) continue;
      template_queues_[static_cast<std::size_t>(sim_of_rank[static_cast<std::size_t>(t.rank)]) * plan::kStreamCount +
                       stream_index(t)].push_back(id);
    }
    streams_.assign(instances_.size() * plan::kStreamCount, {});
    for (std::size_t i = 0; i < streams_.size(); ++i) {
      streams_[i].queue = &template_queues_[instances_[i / plan::kStreamCount].simulated * plan::kStreamCount + i % plan::kStreamCount];
    }
    build_successors();
    // A GPU's kernels wait for the host that launches them; a CPU rank (one
    // stream, its own thread) is its own host.
    if (costs.host_launch.count > 0 && costs.concurrent_streams) {
      std::vector<std::uint32_t> sim_of_instance(instances_.size());
      for (std::size_t i = 0; i < instances_.size(); ++i) sim_of_instance[i] = instances_[i].simulated;
      host_.emplace(graph, costs.host_launch, costs.kernel_launches, sim_of_rank, sim_of_instance);
      host_wait_.assign(sims, Nanoseconds{0});
      host_stretch_.assign(sims, Nanoseconds{0});
    }
    remaining_.assign(total_, 0);
    for (std::uint32_t id = 0; id < total_; ++id) {
      const Task& t = graph.tasks[template_id(id)];
      remaining_[id] = t.deps_end - t.deps_begin;
    }
    members_.assign(graph.groups.size(), 0);
    for (std::size_t gi = 0; gi < graph.groups.size(); ++gi) {
      for (int r : graph.groups[gi].ranks) members_[gi] += index_of_rank_[static_cast<std::size_t>(r)] >= 0 ? 1 : 0;
    }
    const std::size_t ranks = instances_.size();
    contended_ = costs.contention.sms > 0;
    if (contended_) {
      timeline_.contention_delay.assign(sims, Nanoseconds{0});
      running_.resize(ranks);
      busy_sms_.assign(ranks, BusySms{});
      busy_hbm_.assign(ranks, 0.0);
    }
    in_use_.resize(ranks);
    peak_.resize(ranks);
    for (std::size_t i = 0; i < ranks; ++i) peak_[i] = in_use_[i] = graph.simulated[instances_[i].simulated].memory.total();
    timeline_.memory.resize(sims);
    for (std::size_t i = 0; i < sims; ++i) timeline_.memory[i].push_back({Nanoseconds{0}, graph.simulated[i].memory.total()});
  }

  plan::Timeline run() {
    for (std::size_t s = 0; s < streams_.size(); ++s) poke(s);
    for (std::uint32_t id = 0; id < total_; ++id) {
      if (!ordered(g_.tasks[template_id(id)]) && remaining_[id] == 0) release(id);
    }
    while (!queue_.empty()) {
      EventQueue::Event e = queue_.pop();
      now_ = e.time;
      if (e.payload & kTransferEvent) {
        flows_.on_event(e.payload & ~kTransferEvent, e.sequence, now_);
      } else if (e.payload & kWakeEvent) {
        streams_[e.payload & ~kWakeEvent].busy = false;
        poke(e.payload & ~kWakeEvent);
      } else if (e.payload & kDeferredStartEvent) {
        start_communication_now(std::move(deferred_[e.payload & ~kDeferredStartEvent]));
      } else if (!contended_ || g_.tasks[template_id(e.payload)].kind != TaskKind::kCompute ||
                 end_running(e.payload, e.sequence)) {
        finish(e.payload);
      }
    }
    if (finished_ != total_) throw std::logic_error("replay deadlocked: a task never ran (inconsistent TaskGraph)");
    timeline_.makespan = last_end_;
    if (!host_wait_.empty()) {
      timeline_.host_wait = std::move(host_wait_);
      timeline_.host_stretch = std::move(host_stretch_);
    }
    // A stage's peak is its fullest rank's.
    timeline_.peak_memory.assign(g_.simulated.size(), core::Bytes(0));
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      core::Bytes& peak = timeline_.peak_memory[instances_[i].simulated];
      peak = std::max(peak, peak_[i]);
    }
    timeline_.events = queue_.scheduled();
    return std::move(timeline_);
  }

 private:
  struct StreamState {
    const std::vector<std::uint32_t>* queue = nullptr;  ///< template task ids in program order
    std::size_t head = 0;
    bool busy = false;
  };
  // A rank the replay runs: a simulated rank, or (TaskGraph::spmd_ranks)
  // a rank running a simulated rank's tasks on its own groups.
  struct Instance {
    int rank = 0;
    std::uint32_t simulated = 0;  ///< whose tasks it runs
    std::uint32_t base = 0;       ///< its first task's id in this replay
    std::uint32_t first = 0;      ///< that task in TaskGraph::tasks
    const std::uint32_t* calls = nullptr;  ///< per call of the graph, the one it makes (nullptr: the same)
    bool representative = true;   ///< the simulated rank itself: its spans and memory are the timeline's
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

  // Without spmd ranks, ids are TaskGraph::tasks' and each simulated rank is
  // an instance. With them, each instance's tasks are its simulated rank's,
  // numbered from its base.
  void build_instances(const std::vector<int>& sim_of_rank) {
    const std::size_t sims = g_.simulated.size();
    if constexpr (!kCopied) {
      for (std::size_t s = 0; s < sims; ++s) instances_.push_back({g_.simulated[s].rank, static_cast<std::uint32_t>(s), 0, 0, nullptr, true});
      total_ = static_cast<std::uint32_t>(g_.tasks.size());
      return;
    }
    std::vector<std::uint32_t> first(sims, 0), count(sims, 0);
    for (std::uint32_t id = 0; id < g_.tasks.size(); ++id) {
      const auto s = static_cast<std::size_t>(sim_of_rank[static_cast<std::size_t>(g_.tasks[id].rank)]);
      if (count[s] == 0) first[s] = id;
      if (id != first[s] + count[s]++) throw std::logic_error("spmd ranks need each simulated rank's tasks in one run");
    }
    // A copy renumbers its tasks from its base: a dependency must stay on its rank.
    for (std::uint32_t id = 0; id < g_.tasks.size(); ++id) {
      const Task& t = g_.tasks[id];
      const auto s = static_cast<std::size_t>(sim_of_rank[static_cast<std::size_t>(t.rank)]);
      for (std::uint32_t k = t.deps_begin; k < t.deps_end; ++k) {
        if (g_.deps[k] < first[s] || g_.deps[k] >= first[s] + count[s]) {
          throw std::logic_error("spmd ranks need each task's dependencies on its own rank");
        }
      }
    }
    std::uint64_t base = 0;
    for (std::size_t k = 0; k < g_.spmd_ranks.size(); ++k) {
      const plan::SpmdRank& r = g_.spmd_ranks[k];
      const auto s = static_cast<std::size_t>(r.simulated);
      instances_.push_back({r.rank, static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(base), first[s], g_.spmd_calls_of(k),
                            r.rank == g_.simulated[s].rank});
      base += count[s];
      if (base >= kDeferredStartEvent) throw std::length_error("dtsim: more than 2^29 tasks to replay");
    }
    total_ = static_cast<std::uint32_t>(base);
    instance_of_.resize(total_);
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      const std::uint32_t begin = instances_[i].base, end = begin + count[instances_[i].simulated];
      std::fill(instance_of_.begin() + begin, instance_of_.begin() + end, static_cast<std::uint32_t>(i));
    }
  }

  std::size_t instance_index(std::uint32_t id) const {
    if constexpr (kCopied) return instance_of_[id];
    else return static_cast<std::size_t>(index_of_rank_[static_cast<std::size_t>(g_.tasks[id].rank)]);
  }
  std::uint32_t template_id(std::uint32_t id) const {
    if constexpr (kCopied) {
      const Instance& in = instances_[instance_of_[id]];
      return in.first + (id - in.base);
    } else {
      return id;
    }
  }
  std::uint32_t id_of(const Instance& in, std::uint32_t template_task) const {
    if constexpr (kCopied) return in.base + (template_task - in.first);
    else return template_task;
  }
  // The task as its instance runs it: its rank, and its call on its own
  // group (a copy); the graph's own task without spmd ranks (a reference).
  decltype(auto) task(std::uint32_t id) const {
    if constexpr (kCopied) {
      const Instance& in = instances_[instance_of_[id]];
      Task t = g_.tasks[in.first + (id - in.base)];
      t.rank = in.rank;
      if (t.kind == TaskKind::kComm) t.payload = static_cast<int>(in.calls[static_cast<std::size_t>(t.payload)]);
      return t;
    } else {
      return (g_.tasks[id]);
    }
  }

  static bool ordered(const Task& t) {
    return t.stream != plan::Stream::kPointToPoint && t.stream != plan::Stream::kServer;
  }

  // A task free of its dependencies that no rank stream orders.
  void release(std::uint32_t id) {
    if (g_.tasks[template_id(id)].stream != plan::Stream::kServer) {
      begin(id);
      return;
    }
    Server& server = servers_[server_of(id)];
    server.waiting.push_back(id);
    serve(server);
  }

  int server_of(std::uint32_t id) const {
    return g_.groups[static_cast<std::size_t>(g_.calls[static_cast<std::size_t>(task(id).payload)].group)].ranks.back();
  }

  void serve(Server& server) {
    if (server.busy || server.next >= server.waiting.size()) return;
    server.busy = true;
    std::uint32_t id = server.waiting[server.next++];
    start_communication({id});
  }

  std::size_t stream_index(const Task& t) const {
    // Without concurrent streams (a CPU rank's one thread), kernels and
    // collectives queue on one stream in program order.
    return static_cast<std::size_t>(costs_.concurrent_streams ? t.stream : plan::Stream::kCompute);
  }
  std::size_t stream_of(const Task& t) const {
    return static_cast<std::size_t>(index_of_rank_[static_cast<std::size_t>(t.rank)]) * plan::kStreamCount + stream_index(t);
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
    if (st.busy || st.head >= st.queue->size()) return;
    const Instance& in = instances_[s / plan::kStreamCount];
    const std::uint32_t id = id_of(in, (*st.queue)[st.head]);
    if (remaining_[id] != 0) return;
    st.busy = true;
    if (host_) {
      // The host has not launched it yet: the stream waits for it. The step
      // starts as its first kernel is launched; a task after a sync the host
      // still waits for is launched once the sync ends (finish() pokes).
      const std::optional<Nanoseconds> when = host_->launched(s / plan::kStreamCount, (*st.queue)[st.head]);
      if (!when) {
        st.busy = false;
        return;
      }
      const Nanoseconds launched = *when;
      if (launched > now_) {
        if (in.representative && s % plan::kStreamCount == static_cast<std::size_t>(plan::Stream::kCompute)) {
          host_wait_[in.simulated].count += (launched - now_).count;
        }
        queue_.schedule(launched, kWakeEvent | static_cast<std::uint32_t>(s));
        return;
      }
    }
    begin(id);
  }

  void begin(std::uint32_t id) {
    const auto& t = task(id);
    if (t.kind == TaskKind::kCompute) {
      Nanoseconds d = costs_.kernel[static_cast<std::size_t>(t.payload)];
      if (!costs_.rank_speed.empty()) {
        d = {static_cast<std::int64_t>(std::llround(static_cast<double>(d.count) /
                                                    costs_.rank_speed[static_cast<std::size_t>(t.rank)]))};
      }
      if (host_) {
        // Its last kernel cannot end before the host has launched it (the
        // host may be far ahead already: then nothing changes).
        const std::uint32_t launches = costs_.kernel_launches[static_cast<std::size_t>(t.payload)];
        const Nanoseconds last_launched =
            *host_->launched(instance_index(id), template_id(id), launches > 0 ? launches - 1 : 0);
        if (now_ + d < last_launched) {
          const Instance& in = instances_[instance_index(id)];
          if (in.representative) host_stretch_[in.simulated].count += (last_launched - now_ - d).count;
          d = last_launched - now_;
        }
      }
      if (contended_) {
        start_running(id, d);
        return;
      }
      start(id, d);
      return;
    }
    const int group = g_.calls[static_cast<std::size_t>(t.payload)].group;
    // One simulated member (the default mode's usual case): nobody to wait for.
    if (members_[static_cast<std::size_t>(group)] == 1) {
      if (!flow_ && sm_wait(id).count == 0) {
        start(id, costs_.call[static_cast<std::size_t>(t.payload)]);  // as start_communication, without its vector
      } else {
        start_communication({id});
      }
      return;
    }
    const std::uint64_t key = (static_cast<std::uint64_t>(group) << 40) ^ static_cast<std::uint64_t>(t.tag);
    Rendezvous& rv = rendezvous_[key];
    rv.tasks.push_back(id);
    if (++rv.arrived < members_[static_cast<std::size_t>(group)]) return;
    std::vector<std::uint32_t> members = std::move(rv.tasks);
    rendezvous_.erase(key);
    start_communication(std::move(members));
  }

  void start(std::uint32_t id, Nanoseconds duration) {
    mark_started(id);
    queue_.schedule(now_ + duration, id);
  }

  void mark_started(std::uint32_t id) {
    const auto& t = task(id);
    if (!kCopied || instances_[instance_of_[id]].representative) timeline_.spans[template_id(id)].start = now_;
    if (t.activation_change != Task::kNoActivationChange && g_.alloc_at_start(t).value() > 0) {
      change_memory(t, g_.alloc_at_start(t));
    }
    if (contended_) occupy(t, +1);
  }

  // Contention: a kernel in flight, its work left in nanoseconds at full
  // speed since `since`, at `rate` of that speed.
  struct Running {
    std::uint32_t id = 0;
    double work_ns = 0;
    double rate = 1;
    Nanoseconds full{0};  ///< its duration alone
    Nanoseconds started{0};
    Nanoseconds since{0};
    std::uint64_t event = 0;
  };

  std::size_t rank_index(const Task& t) const {
    return static_cast<std::size_t>(index_of_rank_[static_cast<std::size_t>(t.rank)]);
  }

  double rate_of(const Task& t) const {
    const TaskCosts::Contention& c = costs_.contention;
    const auto& share = costs_.kernel_op_share[static_cast<std::size_t>(t.payload)];
    const KernelShares shares{share[static_cast<std::size_t>(model::OpKind::kGemm)],
                              share[static_cast<std::size_t>(model::OpKind::kAttention)]};
    const std::size_t r = rank_index(t);
    return 1.0 / contention_slowdown(shares, c.sms, busy_sms_[r], c.gemm_beside_held_sms, c.hbm_bytes_per_s, busy_hbm_[r],
                                      c.gemm_beside_traffic);
  }

  void schedule_running(Running& k) {
    const auto left = static_cast<std::int64_t>(std::ceil(std::max(0.0, k.work_ns) / k.rate));
    k.event = queue_.schedule(now_ + Nanoseconds{left}, k.id);
  }

  void start_running(std::uint32_t id, Nanoseconds duration) {
    mark_started(id);
    const auto& t = task(id);
    Running k{id, static_cast<double>(duration.count), rate_of(t), duration, now_, now_, 0};
    schedule_running(k);
    running_[rank_index(t)].push_back(k);
  }

  // Whether the event ends its kernel (false: a re-timing superseded it).
  bool end_running(std::uint32_t id, std::uint64_t sequence) {
    const std::size_t r = instance_index(id);
    std::vector<Running>& on_rank = running_[r];
    auto it = std::find_if(on_rank.begin(), on_rank.end(), [&](const Running& k) { return k.id == id; });
    if (it == on_rank.end() || it->event != sequence) return false;
    const Nanoseconds slowed = (now_ - it->started) - it->full;
    if (slowed.count > 0 && instances_[r].representative) {
      timeline_.contention_delay[instances_[r].simulated].count += slowed.count;
    }
    on_rank.erase(it);
    return true;
  }

  // Communication of `t` starts (+1) or ends (-1) on its rank: the rank's
  // kernels in flight go on at the new rate.
  void occupy(const Task& t, int sign) {
    if (t.kind == TaskKind::kCompute || t.stream == plan::Stream::kServer) return;
    const std::size_t r = rank_index(t);
    const auto call = static_cast<std::size_t>(t.payload);
    int& busy = costs_.contention.call_announced[call] ? busy_sms_[r].announced : busy_sms_[r].unannounced;
    busy += sign * costs_.contention.call_sms[call];
    busy_hbm_[r] = std::max(0.0, busy_hbm_[r] + sign * costs_.contention.call_hbm_bytes_per_s[call]);
    for (Running& k : running_[r]) {
      k.work_ns -= static_cast<double>((now_ - k.since).count) * k.rate;
      k.since = now_;
      k.rate = rate_of(task(k.id));
      schedule_running(k);
    }
  }

  // How long the collective `id` waits for SMs on its rank: on a device whose
  // GEMMs are persistent, a GEMM in flight holds every SM, and an NCCL kernel
  // it was not told of starts as that GEMM ends (measured: a GEMM launched
  // first ran 1.02-1.04x as long beside a kernel that wanted SMs, which waited).
  Nanoseconds sm_wait(std::uint32_t id) const {
    if (!contended_ || costs_.kernel_gemm_spans.empty()) return Nanoseconds{0};
    const auto& t = task(id);
    const auto call = static_cast<std::size_t>(t.payload);
    if (t.stream == plan::Stream::kServer || costs_.contention.call_announced[call] ||
        costs_.contention.call_sms[call] <= 0) {
      return Nanoseconds{0};
    }
    double wait_ns = 0;
    for (const Running& k : running_[rank_index(t)]) {
      const double full = static_cast<double>(k.full.count);
      if (full <= 0) continue;
      const double left = k.work_ns - static_cast<double>((now_ - k.since).count) * k.rate;
      const double done = 1.0 - left / full;
      for (const auto& [begin, end] : costs_.kernel_gemm_spans[static_cast<std::size_t>(task(k.id).payload)]) {
        if (done >= begin && done < end) wait_ns = std::max(wait_ns, (end - done) * full / k.rate);
      }
    }
    return Nanoseconds{static_cast<std::int64_t>(std::ceil(wait_ns))};
  }

  // The members' tasks of one collective (or one server transfer) start as
  // soon as each member's GPU has SMs for it (sm_wait).
  void start_communication(std::vector<std::uint32_t> members) {
    Nanoseconds wait{0};
    for (std::uint32_t member : members) wait = std::max(wait, sm_wait(member));
    if (wait.count == 0) {
      start_communication_now(std::move(members));
      return;
    }
    deferred_.push_back(std::move(members));
    queue_.schedule(now_ + wait, static_cast<std::uint32_t>(deferred_.size() - 1) | kDeferredStartEvent);
  }

  void start_communication_now(std::vector<std::uint32_t> members) {
    const auto& first = task(members.front());
    const auto call = static_cast<std::size_t>(first.payload);
    if (!flow_) {
      for (std::uint32_t member : members) start(member, costs_.call[call]);
      return;
    }
    for (std::uint32_t member : members) mark_started(member);
    const bool reverse = g_.calls[call].op == plan::CommOp::kSendRecv && reverse_direction(first);
    flows_.start(std::move(members), reverse ? costs_.reverse_plan[call] : costs_.call_plan[call], now_);
  }

  void finish(std::uint32_t id) {
    const auto& t = task(id);
    const std::uint32_t tid = template_id(id);
    // Without spmd ranks every rank is its own representative and ids are the graph's.
    const Instance* in = kCopied ? &instances_[instance_of_[id]] : nullptr;
    if (!kCopied || in->representative) timeline_.spans[tid].end = now_;
    ++finished_;
    last_end_ = std::max(last_end_, now_);
    if (contended_) occupy(t, -1);
    if (t.activation_change != Task::kNoActivationChange && g_.free_at_end(t).value() > 0) {
      change_memory(t, core::Bytes(0) - g_.free_at_end(t));
    }
    for (std::uint32_t k = succ_begin_[tid]; k < succ_begin_[tid + 1]; ++k) {
      const std::uint32_t next = kCopied ? id_of(*in, succ_[k]) : succ_[k];
      if (--remaining_[next] != 0) continue;
      const auto& n = task(next);
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
    if (host_ && host_->ended(instance_index(id), tid, now_)) {
      // The host goes on launching: the rank's streams may start again.
      const std::size_t first = instance_index(id) * plan::kStreamCount;
      for (std::size_t s = first; s < first + plan::kStreamCount; ++s) poke(s);
    }
  }

  void change_memory(const Task& t, core::Bytes delta) {
    const auto i = static_cast<std::size_t>(index_of_rank_[static_cast<std::size_t>(t.rank)]);
    in_use_[i] += delta;
    peak_[i] = std::max(peak_[i], in_use_[i]);
    if (instances_[i].representative) timeline_.memory[instances_[i].simulated].push_back({now_, in_use_[i]});
  }

  const plan::TaskGraph& g_;
  const TaskCosts& costs_;
  bool flow_;
  EventQueue queue_;  // before flows_, which schedules on it
  FlowTransfers flows_;
  plan::Timeline timeline_;
  Nanoseconds now_{0};
  std::vector<Instance> instances_;
  std::vector<std::uint32_t> instance_of_;  ///< with spmd ranks: each task id's instance
  std::uint32_t total_ = 0;                 ///< tasks to run
  std::uint32_t finished_ = 0;
  Nanoseconds last_end_{0};
  std::vector<std::vector<std::uint32_t>> template_queues_;  ///< per simulated rank and stream
  std::vector<core::Bytes> peak_;                            ///< per instance
  std::vector<std::uint32_t> remaining_;
  std::vector<std::uint32_t> succ_begin_;
  std::vector<std::uint32_t> succ_;
  std::vector<int> index_of_rank_;
  std::vector<StreamState> streams_;
  std::vector<int> members_;
  std::unordered_map<std::uint64_t, Rendezvous> rendezvous_;
  std::unordered_map<int, Server> servers_;
  std::vector<core::Bytes> in_use_;
  bool contended_ = false;
  std::optional<HostClock> host_;  ///< none: launches cost the GPU nothing
  std::vector<Nanoseconds> host_wait_;          ///< per simulated rank: its compute stream waiting for the host
  std::vector<Nanoseconds> host_stretch_;       ///< per simulated rank: its kernels waiting for their later launches
  std::vector<std::vector<Running>> running_;  ///< per simulated rank
  std::vector<BusySms> busy_sms_;
  std::vector<double> busy_hbm_;
  std::vector<std::vector<std::uint32_t>> deferred_;  ///< collectives waiting for SMs (kDeferredStartEvent)
};

}  // namespace

plan::Timeline replay(const plan::TaskGraph& graph, const TaskCosts& costs) {
  if (graph.spmd_ranks.empty()) return Replay<false>(graph, costs).run();
  return Replay<true>(graph, costs).run();
}

}  // namespace dtsim::sim
