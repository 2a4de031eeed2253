// The waiting jobs, ranked by a key that never changes (FCFS, SJF and F1's score; FCFS for
// the other policies), indexed so that a pick and an EASY backfill scan cost O(log n) per job
// they look at instead of a walk over the queue (issue 17). Jobs are grouped by size (procs);
// within a size, a min-tree over the jobs in rank order holds each waiting job's request.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
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

 private:
  size_t n_, leaves_;
  std::vector<double> tree_;
};

class WaitingIndex {
 public:
  WaitingIndex() = default;
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

  // Calls visit(j) for every waiting job with procs <= free and either procs <= extra or
  // now + estimate <= shadow: those an EASY scan may start, in no particular order.
  template <typename Visit>
  void each_candidate(int32_t free, int32_t extra, double now, double shadow, Visit visit) const {
    for (const Class& c : classes_) {
      if (c.procs > free) break;
      auto each = [&](auto passes) {
        for (size_t s = c.estimates.first_from(0, passes); s < c.jobs.size();
             s = c.estimates.first_from(s + 1, passes))
          visit(c.jobs[s]);
      };
      if (c.procs <= extra)
        each([](double v) { return v < MinTree::kUnset; });
      else
        each([&](double v) { return now + v <= shadow; });
    }
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

}  // namespace ddppo
