#include "dtsim/report/validation.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "dtsim/report/critical_path.hpp"

namespace dtsim::report {
namespace {

core::Seconds seconds(core::Nanoseconds ns) { return core::Seconds(static_cast<double>(ns.count) * 1e-9); }

std::string human(core::Seconds s) {
  if (s.value() >= 1) return fmt::format("{:.3f} s", s.value());
  if (s.value() >= 1e-3) return fmt::format("{:.2f} ms", s.value() * 1e3);
  return fmt::format("{:.1f} us", s.value() * 1e6);
}

// A pipeline send is posted and left (the executor's MPI_Isend): its rank
// is not busy with it, and what the transfer takes shows at the receive.
bool is_pipeline_send(const plan::TaskGraph& graph, const plan::Task& task) {
  if (task.kind != plan::TaskKind::kComm) return false;
  const plan::CommCall& call = graph.calls[static_cast<std::size_t>(task.payload)];
  if (call.op != plan::CommOp::kSendRecv) return false;
  const std::vector<int>& ranks = graph.groups[static_cast<std::size_t>(call.group)].ranks;
  const auto member = std::find(ranks.begin(), ranks.end(), task.rank) - ranks.begin();
  return member == plan::sender_index(task);
}

// The executor runs a rank's tasks one after another in the order of their
// predicted start (exec::execute) and times each call, so a collective or a
// receive it times holds its wait for the other members (a receive's for
// its sender). The predicted busy time of a communication task is counted
// the same way: from when every task the executor runs before it on that
// rank has ended; nothing where the transfer was over by then.
std::vector<double> predicted_busy_seconds(const plan::TaskGraph& graph, const plan::Timeline& predicted) {
  std::vector<double> busy(graph.tasks.size(), 0.0);
  std::map<int, std::vector<std::uint32_t>> by_rank;
  for (std::uint32_t id = 0; id < graph.tasks.size(); ++id) {
    if (predicted.spans[id].end.count >= 0) by_rank[graph.tasks[id].rank].push_back(id);
  }
  for (auto& [rank, ids] : by_rank) {
    std::stable_sort(ids.begin(), ids.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return predicted.spans[a].start < predicted.spans[b].start; });
    std::int64_t called = 0;  // when the executor would reach the next task
    for (std::uint32_t id : ids) {
      const plan::TaskSpan& span = predicted.spans[id];
      const std::int64_t from = graph.tasks[id].kind == plan::TaskKind::kComm ? called : span.start.count;
      busy[id] = static_cast<double>(std::max<std::int64_t>(0, span.end.count - from)) * 1e-9;
      called = std::max(called, span.end.count);
    }
  }
  return busy;
}

}  // namespace

double ValidationRow::error() const {
  return measured.value() > 0 ? (predicted.value() - measured.value()) / measured.value() : 0.0;
}

Validation validate(const plan::TaskGraph& graph, const plan::Timeline& predicted, const plan::Timeline& measured) {
  Validation v;
  v.step = {"step time", seconds(predicted.makespan), seconds(measured.makespan)};
  std::map<std::string, std::pair<double, double>> busy;  // kind -> (predicted, measured) seconds
  std::vector<std::string> order;
  const std::vector<double> predicted_busy = predicted_busy_seconds(graph, predicted);
  for (std::size_t id = 0; id < graph.tasks.size(); ++id) {
    if (is_pipeline_send(graph, graph.tasks[id])) continue;
    const std::string kind = task_kind(graph, graph.tasks[id]);
    if (!busy.count(kind)) order.push_back(kind);
    auto& [p, m] = busy[kind];
    const plan::TaskSpan& ms = measured.spans[id];
    p += predicted_busy[id];
    if (ms.end.count >= 0) m += static_cast<double>((ms.end - ms.start).count) * 1e-9;
  }
  const double ranks = std::max<double>(1, static_cast<double>(graph.simulated.size()));
  for (const std::string& kind : order) {
    v.kinds.push_back({kind, core::Seconds(busy[kind].first / ranks), core::Seconds(busy[kind].second / ranks)});
  }
  std::sort(v.kinds.begin(), v.kinds.end(), [](const auto& a, const auto& b) { return a.measured > b.measured; });
  for (core::Bytes b : predicted.peak_memory) v.predicted_peak_memory = std::max(v.predicted_peak_memory, b);
  for (core::Bytes b : measured.peak_memory) v.measured_peak_memory = std::max(v.measured_peak_memory, b);
  return v;
}

void write_validation_table(std::ostream& out, const Validation& v) {
  fmt::print(out, "  {:<28} {:>12} {:>12} {:>8}\n", "", "predicted", "measured", "error");
  auto row = [&](const ValidationRow& r) {
    fmt::print(out, "  {:<28} {:>12} {:>12} {:>+7.1f}%\n", r.what, human(r.predicted), human(r.measured), 100 * r.error());
  };
  row(v.step);
  fmt::print(out, "  busy time per rank, by kind:\n");
  for (const ValidationRow& r : v.kinds) row(r);
  const double mib = 1048576.0;
  const double error = v.measured_peak_memory.value() > 0
                           ? (v.predicted_peak_memory / v.measured_peak_memory - 1) * 100 : 0.0;
  fmt::print(out, "  {:<28} {:>8.1f} MiB {:>8.1f} MiB {:>+7.1f}%\n", "peak memory (largest rank)",
             v.predicted_peak_memory.value() / mib, v.measured_peak_memory.value() / mib, error);
}

nlohmann::json to_json(const Validation& v) {
  auto row = [](const ValidationRow& r) {
    return nlohmann::json{{"what", r.what}, {"predicted_s", r.predicted.value()}, {"measured_s", r.measured.value()},
                          {"error", r.error()}};
  };
  nlohmann::json kinds = nlohmann::json::array();
  for (const ValidationRow& r : v.kinds) kinds.push_back(row(r));
  return {{"step", row(v.step)},
          {"kinds", kinds},
          {"peak_memory", {{"predicted_bytes", v.predicted_peak_memory.value()},
                           {"measured_bytes", v.measured_peak_memory.value()}}}};
}

}  // namespace dtsim::report
