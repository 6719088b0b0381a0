#pragma once
/// Flow-level sharing of links: activities (the phases of collectives in
/// flight) each move `bytes` per flow over flows that advance in lock-step,
/// k of them on a link; the links' capacities are split among them by max-min
/// fairness (progressive filling: every activity's per-flow rate grows until
/// a link it uses is full, then it is frozen and the others go on), as in
/// SimGrid's LMM solver. Only the activities that share links, directly or
/// through others, with one that starts or ends are solved again, so
/// collectives inside different nodes never cost each other time.
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace dtsim::net {

class SharedLinks {
 public:
  /// Bytes per second of each link (Network::link_capacity()).
  explicit SharedLinks(std::vector<double> capacity_bytes_per_s);

  /// Starts an activity at `now_s` moving `bytes` per flow; (link, flows)
  /// pairs say what it loads; `rate_cap` bounds its per-flow rate. Returns
  /// its id (ids are reused after remove).
  int add(double now_s, std::span<const std::pair<int, int>> flows_on_link, double bytes,
          double rate_cap = std::numeric_limits<double>::infinity());
  /// Ends an activity (finished or not) at `now_s`.
  void remove(double now_s, int id);

  /// Activities whose rate the last add() or remove() changed (the one
  /// added included), with when each would finish at its new rate.
  struct Change {
    int id;
    double finish_s;
  };
  [[nodiscard]] const std::vector<Change>& changed() const { return changed_; }

  [[nodiscard]] double rate(int id) const { return activities_[static_cast<std::size_t>(id)].rate; }

 private:
  struct Activity {
    std::vector<std::pair<int, int>> flows_on_link;
    double remaining = 0;  ///< bytes per flow still to move
    double rate = 0;       ///< bytes per second per flow
    double cap = 0;
    double since_s = 0;    ///< when `remaining` was last brought up to date
    double previous_rate = 0;  ///< scratch for the solver: the rate before this solve
    bool frozen = false;   ///< scratch for the solver
    std::uint32_t mark = 0;
  };
  /// Re-solves the component reachable from the given links at `now_s`.
  void solve(double now_s, std::span<const std::pair<int, int>> seed_links);

  std::vector<double> capacity_;
  std::vector<std::vector<int>> on_link_;  ///< live activities per link
  std::vector<Activity> activities_;
  std::vector<int> free_;
  std::vector<Change> changed_;
  // Scratch space of solve(), kept to avoid allocating per call.
  std::vector<double> residual_, weight_;  ///< per link
  std::vector<std::uint32_t> link_mark_;
  std::vector<int> scratch_links_, scratch_component_;
  std::uint32_t epoch_ = 0;
};

}  // namespace dtsim::net
