#include "dtsim/report/compare.hpp"

#include "dtsim/core/version.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "dtsim/core/quantity_parse.hpp"

namespace dtsim::report {
namespace {

std::string shown(const nlohmann::json* v) {
  if (!v) return "(missing)";
  if (v->is_number()) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.6g", v->get<double>());
    return buffer;
  }
  return v->dump();
}

// Sentences written from the numbers: they change when the numbers do, and
// the numbers are what the tolerance judges.
bool informational(const std::string& pointer) { return pointer.ends_with("/message"); }

// +1 where more is better, -1 where less is better, 0 where neither.
int better_direction(const std::string& pointer) {
  const std::string leaf = pointer.substr(pointer.rfind('/') + 1);
  for (const char* rate : {"samples_per_s", "tokens_per_s", "mfu", "hfu", "model_tflops_per_gpu", "hardware_tflops_per_gpu"}) {
    if (leaf == rate) return 1;
  }
  if (leaf.ends_with("_s") || leaf.ends_with("_bytes")) return -1;
  return 0;
}

// The key an array's elements are matched by: per-stage memory by stage,
// bottlenecks by kind; none for other arrays, matched by position.
std::optional<std::string> element_key(const nlohmann::json& a, const nlohmann::json& b) {
  for (const char* key : {"stage", "kind"}) {
    auto all_have = [&](const nlohmann::json& array) {
      return std::all_of(array.begin(), array.end(), [&](const nlohmann::json& e) { return e.is_object() && e.contains(key); });
    };
    if (!a.empty() && all_have(a) && all_have(b)) return std::string(key);
  }
  return std::nullopt;
}

class Walker {
 public:
  Walker(const CompareRules& rules, Comparison& out) : rules_(rules), out_(out) {}

  void walk(const nlohmann::json* a, const nlohmann::json* b, const std::string& pointer) {
    if (a && b && a->is_object() && b->is_object()) {
      std::set<std::string> keys;
      for (const auto& [k, v] : a->items()) keys.insert(k);
      for (const auto& [k, v] : b->items()) keys.insert(k);
      for (const std::string& k : keys) walk(a->contains(k) ? &(*a)[k] : nullptr, b->contains(k) ? &(*b)[k] : nullptr, pointer + "/" + k);
      return;
    }
    if (a && b && a->is_array() && b->is_array()) {
      if (auto key = element_key(*a, *b)) {
        std::vector<std::string> ids;
        auto id_of = [&](const nlohmann::json& e) { return e.at(*key).dump(); };
        for (const auto& e : *a) ids.push_back(id_of(e));
        for (const auto& e : *b) {
          if (std::find(ids.begin(), ids.end(), id_of(e)) == ids.end()) ids.push_back(id_of(e));
        }
        for (const std::string& id : ids) {
          auto find = [&](const nlohmann::json& array) -> const nlohmann::json* {
            for (const auto& e : array) {
              if (id_of(e) == id) return &e;
            }
            return nullptr;
          };
          std::string shown_id = id.size() > 1 && id.front() == '"' ? id.substr(1, id.size() - 2) : id;
          walk(find(*a), find(*b), fmt::format("{}[{}={}]", pointer, *key, shown_id));
        }
        return;
      }
      if (a->size() == b->size()) {
        for (std::size_t i = 0; i < a->size(); ++i) walk(&(*a)[i], &(*b)[i], pointer + "/" + std::to_string(i));
        return;
      }
    }
    leaf(a, b, pointer);
  }

 private:
  // The gate entry for a pointer: the longest one it equals or lies under.
  std::optional<GatedField> gate(const std::string& pointer) const {
    if (rules_.gated.empty()) return GatedField{"", std::nullopt};
    std::optional<GatedField> best;
    for (const GatedField& g : rules_.gated) {
      const std::string p = "/" + g.pointer;
      const bool under = pointer == p || pointer.starts_with(p + "/") || pointer.starts_with(p + "[");
      if (under && (!best || g.pointer.size() > best->pointer.size())) best = g;
    }
    return best;
  }

  void leaf(const nlohmann::json* a, const nlohmann::json* b, const std::string& pointer) {
    ++out_.fields;
    const std::optional<GatedField> gated = gate(pointer);
    const double tolerance = gated && gated->tolerance ? *gated->tolerance : rules_.tolerance;
    FieldDifference d{pointer, shown(a), shown(b), 0, Verdict::kWithin, tolerance, ""};
    if (a && b && a->is_number() && b->is_number()) {
      const double x = a->get<double>(), y = b->get<double>();
      if (std::abs(x) < 1e-12 && std::abs(y) < 1e-12) return;
      d.relative = x != 0 ? (y - x) / std::abs(x) : 1.0;
      if (d.relative == 0) return;
      const int better = better_direction(pointer);
      if (std::abs(d.relative) > tolerance) {
        d.verdict = better != 0 && (d.relative > 0) == (better > 0) ? Verdict::kImprovement : Verdict::kRegression;
      }
    } else {
      if (a && b && *a == *b) return;
      d.verdict = Verdict::kRegression;
      if (informational(pointer)) d = note(std::move(d), "a sentence written from the numbers");
      else if (!a) d = note(std::move(d), "a field the older report lacks");
      else if (pointer == "/strategy") d = note(std::move(d), "the strategy changed: the numbers are judged");
    }
    if (!gated && d.verdict != Verdict::kNote) d = note(std::move(d), "not gated (--fields)");
    out_.differences.push_back(std::move(d));
  }

  static FieldDifference note(FieldDifference d, std::string why) {
    d.verdict = Verdict::kNote;
    d.note = std::move(why);
    return d;
  }

  const CompareRules& rules_;
  Comparison& out_;
};

std::string change_of(const FieldDifference& d) {
  return d.relative != 0 ? fmt::format("{:+.2f}%", 100 * d.relative) : "differs";
}

}  // namespace

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::kWithin: return "within";
    case Verdict::kRegression: return "regression";
    case Verdict::kImprovement: return "improvement";
    case Verdict::kNote: return "note";
  }
  return "?";
}

bool Comparison::within_tolerance() const {
  return std::none_of(differences.begin(), differences.end(), [](const FieldDifference& d) { return d.beyond_tolerance(); });
}

Comparison compare_reports(const nlohmann::json& before, const nlohmann::json& after, const CompareRules& rules) {
  Comparison out;
  Walker(rules, out).walk(&before, &after, "");
  return out;
}

std::vector<GatedField> parse_gated_fields(std::string_view text) {
  std::vector<GatedField> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    GatedField g;
    const auto eq = item.find('=');
    g.pointer = std::string(item.substr(0, eq));
    while (!g.pointer.empty() && g.pointer.front() == '/') g.pointer.erase(0, 1);
    if (g.pointer.empty()) throw std::invalid_argument(fmt::format("expected a field such as step_time_s, got \"{}\"", item));
    if (eq != std::string_view::npos) {
      try {
        g.tolerance = core::parse_fraction(item.substr(eq + 1));
      } catch (const std::invalid_argument&) {
        throw std::invalid_argument(fmt::format("expected field=tolerance like step_time_s=2%, got \"{}\"", item));
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

nlohmann::json comparison_json(const Comparison& c, const CompareRules& rules) {
  nlohmann::json differences = nlohmann::json::array();
  int regressions = 0, improvements = 0;
  for (const FieldDifference& d : c.differences) {
    regressions += d.beyond_tolerance() ? 1 : 0;
    improvements += d.improvement() ? 1 : 0;
    nlohmann::json j = {{"field", d.pointer}, {"before", d.before},      {"after", d.after},
                        {"relative", d.relative}, {"tolerance", d.tolerance}, {"verdict", std::string(to_string(d.verdict))}};
    if (!d.note.empty()) j["note"] = d.note;
    differences.push_back(std::move(j));
  }
  nlohmann::json gated = nlohmann::json::array();
  for (const GatedField& g : rules.gated) gated.push_back(g.pointer);
  return {{"schema", "dtsim.compare/1"}, {"dtsim_version", core::version()}, {"passed", c.within_tolerance()}, {"tolerance", rules.tolerance},
          {"gated", gated},              {"fields", c.fields},              {"changed", c.differences.size()},
          {"regressions", regressions},  {"improvements", improvements},    {"differences", differences}};
}

std::string comparison_markdown(const Comparison& c, const CompareRules& rules) {
  int regressions = 0, improvements = 0;
  for (const FieldDifference& d : c.differences) {
    regressions += d.beyond_tolerance() ? 1 : 0;
    improvements += d.improvement() ? 1 : 0;
  }
  std::string out = fmt::format("### dtsim compare: {}\n\n", c.within_tolerance() ? "passed" : "**regressed**");
  out += fmt::format("{} fields compared, {} changed: {} regressed and {} improved beyond the tolerance ({:g}% unless a "
                     "field sets its own).\n",
                     c.fields, c.differences.size(), regressions, improvements, 100 * rules.tolerance);
  if (c.differences.empty()) return out;
  out += "\n| field | before | after | change | verdict |\n|---|---:|---:|---:|---|\n";
  for (const FieldDifference& d : c.differences) {
    std::string verdict = d.beyond_tolerance() ? "**regression**" : std::string(to_string(d.verdict));
    if (!d.note.empty()) verdict += ": " + d.note;
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", d.pointer, d.before, d.after, change_of(d), verdict);
  }
  return out;
}

}  // namespace dtsim::report
