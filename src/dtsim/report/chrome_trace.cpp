#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "dtsim/report/writers.hpp"

namespace dtsim::report {
namespace {

/// Chrome's format counts in microseconds and dtsim in whole nanoseconds.
/// n / 1000 as a double prints (shortest round trip) with at most three
/// decimals, and a reader that rounds microseconds x 1000 to the nanosecond,
/// as Perfetto does, gets n back: a kernel that ends where the next begins
/// still ends there, instead of overlapping it by a rounding error.
double microseconds(core::Nanoseconds t) { return static_cast<double>(t.count) / 1e3; }

/// Chrome DevTools adds ts and dur as doubles: 3392.559 + 1121.453 comes out
/// a hair past 4514.012, where the next kernel starts, and DevTools then
/// leaves that kernel out. The duration is taken down by units in the last
/// place (far below a nanosecond, so Perfetto's rounding still gives the
/// exact count) until ts + dur lands on the slice's end.
double duration_microseconds(const plan::TaskSpan& span) {
  const double start = microseconds(span.start);
  const double end = microseconds(span.end);
  double duration = end - start;
  while (duration > 0.0 && start + duration > end) duration = std::nextafter(duration, 0.0);
  return duration;
}

std::string task_name(const plan::TaskGraph& g, const plan::Task& t) {
  if (t.kind == plan::TaskKind::kCompute) return g.kernels[static_cast<std::size_t>(t.payload)].name;
  const plan::CommCall& c = g.calls[static_cast<std::size_t>(t.payload)];
  return fmt::format("{} {} {:.2f} MiB", to_string(g.groups[static_cast<std::size_t>(c.group)].kind), to_string(c.op),
                     c.bytes.value() / 1048576.0);
}

std::string_view category(const plan::Task& t) { return t.kind == plan::TaskKind::kCompute ? "compute" : "comm"; }

/// Viewers draw a thread as one stack of slices: a slice that starts inside
/// another and ends after it is dropped (Perfetto) or left out of the tree
/// (Chrome DevTools). Pipeline sends and receives of one rank do overlap, so
/// each stream of a rank is spread over as few lanes (threads) as keep every
/// lane free of overlap: lane 0 is the stream itself, lane k its (k+1)-th track.
struct Lanes {
  std::vector<int> of_task;                      ///< lane index by task id, -1 for tasks never run
  std::map<std::pair<int, int>, int> per_stream;  ///< (rank, stream) -> lanes used
};

bool ran(const plan::TaskSpan& s) { return s.start.count >= 0 && s.end.count >= s.start.count; }

Lanes assign_lanes(const plan::TaskGraph& g, const plan::Timeline& tl) {
  std::map<std::pair<int, int>, std::vector<std::size_t>> by_stream;
  for (std::size_t id = 0; id < g.tasks.size(); ++id) {
    if (!ran(tl.spans[id])) continue;
    by_stream[{g.tasks[id].rank, static_cast<int>(g.tasks[id].stream)}].push_back(id);
  }
  Lanes lanes{std::vector<int>(g.tasks.size(), -1), {}};
  for (auto& [key, ids] : by_stream) {
    std::stable_sort(ids.begin(), ids.end(), [&](std::size_t a, std::size_t b) {
      return tl.spans[a].start.count < tl.spans[b].start.count;
    });
    std::vector<std::int64_t> lane_free_at;  // end of each lane's last slice, ns
    for (std::size_t id : ids) {
      const plan::TaskSpan& s = tl.spans[id];
      auto free = std::find_if(lane_free_at.begin(), lane_free_at.end(),
                               [&](std::int64_t end) { return end <= s.start.count; });
      if (free == lane_free_at.end()) free = lane_free_at.insert(lane_free_at.end(), 0);
      *free = s.end.count;
      lanes.of_task[id] = static_cast<int>(free - lane_free_at.begin());
    }
    lanes.per_stream[key] = static_cast<int>(lane_free_at.size());
  }
  return lanes;
}

int thread_id(plan::Stream stream, int lane) { return static_cast<int>(stream) + plan::kStreamCount * lane; }

/// One arrow per pipeline transfer, from the sender's slice to the
/// receiver's. Both ends sit at their slice's start with the slice's
/// category: Perfetto binds a flow to the slice that encloses it, Chrome
/// DevTools to the slice with the same start, thread and category.
void add_pipeline_flows(const plan::TaskGraph& g, const plan::Timeline& tl, const Lanes& lanes,
                        nlohmann::json& events) {
  std::map<std::pair<int, std::int64_t>, std::pair<std::int64_t, std::int64_t>> ends;  // (group, tag) -> (send, recv)
  for (std::size_t id = 0; id < g.tasks.size(); ++id) {
    const plan::Task& t = g.tasks[id];
    if (t.kind != plan::TaskKind::kComm || lanes.of_task[id] < 0) continue;
    const plan::CommCall& call = g.calls[static_cast<std::size_t>(t.payload)];
    if (call.op != plan::CommOp::kSendRecv) continue;
    const plan::CommGroup& group = g.groups[static_cast<std::size_t>(call.group)];
    if (group.ranks.size() != 2) continue;
    auto& pair = ends.try_emplace({call.group, t.tag}, -1, -1).first->second;
    (t.rank == group.ranks[static_cast<std::size_t>(plan::sender_index(t))] ? pair.first : pair.second) =
        static_cast<std::int64_t>(id);
  }
  std::int64_t flow_id = 0;
  for (const auto& [key, pair] : ends) {
    if (pair.first < 0 || pair.second < 0) continue;  // the other end is on a rank not simulated
    ++flow_id;
    for (const auto& [id, phase] : {std::pair{pair.first, "s"}, std::pair{pair.second, "f"}}) {
      const plan::Task& t = g.tasks[static_cast<std::size_t>(id)];
      nlohmann::json e = {{"ph", phase},
                          {"name", "pipeline transfer"},
                          {"cat", category(t)},
                          {"id", flow_id},
                          {"pid", t.rank},
                          {"tid", thread_id(t.stream, lanes.of_task[static_cast<std::size_t>(id)])},
                          {"ts", microseconds(tl.spans[static_cast<std::size_t>(id)].start)}};
      if (phase == std::string_view("f")) e["bp"] = "e";
      events.push_back(std::move(e));
    }
  }
}

}  // namespace

nlohmann::json chrome_trace(const plan::TaskGraph& g, const plan::Timeline& tl) {
  const Lanes lanes = assign_lanes(g, tl);
  nlohmann::json events = nlohmann::json::array();
  for (std::size_t i = 0; i < g.simulated.size(); ++i) {
    const plan::RankInfo& rank = g.simulated[i];
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank.rank},
                      {"args", {{"name", fmt::format("rank {} (stage {})", rank.rank, rank.stage)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank.rank}, {"args", {{"sort_index", rank.rank}}}});
    for (int s = 0; s < plan::kStreamCount; ++s) {
      auto used = lanes.per_stream.find({rank.rank, s});
      if (used == lanes.per_stream.end()) continue;  // a stream this rank never used gets no track
      const auto stream = static_cast<plan::Stream>(s);
      for (int lane = 0; lane < used->second; ++lane) {
        const std::string name = lane == 0 ? std::string(to_string(stream)) : fmt::format("{} #{}", to_string(stream), lane + 1);
        events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank.rank}, {"tid", thread_id(stream, lane)},
                          {"args", {{"name", name}}}});
        events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", rank.rank}, {"tid", thread_id(stream, lane)},
                          {"args", {{"sort_index", s * 1000 + lane}}}});
      }
    }
    for (const plan::MemorySample& m : tl.memory[i]) {
      events.push_back({{"ph", "C"}, {"name", "memory"}, {"pid", rank.rank}, {"ts", microseconds(m.time)},
                        {"args", {{"GiB", m.in_use.value() / 1073741824.0}}}});
    }
  }
  for (std::size_t id = 0; id < g.tasks.size(); ++id) {
    if (lanes.of_task[id] < 0) continue;
    const plan::Task& t = g.tasks[id];
    const plan::TaskSpan& span = tl.spans[id];
    events.push_back({{"ph", "X"},
                      {"name", task_name(g, t)},
                      {"cat", category(t)},
                      {"pid", t.rank},
                      {"tid", thread_id(t.stream, lanes.of_task[id])},
                      {"ts", microseconds(span.start)},
                      {"dur", duration_microseconds(span)},
                      {"args", {{"micro_batch", t.micro_batch}, {"layer", t.layer}}}});
  }
  add_pipeline_flows(g, tl, lanes, events);
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace dtsim::report
