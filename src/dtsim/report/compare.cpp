#include "dtsim/report/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

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
bool informational(const std::string& pointer) {
  return pointer.ends_with("/message");
}

// +1 where more is better, -1 where less is better, 0 where neither.
int better_direction(const std::string& pointer) {
  const std::string leaf = pointer.substr(pointer.rfind('/') + 1);
  for (const char* rate : {"samples_per_s", "tokens_per_s", "mfu", "hfu", "model_tflops_per_gpu", "hardware_tflops_per_gpu"}) {
    if (leaf == rate) return 1;
  }
  if (leaf.ends_with("_s") || leaf.ends_with("_bytes")) return -1;
  return 0;
}

void walk(const nlohmann::json* a, const nlohmann::json* b, const std::string& pointer, double tolerance, Comparison& out) {
  const bool objects = a && b && a->is_object() && b->is_object();
  const bool arrays = a && b && a->is_array() && b->is_array() && a->size() == b->size();
  if (objects) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a->items()) keys.insert(k);
    for (const auto& [k, v] : b->items()) keys.insert(k);
    for (const std::string& k : keys) {
      walk(a->contains(k) ? &(*a)[k] : nullptr, b->contains(k) ? &(*b)[k] : nullptr, pointer + "/" + k, tolerance, out);
    }
    return;
  }
  if (arrays) {
    for (std::size_t i = 0; i < a->size(); ++i) walk(&(*a)[i], &(*b)[i], pointer + "/" + std::to_string(i), tolerance, out);
    return;
  }
  ++out.fields;
  if (a && b && a->is_number() && b->is_number()) {
    const double x = a->get<double>(), y = b->get<double>();
    if (std::abs(x) < 1e-12 && std::abs(y) < 1e-12) return;
    const double relative = x != 0 ? (y - x) / std::abs(x) : 1.0;
    if (relative == 0) return;
    const int better = better_direction(pointer);
    const bool past = std::abs(relative) > tolerance;
    const bool improved = past && better != 0 && (relative > 0) == (better > 0);
    out.differences.push_back({pointer, shown(a), shown(b), relative, past && !improved, improved});
    return;
  }
  if (a && b && *a == *b) return;
  out.differences.push_back({pointer, shown(a), shown(b), 0, !informational(pointer), false});
}

}  // namespace

bool Comparison::within_tolerance() const {
  return std::none_of(differences.begin(), differences.end(), [](const FieldDifference& d) { return d.beyond_tolerance; });
}

Comparison compare_reports(const nlohmann::json& before, const nlohmann::json& after, double tolerance) {
  Comparison out;
  walk(&before, &after, "", tolerance, out);
  return out;
}

}  // namespace dtsim::report
