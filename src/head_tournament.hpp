// The heads of the waiting groups (each group's oldest job) in a tournament tree whose order
// moves with time, for the picks of WFP3 and UNICEP without backfilling, where every start is a
// pick: one that keys every live group costs O(groups) (the store of bench/sim_throughput.py at
// load 1.2, whose queue keeps growing: three quarters of WFP3's time over its 11.5M jobs).
//
// A group's key at time t (lower first, ties by its head, the older) is WFP3's -(t - s)^3 c or
// UNICEP's -(t - s) / D, s its head's submit time and c or D its cached value: both order as the
// line a (t - s) (higher first; a = cbrt(c), 1 / D), and two lines cross once. So each node
// keeps the first group of its subtree as of the time it was found and the time until which
// that holds (a kinetic tournament: Basch, Guibas and Hershberger, "Data structures for mobile
// data", 1999): a pick finds again only the nodes whose time has come, and a change of head the
// nodes above it. The keys are compared as the simulator computes them; near a crossing, where
// rounding may order them otherwise than the lines, a node is found again at every pick.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace ddppo {

class HeadTournament {
 public:
  // One leaf per group; slopes[g] is its line's a (> 0), cached[g] its cached value.
  HeadTournament(std::vector<double> slopes, std::vector<double> cached)
      : slopes_(std::move(slopes)), cached_(std::move(cached)) {
    while (leaves_ < slopes_.size()) leaves_ *= 2;
    head_.assign(slopes_.size(), -1);
    submit_.assign(slopes_.size(), 0);
    first_.assign(leaves_, -1);
    until_.assign(leaves_, kInfinity);
  }
  // Group g's head is `job` (-1: none), submitted at `submit`.
  void set(size_t g, int32_t job, double submit) {
    head_[g] = job, submit_[g] = submit;
    for (size_t node = (leaves_ + g) / 2; node > 0 && until_[node] != -kInfinity; node /= 2)
      until_[node] = -kInfinity;
  }
  // The first group at t (-1 if none), with key(t, submit, cached) the groups' keys; t never
  // falls from one call to the next.
  template <typename Key>
  int32_t first(double t, const Key& key) {
    refresh(1, t, key);
    return group_at(1);
  }
  int32_t head(size_t g) const { return head_[g]; }
  double submit(size_t g) const { return submit_[g]; }
  // Calls visit(head) for every group whose key at t is at most `bound`, after first(t, key):
  // a node's first group has the least key below it.
  template <typename Key, typename Visit>
  void each_within(double t, const Key& key, double bound, const Visit& visit) const {
    each_within(1, t, key, bound, visit);
  }

 private:
  static constexpr double kInfinity = std::numeric_limits<double>::infinity();
  // Where the lines of two groups differ by less than this, relative, the keys as computed may
  // order them otherwise (WFP3's products and UNICEP's quotients are within 1e-15 of the lines'
  // order; the product's cube root, within 1e-16).
  static constexpr double kClose = 1e-7;

  template <typename Key, typename Visit>
  void each_within(size_t node, double t, const Key& key, double bound, const Visit& visit) const {
    const int32_t g = group_at(node);
    if (g < 0 || key(t, submit_[g], cached_[g]) > bound) return;
    if (node >= leaves_) return visit(head_[g]);
    each_within(2 * node, t, key, bound, visit);
    each_within(2 * node + 1, t, key, bound, visit);
  }
  int32_t group_at(size_t node) const {
    if (node < leaves_) return first_[node];
    const size_t g = node - leaves_;
    return g < head_.size() && head_[g] >= 0 ? static_cast<int32_t>(g) : -1;
  }
  double until_at(size_t node) const { return node < leaves_ ? until_[node] : kInfinity; }

  template <typename Key>
  void refresh(size_t node, double t, const Key& key) {
    if (node >= leaves_ || until_[node] > t) return;
    refresh(2 * node, t, key);
    refresh(2 * node + 1, t, key);
    int32_t x = group_at(2 * node), y = group_at(2 * node + 1);
    double until = std::min(until_at(2 * node), until_at(2 * node + 1));
    if (x >= 0 && y >= 0) {
      const double kx = key(t, submit_[x], cached_[x]), ky = key(t, submit_[y], cached_[y]);
      if (!(kx < ky || (kx == ky && head_[x] < head_[y]))) std::swap(x, y);
      until = std::min(until, holds_until(x, y, t));
    }
    first_[node] = x >= 0 ? x : y;
    until_[node] = until;
  }

  // Until when group x, first at t, stays before y: kInfinity once their lines have crossed
  // (beyond the band where rounding may still order them otherwise), the start of that band
  // before it, t itself within it. The lines differ by |d| |t - cross| and are at most `high`
  // there plus the steeper slope times the distance, both up to `slack` for the rounding of
  // `cross`, so outside the band they differ by more than kClose of the higher one.
  double holds_until(int32_t x, int32_t y, double t) const {
    const double ax = slopes_[x], ay = slopes_[y], d = ax - ay, most = std::max(ax, ay);
    const double sx = submit_[x], sy = submit_[y];
    if (std::fabs(d) <= 1e-6 * most) return cached_[x] == cached_[y] ? kInfinity : t;
    const double cross = (ax * sx - ay * sy) / d;
    const double slack = 1e-9 * (ax * std::fabs(sx) + ay * std::fabs(sy)) / std::fabs(d);
    const double high = std::max(ax * (cross - sx), 0.0) + 2 * most * slack;
    if (t >= cross) {  // past the band, x stays first where its line is the steeper
      const double after = t - cross - slack;
      const bool past = after > 0 && after * (std::fabs(d) - kClose * most) > kClose * high;
      return d > 0 && past ? kInfinity : t;
    }
    // Before the band, x is first where its line is the less steep.
    const double band = cross - slack - kClose * high / std::fabs(d);
    return d < 0 && band > t ? band : t;
  }

  std::vector<double> slopes_, cached_;
  std::vector<int32_t> head_;
  std::vector<double> submit_;
  size_t leaves_ = 1;
  // Per inner node (1 the root): its subtree's first group (-1: none) and until when that holds
  // (-kInfinity: a head below changed).
  std::vector<int32_t> first_;
  std::vector<double> until_;
};

}  // namespace ddppo
