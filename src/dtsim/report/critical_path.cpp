#include "dtsim/report/critical_path.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

namespace dtsim::report {
std::string task_kind(const plan::TaskGraph& g, const plan::Task& t) {
  if (t.kind == plan::TaskKind::kComm) {
    const auto& call = g.calls[static_cast<std::size_t>(t.payload)];
    return "comm: " + std::string(to_string(g.groups[static_cast<std::size_t>(call.group)].kind));
  }
  if (t.phase == plan::Phase::kOptimizer) return "optimizer";
  const auto& ops = g.kernels[static_cast<std::size_t>(t.payload)].ops;
  const bool matmul = std::any_of(ops.begin(), ops.end(), [](const hw::OpWork& w) {
    return w.kind == model::OpKind::kGemm || w.kind == model::OpKind::kAttention;
  });
  return matmul ? std::string(kMatmulKind) : "compute (memory-bound)";
}

CriticalPath critical_path(const plan::TaskGraph& g, const plan::Timeline& tl,
                           std::span<const std::array<double, model::kOpKindCount>> kernel_op_share) {
  const std::size_t n = g.tasks.size();
  CriticalPath path;
  if (n == 0) return path;
  // The task before each one on its (ordered) stream, and the members of each collective.
  std::vector<std::int64_t> stream_before(n, -1);
  std::map<std::pair<int, int>, std::int64_t> last_on_stream;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> members;
  for (std::uint32_t id = 0; id < n; ++id) {
    const plan::Task& t = g.tasks[id];
    if (t.stream != plan::Stream::kPointToPoint && t.stream != plan::Stream::kServer) {
      auto key = std::pair{t.rank, static_cast<int>(t.stream)};
      auto it = last_on_stream.find(key);
      if (it != last_on_stream.end()) stream_before[id] = it->second;
      last_on_stream[key] = id;
    }
    if (t.kind == plan::TaskKind::kComm) {
      const int group = g.calls[static_cast<std::size_t>(t.payload)].group;
      members[(static_cast<std::uint64_t>(group) << 40) ^ static_cast<std::uint64_t>(t.tag)].push_back(id);
    }
  }
  std::map<std::string, std::int64_t> time_of;
  std::uint32_t current = 0;
  for (std::uint32_t id = 1; id < n; ++id) {
    if (tl.spans[id].end > tl.spans[current].end) current = id;
  }
  while (true) {
    const plan::Task& t = g.tasks[current];
    const auto& span = tl.spans[current];
    const std::int64_t ran = (span.end - span.start).count;
    const auto kernel = static_cast<std::size_t>(t.payload);
    if (t.kind == plan::TaskKind::kCompute && t.phase != plan::Phase::kOptimizer && kernel < kernel_op_share.size()) {
      // Whole nanoseconds per kind; the last kind takes the rounding, so the path still sums to the step.
      std::int64_t given = 0;
      std::string last;
      for (std::size_t k = 0; k < model::kOpKindCount; ++k) {
        const double share = kernel_op_share[kernel][k];
        if (share <= 0) continue;
        last = "compute: " + std::string(model::to_string(static_cast<model::OpKind>(k)));
        const auto part = static_cast<std::int64_t>(std::llround(share * static_cast<double>(ran)));
        time_of[last] += part;
        given += part;
      }
      if (last.empty()) last = task_kind(g, t);
      time_of[last] += ran - given;
    } else {
      time_of[task_kind(g, t)] += ran;
    }
    ++path.tasks;
    // Whichever predecessor ended last released this task.
    std::vector<std::uint32_t> sources{current};
    if (t.kind == plan::TaskKind::kComm) {
      const int group = g.calls[static_cast<std::size_t>(t.payload)].group;
      sources = members[(static_cast<std::uint64_t>(group) << 40) ^ static_cast<std::uint64_t>(t.tag)];
    }
    std::int64_t best = -1;
    for (std::uint32_t s : sources) {
      const plan::Task& st = g.tasks[s];
      auto consider = [&](std::int64_t p) {
        if (p >= 0 && tl.spans[static_cast<std::size_t>(p)].end <= span.start &&
            (best < 0 || tl.spans[static_cast<std::size_t>(p)].end > tl.spans[static_cast<std::size_t>(best)].end)) {
          best = p;
        }
      };
      for (std::uint32_t k = st.deps_begin; k < st.deps_end; ++k) consider(g.deps[k]);
      consider(stream_before[s]);
    }
    const std::int64_t released = best >= 0 ? tl.spans[static_cast<std::size_t>(best)].end.count : 0;
    time_of["waiting"] += span.start.count - released;
    if (best < 0) break;
    current = static_cast<std::uint32_t>(best);
  }
  for (const auto& [kind, ns] : time_of) {
    if (ns > 0) path.shares.push_back({kind, core::to_seconds({ns})});
  }
  std::stable_sort(path.shares.begin(), path.shares.end(), [](const PathShare& a, const PathShare& b) { return a.time > b.time; });
  return path;
}

}  // namespace dtsim::report
