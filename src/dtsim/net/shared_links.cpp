#include "dtsim/net/shared_links.hpp"

#include <algorithm>
#include <cmath>

namespace dtsim::net {

SharedLinks::SharedLinks(std::vector<double> capacity_bytes_per_s)
    : capacity_(std::move(capacity_bytes_per_s)),
      on_link_(capacity_.size()),
      residual_(capacity_.size()),
      weight_(capacity_.size()),
      link_mark_(capacity_.size(), 0) {}

int SharedLinks::add(double now_s, std::span<const std::pair<int, int>> flows_on_link, double bytes, double rate_cap) {
  int id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<int>(activities_.size());
    activities_.emplace_back();
  }
  Activity& a = activities_[static_cast<std::size_t>(id)];
  a.flows_on_link.assign(flows_on_link.begin(), flows_on_link.end());
  a.remaining = bytes;
  a.rate = 0;
  a.cap = rate_cap;
  a.since_s = now_s;
  for (auto [link, flows] : a.flows_on_link) on_link_[static_cast<std::size_t>(link)].push_back(id);
  if (a.flows_on_link.empty()) {
    // Nothing to share: it runs at its cap, or at once.
    a.rate = rate_cap;
    changed_.assign(1, {id, std::isinf(rate_cap) ? now_s : now_s + bytes / rate_cap});
    return id;
  }
  solve(now_s, a.flows_on_link);
  return id;
}

void SharedLinks::remove(double now_s, int id) {
  Activity& a = activities_[static_cast<std::size_t>(id)];
  for (auto [link, flows] : a.flows_on_link) {
    auto& list = on_link_[static_cast<std::size_t>(link)];
    auto it = std::find(list.begin(), list.end(), id);
    *it = list.back();
    list.pop_back();
  }
  free_.push_back(id);
  const std::vector<std::pair<int, int>> seed = std::move(a.flows_on_link);
  a.flows_on_link.clear();
  changed_.clear();
  solve(now_s, seed);
}

void SharedLinks::solve(double now_s, std::span<const std::pair<int, int>> seed_links) {
  ++epoch_;
  changed_.clear();
  // The component: links and live activities reachable from the seed, in an
  // order that depends only on the sequence of adds and removes.
  std::vector<int>& links = scratch_links_;
  std::vector<int>& component = scratch_component_;
  links.clear();
  component.clear();
  auto reach = [&](int link) {
    if (link_mark_[static_cast<std::size_t>(link)] == epoch_) return;
    link_mark_[static_cast<std::size_t>(link)] = epoch_;
    links.push_back(link);
  };
  for (auto [link, flows] : seed_links) reach(link);
  for (std::size_t i = 0; i < links.size(); ++i) {
    for (int id : on_link_[static_cast<std::size_t>(links[i])]) {
      Activity& a = activities_[static_cast<std::size_t>(id)];
      if (a.mark == epoch_) continue;
      a.mark = epoch_;
      component.push_back(id);
      for (auto [link, flows] : a.flows_on_link) reach(link);
    }
  }
  for (int id : component) {
    Activity& a = activities_[static_cast<std::size_t>(id)];
    a.previous_rate = a.rate;
    a.rate = 0;
    a.frozen = false;
  }

  // Progressive filling: raise every unfrozen activity's rate by the most the
  // fullest link allows, freeze those on links that filled up, repeat.
  for (int link : links) {
    residual_[static_cast<std::size_t>(link)] = capacity_[static_cast<std::size_t>(link)];
    weight_[static_cast<std::size_t>(link)] = 0;
  }
  for (int id : component) {
    for (auto [link, flows] : activities_[static_cast<std::size_t>(id)].flows_on_link) weight_[static_cast<std::size_t>(link)] += flows;
  }
  std::size_t unfrozen = component.size();
  auto freeze = [&](Activity& a) {
    a.frozen = true;
    --unfrozen;
    for (auto [link, flows] : a.flows_on_link) weight_[static_cast<std::size_t>(link)] -= flows;
  };
  while (unfrozen > 0) {
    double delta = std::numeric_limits<double>::infinity();
    for (int link : links) {
      const auto l = static_cast<std::size_t>(link);
      if (weight_[l] > 0) delta = std::min(delta, residual_[l] / weight_[l]);
    }
    for (int id : component) {
      const Activity& a = activities_[static_cast<std::size_t>(id)];
      if (!a.frozen) delta = std::min(delta, a.cap - a.rate);
    }
    for (int id : component) {
      Activity& a = activities_[static_cast<std::size_t>(id)];
      if (!a.frozen) a.rate += delta;
    }
    for (int link : links) {
      const auto l = static_cast<std::size_t>(link);
      residual_[l] -= delta * weight_[l];
    }
    for (int link : links) {
      const auto l = static_cast<std::size_t>(link);
      if (weight_[l] <= 0 || residual_[l] > 1e-9 * capacity_[l]) continue;
      for (int id : on_link_[l]) {
        Activity& a = activities_[static_cast<std::size_t>(id)];
        if (!a.frozen) freeze(a);
      }
    }
    for (int id : component) {
      Activity& a = activities_[static_cast<std::size_t>(id)];
      if (!a.frozen && a.rate >= a.cap * (1 - 1e-12)) freeze(a);
    }
  }
  // An activity whose rate came out as it was keeps its progress and its
  // finish as they were: only the rates that changed are brought up to date.
  // So each activity's finish depends on its own history, not on when
  // another part of the component happened to be solved (copies of a group
  // that start together finish together to the nanosecond).
  for (int id : component) {
    Activity& a = activities_[static_cast<std::size_t>(id)];
    if (a.previous_rate > 0 && std::abs(a.rate - a.previous_rate) <= 1e-12 * a.previous_rate) {
      a.rate = a.previous_rate;
      continue;
    }
    a.remaining -= a.previous_rate * (now_s - a.since_s);
    a.since_s = now_s;
    changed_.push_back({id, a.remaining <= 0 ? now_s : now_s + a.remaining / a.rate});
  }
}

}  // namespace dtsim::net
