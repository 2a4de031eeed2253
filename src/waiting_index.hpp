// Indexes of the waiting jobs that let a pick and an EASY backfill scan cost O(log n) or
// O(groups) per job they start instead of a walk over the queue (issue 17).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

namespace ddppo {

// Values over slots 0 .. n-1 (+infinity where unset) and the first slot at or after k whose
// value passes a test that, when it passes a value, passes every smaller one.
class MinTree {
 public:
  explicit MinTree(size_t n = 0) : n_(n), leaves_(1) {
    while (leaves_ < n) leaves_ *= 2;
    tree_.assign(2 * leaves_, kUnset);
  }
  static constexpr double kUnset = std::numeric_limits<double>::infinity();
  void set(size_t slot, double value) {
    size_t i = slot + leaves_;
    tree_[i] = value;
    for (i /= 2; i > 0; i /= 2) tree_[i] = std::min(tree_[2 * i], tree_[2 * i + 1]);
  }
  // n when no slot passes; `passes` must reject kUnset.
  template <typename Test>
  size_t first_from(size_t k, Test passes) const {
    if (k >= n_) return n_;
    size_t i = k + leaves_;
    if (!passes(tree_[i])) {
      do {
        while (i & 1) i /= 2;  // a right child (or the root): its right neighbours are higher
        if (i == 0) return n_;
        ++i;
      } while (!passes(tree_[i]));
      while (i < leaves_) i = passes(tree_[2 * i]) ? 2 * i : 2 * i + 1;
    }
    return i - leaves_;
  }
  // The last slot before k whose value passes, n when none does.
  template <typename Test>
  size_t last_before(size_t k, Test passes) const {
    if (k == 0) return n_;
    size_t i = std::min(k, n_) - 1 + leaves_;
    if (!passes(tree_[i])) {
      do {
        while (!(i & 1)) i /= 2;  // a left child: what is left of it is left of its parent
        if (i == 1) return n_;
        --i;
      } while (!passes(tree_[i]));
      while (i < leaves_) i = passes(tree_[2 * i + 1]) ? 2 * i + 1 : 2 * i;
    }
    return i - leaves_;
  }

 private:
  size_t n_, leaves_;
  std::vector<double> tree_;
};

// The waiting jobs of an order whose keys never change (FCFS, SJF, F1), by size (procs);
// within a size, a min-tree over the jobs in rank order holds each waiting job's request.
class WaitingIndex {
 public:
  // Jobs begin .. end-1 ranked by (keys[j - begin], j); FCFS (rank = index) without keys.
  WaitingIndex(const int32_t* procs, size_t begin, size_t end, const double* keys)
      : begin_(begin),
        by_rank_(end - begin),
        rank_(end - begin),
        class_(end - begin),
        slot_(end - begin),
        waiting_(end - begin) {
    std::iota(by_rank_.begin(), by_rank_.end(), static_cast<int32_t>(begin));
    if (keys)
      std::stable_sort(by_rank_.begin(), by_rank_.end(),
                       [&](int32_t a, int32_t b) { return keys[a - begin] < keys[b - begin]; });
    std::vector<int32_t> sizes(procs + begin, procs + end);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    classes_.resize(sizes.size());
    for (size_t c = 0; c < sizes.size(); ++c) classes_[c].procs = sizes[c];
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      const size_t j = by_rank_[r] - begin;
      rank_[j] = static_cast<int32_t>(r);
      class_[j] = static_cast<int32_t>(
          std::lower_bound(sizes.begin(), sizes.end(), procs[by_rank_[r]]) - sizes.begin());
      std::vector<int32_t>& jobs = classes_[class_[j]].jobs;
      slot_[j] = static_cast<int32_t>(jobs.size());
      jobs.push_back(by_rank_[r]);
    }
    for (Class& c : classes_) c.estimates = MinTree(c.jobs.size());
  }

  // Job j waits; EASY compares now + `estimate` with the shadow time.
  void add(int32_t j, double estimate) {
    classes_[class_[j - begin_]].estimates.set(slot_[j - begin_], estimate);
    waiting_.set(rank_[j - begin_], 0);
  }
  void remove(int32_t j) {
    classes_[class_[j - begin_]].estimates.set(slot_[j - begin_], MinTree::kUnset);
    waiting_.set(rank_[j - begin_], MinTree::kUnset);
  }
  // The waiting job of lowest rank, -1 if none.
  int32_t first() const {
    size_t r = waiting_.first_from(0, [](double v) { return v < MinTree::kUnset; });
    return r < by_rank_.size() ? by_rank_[r] : -1;
  }

  // An EASY scan visits candidates in rank order: begin_scan(), then next() until it gives -1,
  // and passed(j) after each job it gives, started or not.
  void begin_scan() {
    for (Class& c : classes_) c.from = 0;
  }
  // The waiting job of lowest rank, past those passed in this scan, with procs <= free and
  // either procs <= extra or now + estimate <= shadow.
  int32_t next(int32_t free, int32_t extra, double now, double shadow) {
    int32_t best = -1;
    for (Class& c : classes_) {
      if (c.procs > free) break;
      size_t s = c.procs <= extra
                     ? c.estimates.first_from(c.from, [](double v) { return v < MinTree::kUnset; })
                     : c.estimates.first_from(c.from, [&](double v) { return now + v <= shadow; });
      c.from = s;
      if (s < c.jobs.size() && (best < 0 || rank_[c.jobs[s] - begin_] < rank_[best - begin_]))
        best = c.jobs[s];
    }
    return best;
  }
  void passed(int32_t j) { classes_[class_[j - begin_]].from = slot_[j - begin_] + 1; }

  // A conservative scan walks the waiting jobs by rank: rank r's job, the first rank at or
  // after r that waits (size() if none).
  size_t size() const { return by_rank_.size(); }
  int32_t at(size_t r) const { return by_rank_[r]; }
  size_t rank(int32_t j) const { return rank_[j - begin_]; }
  size_t waiting_from(size_t r) const {
    return waiting_.first_from(r, [](double v) { return v < MinTree::kUnset; });
  }
  // The waiting job of highest rank below `below` with procs <= free and
  // now + estimate <= until(procs), where until falls as procs rise; -1 if none.
  template <typename Until>
  int32_t last_fitting(size_t below, int32_t free, double now, Until until) const {
    int32_t best = -1;
    for (const Class& c : classes_) {
      if (c.procs > free) break;
      const double by = until(c.procs);
      auto bound = std::lower_bound(c.jobs.begin(), c.jobs.end(), below,
                                    [&](int32_t j, size_t r) { return rank(j) < r; });
      size_t s = c.estimates.last_before(
          bound - c.jobs.begin(), [&](double v) { return v < MinTree::kUnset && now + v <= by; });
      if (s < c.jobs.size() && (best < 0 || rank(c.jobs[s]) > rank(best))) best = c.jobs[s];
    }
    return best;
  }

 private:
  struct Class {
    int32_t procs = 0;
    std::vector<int32_t> jobs;  // in rank order
    MinTree estimates;          // per slot of jobs: the waiting job's estimate
    size_t from = 0;            // the scan's next slot to look at
  };
  size_t begin_ = 0;
  std::vector<int32_t> by_rank_, rank_, class_, slot_;  // per rank; per job of the window
  MinTree waiting_;                                     // per rank: 0 while the job waits
  std::vector<Class> classes_;                          // by procs
};

// The waiting jobs in groups of equal (user, procs, request), the user only for SJBF: in a
// group the scores of WFP3 and UNICEP only fall with the wait and SJBF's are equal, so
// (score, index) order within it is index order, and so is the order of an EASY scan, where
// they pass or fail alike. A pick or a scan need only look at the groups' oldest waiting
// jobs, a few hundred where the queue holds tens of thousands.
class WaitingGroups {
 public:
  // `user` null: all in one.
  WaitingGroups(const int64_t* user, const int32_t* procs, const double* request, size_t begin,
                size_t end)
      : begin_(begin), group_(end - begin), slot_(end - begin), waits_(end - begin) {
    std::vector<int32_t> order(end - begin);
    std::iota(order.begin(), order.end(), static_cast<int32_t>(begin));
    auto key = [&](int32_t j) { return std::make_tuple(user ? user[j] : 0, procs[j], request[j]); };
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return key(a) < key(b); });
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || key(order[i]) != key(order[i - 1])) groups_.emplace_back();
      group_[order[i] - begin] = static_cast<int32_t>(groups_.size() - 1);
      slot_[order[i] - begin] = static_cast<int32_t>(groups_.back().jobs.size());
      groups_.back().jobs.push_back(order[i]);
    }
  }
  // Jobs are added in index order.
  void add(int32_t j) {
    waits_[j - begin_] = 1;
    Group& g = groups_[group_[j - begin_]];
    ++g.added;
    if (g.waiting++ == 0) {
      g.live_at = live_.size();
      live_.push_back(group_[j - begin_]);
    }
  }
  void remove(int32_t j) {
    if (!waits_[j - begin_]) return;
    waits_[j - begin_] = 0;
    Group& g = groups_[group_[j - begin_]];
    if (--g.waiting > 0) return;
    groups_[live_.back()].live_at = g.live_at;
    live_[g.live_at] = live_.back();
    live_.pop_back();
  }
  // Calls visit(j) for the oldest waiting job of every group that has one.
  template <typename Visit>
  void each_oldest(Visit visit) const {
    for (int32_t id : live_) visit(oldest(groups_[id]));
  }
  // The oldest waiting job of j's group, -1 if none.
  int32_t oldest_beside(int32_t j) const {
    const Group& g = groups_[group_[j - begin_]];
    return g.waiting > 0 ? oldest(g) : -1;
  }
  // A conservative scan walks each group from its oldest waiting job: the group's id, its
  // oldest waiting job (-1 if none), and the next waiting job after j in j's group (-1 if none).
  size_t size() const { return groups_.size(); }
  size_t group(int32_t j) const { return group_[j - begin_]; }
  int32_t oldest_of(size_t group) const {
    return groups_[group].waiting > 0 ? oldest(groups_[group]) : -1;
  }
  int32_t next_beside(int32_t j) const {
    const Group& g = groups_[group_[j - begin_]];
    for (size_t s = slot_[j - begin_] + 1; s < g.added; ++s)
      if (waits_[g.jobs[s] - begin_]) return g.jobs[s];
    return -1;
  }

 private:
  struct Group {
    std::vector<int32_t> jobs;  // in index order
    mutable size_t first = 0;   // no job before it waits (none comes back)
    size_t added = 0;           // jobs[0, added) have arrived
    int32_t waiting = 0;
    size_t live_at = 0;  // its position in live_ while it has waiting jobs
  };
  int32_t oldest(const Group& g) const {
    while (!waits_[g.jobs[g.first] - begin_]) ++g.first;
    return g.jobs[g.first];
  }
  size_t begin_ = 0;
  std::vector<int32_t> group_, slot_;  // per job of the window: its group, its place there
  std::vector<char> waits_;            // per job of the window
  std::vector<Group> groups_;
  std::vector<int32_t> live_;  // the groups with waiting jobs
};

}  // namespace ddppo
