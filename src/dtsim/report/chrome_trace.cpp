#include <fmt/format.h>

#include "dtsim/report/writers.hpp"

namespace dtsim::report {
namespace {

double microseconds(core::Nanoseconds t) { return static_cast<double>(t.count) / 1e3; }

std::string task_name(const plan::TaskGraph& g, const plan::Task& t) {
  if (t.kind == plan::TaskKind::kCompute) return g.kernels[static_cast<std::size_t>(t.payload)].name;
  const plan::CommCall& c = g.calls[static_cast<std::size_t>(t.payload)];
  return fmt::format("{} {} {:.2f} MiB", to_string(g.groups[static_cast<std::size_t>(c.group)].kind), to_string(c.op),
                     c.bytes.value() / 1048576.0);
}

}  // namespace

nlohmann::json chrome_trace(const plan::TaskGraph& g, const plan::Timeline& tl) {
  nlohmann::json events = nlohmann::json::array();
  for (std::size_t i = 0; i < g.simulated.size(); ++i) {
    const plan::RankInfo& rank = g.simulated[i];
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank.rank},
                      {"args", {{"name", fmt::format("rank {} (stage {})", rank.rank, rank.stage)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank.rank}, {"args", {{"sort_index", rank.rank}}}});
    for (int s = 0; s < plan::kStreamCount; ++s) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank.rank}, {"tid", s},
                        {"args", {{"name", std::string(to_string(static_cast<plan::Stream>(s)))}}}});
    }
    for (const plan::MemorySample& m : tl.memory[i]) {
      events.push_back({{"ph", "C"}, {"name", "memory"}, {"pid", rank.rank}, {"ts", microseconds(m.time)},
                        {"args", {{"GiB", m.in_use.value() / 1073741824.0}}}});
    }
  }
  for (std::size_t id = 0; id < g.tasks.size(); ++id) {
    const plan::Task& t = g.tasks[id];
    const plan::TaskSpan& span = tl.spans[id];
    events.push_back({{"ph", "X"},
                      {"name", task_name(g, t)},
                      {"cat", t.kind == plan::TaskKind::kCompute ? "compute" : "comm"},
                      {"pid", t.rank},
                      {"tid", static_cast<int>(t.stream)},
                      {"ts", microseconds(span.start)},
                      {"dur", microseconds(span.end - span.start)},
                      {"args", {{"micro_batch", t.micro_batch}, {"layer", t.layer}}}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace dtsim::report
