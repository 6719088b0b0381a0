#include "dtsim/report/html_writer.hpp"

#include "dtsim/report/critical_path.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace dtsim::report {
namespace {

constexpr double kWidth = 1000;   // timeline width in px
constexpr double kLane = 14;      // px per lane
constexpr int kMaxRanks = 16;     // rows shown; the rest are alike in SPMD training

struct Style {
  const char* kind;
  const char* colour;
};
constexpr Style kStyles[] = {{"compute (matmul)", "#4c78a8"}, {"compute (memory-bound)", "#72b7b2"}, {"optimizer", "#54a24b"},
                             {"comm: tp", "#f58518"},         {"comm: cp", "#e45756"},               {"comm: ep", "#b279a2"},
                             {"comm: dp", "#eeca3b"},         {"comm: expert-dp", "#d6b43a"},        {"comm: pp", "#9d755d"},
                             {"comm: ps", "#ff9da6"}};

const char* colour_of(const std::string& kind) {
  for (const Style& s : kStyles) {
    if (kind == s.kind) return s.colour;
  }
  return "#999999";
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// Two lanes per rank (compute, communication). At scale a pixel holds many
// tasks of several kinds, so each lane is cut into one bin per pixel, each
// bin takes the colour of the kind busiest in it, and runs of bins of one
// colour become one rect: a GEMM-bound step reads as GEMMs, not as whichever
// kind was drawn last. The kinds drawn are returned for the legend.
std::string timeline_svg(const plan::TaskGraph& g, const plan::Timeline& tl, std::size_t ranks, std::set<std::string>& drawn) {
  const double span = static_cast<double>(std::max<std::int64_t>(1, tl.makespan.count));
  const auto bins = static_cast<std::size_t>(kWidth);
  // Per (row, lane): busy nanoseconds of each kind in each pixel.
  std::map<std::pair<int, int>, std::vector<std::map<std::string, double>>> lanes;
  for (std::size_t id = 0; id < g.tasks.size(); ++id) {
    const plan::Task& t = g.tasks[id];
    const int row = g.simulated_index(t.rank);
    if (row < 0 || static_cast<std::size_t>(row) >= ranks) continue;
    const int lane = t.kind == plan::TaskKind::kCompute ? 0 : 1;
    auto& busy = lanes[{row, lane}];
    if (busy.empty()) busy.resize(bins);
    const double a = static_cast<double>(tl.spans[id].start.count), b = static_cast<double>(tl.spans[id].end.count);
    if (!(b > a)) continue;
    const std::string kind = task_kind(g, t);
    const double px = span / kWidth;  // nanoseconds per pixel
    for (auto bin = static_cast<std::size_t>(a / px); bin < bins && static_cast<double>(bin) * px < b; ++bin) {
      const double lo = std::max(a, static_cast<double>(bin) * px), hi = std::min(b, static_cast<double>(bin + 1) * px);
      if (hi > lo) busy[bin][kind] += hi - lo;
    }
  }
  const double label = 110, height = static_cast<double>(ranks) * (2 * kLane + 8) + 24;
  std::string svg = fmt::format("<svg width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"timeline\">", kWidth + label + 10, height);
  for (std::size_t r = 0; r < ranks; ++r) {
    const double y = static_cast<double>(r) * (2 * kLane + 8);
    svg += fmt::format("<text x=\"0\" y=\"{:.0f}\">rank {} (stage {})</text>", y + kLane + 4, g.simulated[r].rank, g.simulated[r].stage);
    svg += fmt::format("<rect x=\"{}\" y=\"{:.0f}\" width=\"{}\" height=\"{}\" fill=\"#f4f4f4\"/>", label, y, kWidth, 2 * kLane);
  }
  for (const auto& [key, busy] : lanes) {
    const auto [row, lane] = key;
    const double y = row * (2 * kLane + 8) + lane * kLane;
    auto dominant = [&](std::size_t bin) {
      const auto& kinds = busy[bin];
      auto best = std::max_element(kinds.begin(), kinds.end(), [](const auto& x, const auto& y2) { return x.second < y2.second; });
      return best == kinds.end() ? std::string() : best->first;
    };
    for (std::size_t bin = 0; bin < bins;) {
      const std::string kind = dominant(bin);
      std::size_t end = bin + 1;
      while (end < bins && dominant(end) == kind) ++end;
      if (!kind.empty()) {
        drawn.insert(kind);
        svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.0f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>",
                           label + static_cast<double>(bin), y + 1, static_cast<double>(end - bin), kLane - 2, colour_of(kind), kind);
      }
      bin = end;
    }
  }
  svg += fmt::format("<text x=\"{}\" y=\"{:.0f}\">0</text><text x=\"{}\" y=\"{:.0f}\" text-anchor=\"end\">{:.4g} s</text></svg>", label,
                     height - 6, label + kWidth, height - 6, span * 1e-9);
  return svg;
}

std::string rank_colour(std::size_t r) { return fmt::format("hsl({},60%,45%)", static_cast<int>(r * 47 % 360)); }

std::string memory_svg(const plan::Timeline& tl, const plan::TaskGraph& g, std::size_t ranks, double capacity_gib) {
  const double span = static_cast<double>(std::max<std::int64_t>(1, tl.makespan.count)), height = 180, label = 110;
  double top = capacity_gib;
  for (std::size_t r = 0; r < ranks; ++r) top = std::max(top, tl.peak_memory[r].value() / 1073741824.0);
  auto y = [&](double gib) { return 10 + (1 - gib / top) * (height - 30); };
  std::string svg = fmt::format("<svg width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"memory\">", kWidth + label + 10, height);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#c00\" stroke-dasharray=\"4\"/>"
                     "<text x=\"0\" y=\"{3:.1f}\">capacity {4:.0f} GiB</text>",
                     label, label + kWidth, y(capacity_gib), y(capacity_gib) + 4, capacity_gib);
  // The axis: GiB in use at 0, half and the top, and time along the bottom.
  for (const double gib : {0.0, top / 2, top}) {
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.0f} GiB</text>",
                       label, label + kWidth, y(gib), label - 4, y(gib) + 4, gib);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.4g} s (memory in use per "
                     "rank)</text>",
                     label, height - 4, label + kWidth, height - 4, span * 1e-9);
  for (std::size_t r = 0; r < ranks; ++r) {
    const auto& samples = tl.memory[r];
    const std::size_t step = std::max<std::size_t>(1, samples.size() / 2000);
    std::string points;
    for (std::size_t i = 0; i < samples.size(); i += step) {
      points += fmt::format("{:.1f},{:.1f} ", label + static_cast<double>(samples[i].time.count) / span * kWidth,
                            y(samples[i].in_use.value() / 1073741824.0));
    }
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"><title>rank {} (stage {})"
                       "</title></polyline>",
                       points, rank_colour(r), g.simulated[r].rank, g.simulated[r].stage);
  }
  svg += "</svg>";
  return svg;
}

// The memory chart's key: one swatch per rank drawn.
std::string memory_key(const plan::TaskGraph& g, std::size_t ranks) {
  std::string key = "<p class=\"key\">";
  for (std::size_t r = 0; r < ranks; ++r) {
    key += fmt::format("<span style=\"background:{}\"></span>rank {} (stage {})", rank_colour(r), g.simulated[r].rank,
                       g.simulated[r].stage);
  }
  return key + "</p>";
}

}  // namespace

std::string html_report(const Report& r, const plan::TaskGraph& g, const plan::Timeline& tl, const std::string& verdict) {
  const std::size_t ranks = std::min<std::size_t>(g.simulated.size(), kMaxRanks);
  const auto gib = [](core::Bytes b) { return fmt::format("{:.2f}", b.value() / 1073741824.0); };
  std::string html = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>dtsim report</title><style>"
                     "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0}"
                     "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}"
                     "td:first-child,th:first-child{text-align:left}svg text{font-size:11px}.key span{display:inline-block;"
                     "width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}</style></head><body>";
  html += fmt::format("<h1>dtsim: {} on {}</h1><p>{} GPUs ({} x {}), strategy <code>{}</code>, global batch {}, {} micro-batch(es) per rank.</p>",
                      escape(r.info.model), escape(r.info.cluster), r.gpus, r.info.nodes, escape(r.info.device),
                      escape(r.info.strategy), r.info.global_batch, r.micro_batches);
  if (!verdict.empty()) html += fmt::format("<p><strong>Verdict.</strong> {}</p>", escape(verdict));
  html += "<h2>Summary</h2><table>";
  html += fmt::format("<tr><td>step time</td><td>{:.4f} s</td></tr><tr><td>throughput</td><td>{:.2f} samples/s</td></tr>",
                      r.step_time.value(), r.samples_per_s);
  if (r.info.seq_len > 0) html += fmt::format("<tr><td>tokens/s</td><td>{:.0f}</td></tr>", r.tokens_per_s);
  html += fmt::format("<tr><td>model TFLOP/s per GPU (MFU)</td><td>{:.1f} ({:.1f}%)</td></tr><tr><td>peak memory</td><td>{} GiB of {} GiB{}"
                      "</td></tr></table>",
                      r.model_tflops_per_gpu, 100 * r.mfu, gib(r.peak_bytes), gib(r.info.memory_capacity),
                      r.fits_in_memory ? "" : " <strong>(does not fit)</strong>");
  std::set<std::string> drawn;
  const std::string timeline = timeline_svg(g, tl, ranks, drawn);
  html += "<h2>Timeline</h2><p class=\"key\">";
  for (const Style& s : kStyles) {
    if (drawn.erase(s.kind) > 0) html += fmt::format("<span style=\"background:{}\"></span>{}", s.colour, s.kind);
  }
  for (const std::string& other : drawn) html += fmt::format("<span style=\"background:{}\"></span>{}", colour_of(other), escape(other));
  html += "</p><p>Per rank: compute above, communication below; gaps in the compute lane are bubbles and waiting. Each "
          "pixel takes the colour of the kind busiest in it.</p>";
  html += timeline;
  html += "<h2>Memory over time</h2>" + memory_key(g, ranks) +
          memory_svg(tl, g, ranks, r.info.memory_capacity.value() / 1073741824.0);
  html += "<h2>Memory per stage (GiB)</h2><table><tr><th>stage</th><th>params</th><th>grads</th><th>optimizer</th><th>activations</th>"
          "<th>other</th><th>peak</th></tr>";
  for (const StageMemory& m : r.per_stage) {
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", m.stage, gib(m.params),
                        gib(m.grads), gib(m.optimizer), gib(m.activations), gib(m.other), gib(m.peak));
  }
  const Breakdown& b = r.breakdown;
  html += fmt::format("</table><h2>Breakdown (rank {})</h2><table><tr><th>part</th><th>seconds</th></tr>"
                      "<tr><td>compute</td><td>{:.4f}</td></tr><tr><td>exposed tp</td><td>{:.4f}</td></tr><tr><td>exposed cp</td><td>{:.4f}</td></tr>"
                      "<tr><td>exposed ep</td><td>{:.4f}</td></tr><tr><td>exposed dp</td><td>{:.4f}</td></tr><tr><td>exposed pp</td><td>{:.4f}</td></tr>"
                      "<tr><td>bubble and waiting</td><td>{:.4f}</td></tr>",
                      b.rank, b.compute.value(), b.exposed_comm.tp.value(), b.exposed_comm.cp.value(), b.exposed_comm.ep.value(),
                      b.exposed_comm.dp.value(), b.exposed_comm.pp.value(), b.bubble.value());
  if (b.host_wait.value() > 0) {
    html += fmt::format("<tr><td>of which waiting on the host</td><td>{:.4f}</td></tr>", b.host_wait.value());
  }
  html += "</table>";
  html += "<h2>Bottlenecks</h2><ul>";
  for (const Bottleneck& bn : r.bottlenecks) html += "<li>" + escape(bn.message) + "</li>";
  html += "</ul></body></html>\n";
  return html;
}

}  // namespace dtsim::report
