// Indexes of the waiting jobs that let a pick and an EASY backfill scan cost O(log n) or
// O(groups) per job they start instead of a walk over the queue (issue 17).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <set>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bisect.hpp"

namespace ddppo {

// Jobs begin .. begin+n-1 in (keys[j - begin], j) order. Spread by key over n / kPerBucket
// buckets of equal key ranges (in job order within each), then sorted bucket by bucket in the
// cache: on the 11.5M-job store under F1, 1.1 s instead of 1.9 s for sorting all (key, job)
// pairs at once.
inline std::vector<int32_t> jobs_by_key(const double* keys, size_t begin, size_t n) {
  constexpr size_t kPerBucket = 16;
  std::vector<int32_t> jobs(n);
  if (n == 0) return jobs;
  const auto [lo, hi] = std::minmax_element(keys, keys + n);
  const size_t buckets = n / kPerBucket + 1;
  // A bucket never rises as the key falls; with one key (or a range too tiny to divide), one.
  double scale = buckets / (*hi - *lo);
  if (!(scale < std::numeric_limits<double>::infinity())) scale = 0;
  auto bucket = [&, min = *lo](double k) {
    const double x = (k - min) * scale;
    return x < buckets - 1 ? static_cast<size_t>(x) : buckets - 1;
  };
  std::vector<uint32_t> at(buckets + 1);
  for (size_t i = 0; i < n; ++i) ++at[bucket(keys[i]) + 1];
  std::partial_sum(at.begin(), at.end(), at.begin());
  std::vector<std::pair<double, int32_t>> ranked(n);
  for (size_t i = 0; i < n; ++i)
    ranked[at[bucket(keys[i])]++] = {keys[i], static_cast<int32_t>(begin + i)};
  for (size_t b = 0, from = 0; b < buckets; from = at[b++])  // at[b] is now bucket b's end
    if (!std::is_sorted(ranked.begin() + from, ranked.begin() + at[b]))
      std::sort(ranked.begin() + from, ranked.begin() + at[b]);
  for (size_t i = 0; i < n; ++i) jobs[i] = ranked[i].second;
  return jobs;
}

// Values over slots 0 .. n-1 (kUnset, the largest value, where unset) and the first slot at
// or after k whose value passes a test that, when it passes a value, passes every smaller one.
// A tree whose nodes each hold the minima of kFan children, one cache line of them: over the
// millions of slots of a long window, an update or a search misses the cache about once a
// level, and there are log_16 (int32) or log_8 (double) levels instead of log_2.
template <typename T>
class MinTree {
 public:
  static constexpr size_t kFan = 64 / sizeof(T);
  // Level 0 holds the slots, each level above a node's minimum per node below, the top one
  // the minimum of all; every level but the top whole nodes.
  explicit MinTree(size_t n = 0) : n_(n) {
    for (size_t size = std::max<size_t>(n, 1);; size = (size + kFan - 1) / kFan) {
      levels_.emplace_back(size == 1 ? 1 : (size + kFan - 1) / kFan * kFan, kUnset);
      if (size == 1) break;
    }
  }
  static constexpr T kUnset = std::numeric_limits<T>::has_infinity
                                  ? std::numeric_limits<T>::infinity()
                                  : std::numeric_limits<T>::max();
  // The smallest value set, kUnset if none; slot's value.
  T min() const { return levels_.back()[0]; }
  T at(size_t slot) const { return levels_[0][slot]; }
  size_t size() const { return n_; }
  // Stops where a node's minimum stays as it was: above it nothing changes. A lower value
  // needs no sibling: each node's minimum becomes the lesser of it and the value.
  void set(size_t slot, T value) {
    T old = levels_[0][slot];
    levels_[0][slot] = value;
    for (size_t l = 1, i = slot / kFan; l < levels_.size(); ++l, i /= kFan) {
      T& node = levels_[l][i];
      const T was = node;
      if (value < node)
        node = value;
      else if (old == node && value != old)
        node = least(&levels_[l - 1][i * kFan]);
      if (node == was) return;
      old = was, value = node;
    }
  }
  // The least of a node's kFan children, without a branch per child: a removal recomputes
  // the nodes whose minimum it was (min_element there took 7% of the 11.5M-job store's
  // instructions under F1 + EASY).
  static T least(const T* child) {
    T m = child[0];
    for (size_t c = 1; c < kFan; ++c) m = std::min(m, child[c]);
    return m;
  }
  // Brings the slot and its node one level up into the cache ahead of a set(). Inlined
  // always: GCC finds a function of prefetches alone free of side effects and drops its calls.
  [[gnu::always_inline]] void prefetch(size_t slot) const {
    __builtin_prefetch(&levels_[0][slot], 1);
    if (levels_.size() > 1) __builtin_prefetch(&levels_[1][slot / kFan], 1);
  }
  // n when no slot passes; `passes` must reject kUnset.
  template <typename Test>
  size_t first_from(size_t k, Test passes) const {
    if (k >= n_) return n_;
    size_t l = levels_.size() - 1, i = 0;
    if (k == 0) {
      if (!passes(min())) return n_;  // one descent from the top
    } else {
      // Up from slot k: the rest of each node, then the nodes after it one level up.
      for (l = 0, i = k;; i /= kFan, ++l) {
        const std::vector<T>& level = levels_[l];
        const size_t end = std::min(i / kFan * kFan + kFan, level.size());
        while (i < end && !passes(level[i])) ++i;
        if (i < end) break;
        if (l + 1 == levels_.size()) return n_;
      }
    }
    for (; l > 0; --l)
      for (i *= kFan; !passes(levels_[l - 1][i]);) ++i;
    return i;
  }
  // The last slot before k whose value passes, n when none does.
  template <typename Test>
  size_t last_before(size_t k, Test passes) const {
    size_t l = 0, i = std::min(k, n_);  // the end of what is left to search on level l
    for (;; i /= kFan, ++l) {
      if (i == 0) return n_;
      const std::vector<T>& level = levels_[l];
      const size_t start = (i - 1) / kFan * kFan;
      while (i > start && !passes(level[i - 1])) --i;
      if (i > start) break;
      if (l + 1 == levels_.size()) return n_;
    }
    for (--i; l > 0; --l)
      for (i = i * kFan + kFan - 1; !passes(levels_[l - 1][i]);) --i;
    return i;
  }

 private:
  size_t n_;
  std::vector<std::vector<T>> levels_;
};

// The waiting jobs of an order whose keys never change (FCFS, SJF, F1). A tree over their
// ranks holds each waiting job's procs: the pick, and the jobs an EASY scan may start in the
// extra procs. The others it may start must end by the shadow time: they are among the size
// classes between the extra and the free procs (per size, a tree over its jobs in rank order
// holds their requests) and among the requests that end by the shadow time (per request, a
// tree over its jobs holds their procs). Of the two, an EASY index keeps the request classes
// where there are fewer requests than sizes overall (a synthetic store has ~1,000 sizes and 10
// requests; LANL-CM5 6 sizes and 1,521 requests), else the size classes. Conservative scans
// search the size classes. An EASY scan on EASY++ predictions also starts jobs whose request
// runs past the shadow time but whose user's mean runtime does not: per user, a tree over its
// jobs in rank order holds their procs. For conservative scans on predictions the size
// classes' trees hold at most the jobs' predictions, min(the user's mean, the request): a fall
// of a user's mean sets those of its waiting jobs again (per user, a list of them), a rise sets
// none, and a search sets those it finds too low (on LANL-CM5 at x 0.25 a user's mean moved the
// predictions of ~900 waiting jobs at each of its 122,000 changes, 40% of FCFS's time).
class WaitingIndex {
 public:
  // How many ranks ahead the build fetches a job's place and columns.
  static constexpr size_t kAhead = 16;
  // The classes each kind of scan needs; picks need none.
  enum class Scans { kNone, kEasy, kConservative };
  // Jobs begin .. end-1 ranked by (keys[j - begin], j); FCFS (rank = index) without keys.
  // `users` (per job of the window, its user's index, -1 if unknown) for scans on
  // predictions, else null.
  WaitingIndex(const int32_t* procs, const double* request, size_t begin, size_t end,
               const double* keys, Scans scans, const int32_t* users = nullptr)
      : procs_(procs),
        request_(request),
        begin_(begin),
        by_rank_(keys ? jobs_by_key(keys, begin, end - begin) : std::vector<int32_t>(end - begin)),
        places_(end - begin),
        waiting_(end - begin) {
    if (!keys) std::iota(by_rank_.begin(), by_rank_.end(), static_cast<int32_t>(begin));
    const size_t n = end - begin, any = std::numeric_limits<size_t>::max();
    bool sized = scans != Scans::kNone && sizes_.classify(procs + begin, n, any);
    // An EASY scan searches the fewer classes: the sizes where there are as many requests (the
    // logs), else the requests only (the 11.5M-job store under F1 + EASY: 2.81G -> 2.41G
    // instructions for its first 1M jobs without the size classes' upkeep).
    const bool requested =
        scans == Scans::kEasy && requests_.classify(request + begin, n, sizes_.keys.size() - 1);
    if (requested) sized = false, sizes_ = {};
    if (sized) sizes_.make_room(procs + begin, n);
    if (requested) requests_.make_room(request + begin, n);
    if (users && scans != Scans::kNone) {
      predicted_ = scans == Scans::kConservative;
      // Jobs of unknown users, never predicted below their request, as a user of their own
      // whose mean is never set.
      const int32_t unknown = n ? *std::max_element(users, users + n) + 1 : 0;
      user_class_.resize(n);
      for (size_t i = 0; i < n; ++i) user_class_[i] = users[i] < 0 ? unknown : users[i];
      mean_.assign(unknown + 1, MinTree<double>::kUnset);
      if (predicted_) {
        // One array, each user's part as long as its jobs (no allocation per user: the
        // environment builds an index per window).
        listed_.assign(unknown + 1, 0);
        for (size_t i = 0; i < n; ++i) ++listed_[user_class_[i]];
        list_at_.assign(unknown + 2, 0);
        std::partial_sum(listed_.begin(), listed_.end(), list_at_.begin() + 1);
        std::fill(listed_.begin(), listed_.end(), 0);
        lists_.resize(n);
      } else {
        users_.classify(user_class_.data(), n, any);
        users_.make_room(user_class_.data(), n);
      }
    }
    // By rank, with the places of jobs some ranks on fetched ahead: they lie all over the
    // window (on the 11.5M-job store, a cache miss each).
    for (size_t r = 0; r < n; ++r) {
      if (r + kAhead < n) {
        const int32_t k = by_rank_[r + kAhead];
        __builtin_prefetch(&places_[k - begin], 1);
        __builtin_prefetch(&procs[k]);
        __builtin_prefetch(&request[k]);
      }
      const int32_t j = by_rank_[r];
      Place& at = places_[j - begin];
      at.rank = static_cast<int32_t>(r);
      if (sized) at.size_slot = sizes_.join(procs[j], at.rank);
      if (requested) at.request_slot = requests_.join(request[j], at.rank);
      if (!users_.keys.empty()) at.user_slot = users_.join(user_class_[j - begin], at.rank);
    }
    sizes_.plant();
    requests_.plant();
    users_.plant();
    means_ = MinTree<double>(users_.keys.size());
  }
  // User u's mean runtime, EASY++'s prediction for its jobs of longer requests, is now `mean`
  // (kUnset without history); kept where built with users.
  void user_mean(int32_t u, double mean) {
    if (user_class_.empty()) return;
    const double was = std::exchange(mean_[u], mean);
    if (!predicted_) {
      const size_t c = users_.class_of(u);
      if (users_.trees[c].min() != MinTree<int32_t>::kUnset) means_.set(c, mean);
      return;
    }
    // The size classes' trees hold at most each waiting job's prediction: a mean that rises
    // leaves them as they are (a search corrects those it finds, predicted()); one that falls
    // sets those of its waiting jobs with requests over it, and those that left go from its
    // list. The list holds what the update reads, so that a job costs one access, to its slot,
    // which is kUnset once it left (and while it waits only where its request is infinite).
    if (!(mean < was)) return;
    Listed* mine = &lists_[list_at_[u]];
    uint32_t kept = 0;
    for (uint32_t k = 0; k < listed_[u]; ++k) {
      const Listed l = mine[k];
      MinTree<double>& tree = sizes_.trees[l.size_class];
      if (tree.at(l.size_slot) == MinTree<double>::kUnset &&
          (l.request != MinTree<double>::kUnset || waiting_.at(l.rank) == MinTree<int32_t>::kUnset))
        continue;
      mine[kept++] = l;
      if (l.request > mean) tree.set(l.size_slot, mean);
    }
    listed_[u] = kept;
  }

  void add(int32_t j) {
    const Place& at = places_[j - begin_];
    waiting_.set(at.rank, procs_[j]);
    double estimate = request_[j];
    if (predicted_) {
      const int32_t u = user_class_[j - begin_];
      lists_[list_at_[u] + listed_[u]++] = {
          request_[j], static_cast<uint32_t>(sizes_.class_of(procs_[j])), at.size_slot, at.rank};
      estimate = prediction(j);
    } else if (!users_.keys.empty()) {
      const size_t c = users_.class_of(user_class_[j - begin_]);
      if (users_.trees[c].min() == MinTree<int32_t>::kUnset) means_.set(c, mean_[c]);
      users_.trees[c].set(at.user_slot, procs_[j]);
    }
    sizes_.set(procs_[j], at.size_slot, estimate);
    requests_.set(request_[j], at.request_slot, procs_[j]);
  }
  // Brings what add(j) writes into the cache: jobs arrive in index order, so the simulator
  // asks this for a job some arrivals ahead (on the 11.5M-job store under F1 the slots of a
  // job's rank and classes are scattered over hundreds of MB).
  [[gnu::always_inline]] void prefetch(int32_t j) const {
    const Place& at = places_[j - begin_];
    waiting_.prefetch(at.rank);
    sizes_.prefetch(procs_[j], at.size_slot);
    requests_.prefetch(request_[j], at.request_slot);
    if (!users_.keys.empty()) users_.prefetch(user_class_[j - begin_], at.user_slot);
  }
  void remove(int32_t j) {
    const Place& at = places_[j - begin_];
    waiting_.set(at.rank, MinTree<int32_t>::kUnset);
    sizes_.set(procs_[j], at.size_slot, MinTree<double>::kUnset);
    requests_.set(request_[j], at.request_slot, MinTree<int32_t>::kUnset);
    if (!users_.keys.empty()) {
      const size_t c = users_.class_of(user_class_[j - begin_]);
      users_.trees[c].set(at.user_slot, MinTree<int32_t>::kUnset);
      if (users_.trees[c].min() == MinTree<int32_t>::kUnset) means_.set(c, MinTree<double>::kUnset);
    }
  }
  // The waiting job of lowest rank, -1 if none.
  int32_t first() const { return job_at(waiting_from(0)); }

  // For an EASY scan (Scans::kEasy): the waiting job of lowest rank with procs <= free and
  // either procs <= extra or now + request <= shadow, or, built with users, now + its user's
  // mean <= shadow (fl(now + x) rises with x, so now + min(mean, request) <= shadow iff now +
  // mean or now + request is: the users whose waiting jobs all end by the shadow time on
  // their predictions, searched where a job that fits comes before the others); -1 if none.
  int32_t next(int32_t free, int32_t extra, double now, double shadow) const {
    const int32_t anyway = std::min(free, extra);
    size_t best = fitting_from(0, anyway);
    if (anyway >= free) return job_at(best);
    auto fits = [&](int32_t p) { return p <= free; };
    auto ends_by = [&](double v) { return v < MinTree<double>::kUnset && now + v <= shadow; };
    if (requests_.keys.empty()) {
      for (size_t c = sizes_.classes_to(anyway), hi = sizes_.classes_to(free); c < hi; ++c)
        best = std::min(best, first_rank(sizes_, c, ends_by));
    } else {
      const size_t ending =
          std::partition_point(requests_.keys.begin(), requests_.keys.end(), ends_by) -
          requests_.keys.begin();
      for (size_t c = 0; c < ending; ++c) best = std::min(best, first_rank(requests_, c, fits));
    }
    if (!users_.keys.empty() && fitting_from(0, free) < best) {
      const size_t users = users_.keys.size();
      for (size_t c = means_.first_from(0, ends_by); c < users;
           c = means_.first_from(c + 1, ends_by))
        best = std::min(best, first_rank(users_, c, fits));
    }
    return job_at(best);
  }

  // A conservative scan walks the waiting jobs by rank: rank r's job, the first rank at or
  // after r that waits (size() if none).
  size_t size() const { return by_rank_.size(); }
  int32_t at(size_t r) const { return by_rank_[r]; }
  size_t rank(int32_t j) const { return places_[j - begin_].rank; }
  size_t waiting_from(size_t r) const {
    return waiting_.first_from(r, [](int32_t p) { return p < MinTree<int32_t>::kUnset; });
  }
  // The first rank at or after r whose job waits and needs at most `free` procs (size() if
  // none).
  size_t fitting_from(size_t r, int32_t free) const {
    return waiting_.first_from(r, [&](int32_t p) { return p <= free; });
  }
  // For a conservative scan (Scans::kConservative): the waiting job of highest rank below
  // `below` with procs <= free and now + estimate <= until(procs), where until falls as procs
  // rise; -1 if none.
  template <typename Until>
  int32_t last_fitting(size_t below, int32_t free, double now, Until until) {
    size_t best = size();
    for (size_t c = 0, fitting = sizes_.classes_to(free); c < fitting; ++c) {
      const double by = until(sizes_.keys[c]);
      const std::vector<int32_t>& ranks = sizes_.ranks[c];
      auto passes = [&](double v) { return v < MinTree<double>::kUnset && now + v <= by; };
      size_t s = std::lower_bound(ranks.begin(), ranks.end(), below,
                                  [](int32_t r, size_t at) { return size_t(r) < at; }) -
                 ranks.begin();
      do s = sizes_.trees[c].last_before(s, passes);
      while (s < ranks.size() && !passes(predicted(c, s)));
      if (s < ranks.size() && (best == size() || size_t(ranks[s]) > best)) best = ranks[s];
    }
    return job_at(best);
  }

  // For a conservative scan, by size class (ascending procs) and slot (rank order in the
  // class): the first slot at or after `hint` whose rank is at least r; the first slot at or
  // after `slot` whose job waits with an estimate of at most `limit`; a slot's rank (size()
  // past the class's last).
  size_t size_classes() const { return sizes_.keys.size(); }
  int32_t class_procs(size_t c) const { return sizes_.keys[c]; }
  size_t slot_at(size_t c, size_t hint, size_t r) const {
    const std::vector<int32_t>& ranks = sizes_.ranks[c];
    for (size_t end = std::min(hint + 4, ranks.size()); hint < end; ++hint)  // mostly the next
      if (size_t(ranks[hint]) >= r) return hint;
    return std::lower_bound(ranks.begin() + hint, ranks.end(), r,
                            [](int32_t k, size_t at) { return size_t(k) < at; }) -
           ranks.begin();
  }
  size_t first_in_class(size_t c, size_t slot, double limit) {
    auto passes = [&](double v) { return v < MinTree<double>::kUnset && v <= limit; };
    for (;; ++slot) {
      slot = sizes_.trees[c].first_from(slot, passes);
      if (slot == sizes_.trees[c].size() || passes(predicted(c, slot))) return slot;
    }
  }
  size_t class_rank(size_t c, size_t slot) const {
    return slot < sizes_.ranks[c].size() ? size_t(sizes_.ranks[c][slot]) : size();
  }

 private:
  // The jobs by a key in classes of equal key, each class's jobs in rank order with a tree
  // over them that holds a value for each waiting one; empty unless classified. A class lists its
  // jobs' ranks, not the jobs: a search reads a rank there without a second cache miss in
  // places_ (an EASY scan on the 11.5M-job store looks at every request class per job).
  template <typename Key, typename Value>
  struct Classes {
    std::vector<Key> keys;                    // per class, ascending
    std::vector<std::vector<int32_t>> ranks;  // per class, its jobs' ranks, ascending
    std::vector<MinTree<Value>> trees;        // per class, per slot of its jobs
    std::vector<int32_t> upto;                // integral keys: per value, classes up to it

    // The classes of the n keys; none (false) past `most`.
    bool classify(const Key* key, size_t n, size_t most) {
      if constexpr (std::is_integral_v<Key>) {
        // Procs, from 1 to the machine's: a table by value, not a search per job (the 11.5M-job
        // store has 965 sizes).
        upto.assign(n ? *std::max_element(key, key + n) + 1 : 0, 0);
        for (size_t j = 0; j < n; ++j) upto[key[j]] = 1;
        for (size_t k = 0; k < upto.size(); ++k) {
          if (upto[k]) keys.push_back(Key(k));
          upto[k] = static_cast<int32_t>(keys.size());
        }
      } else {
        // The keys are few beside the jobs: each job's is looked up in those found so far.
        for (size_t j = 0; j < n && keys.size() <= most; ++j)
          if (const size_t at = keys.empty() ? 0 : lower(key[j]);
              at == keys.size() || keys[at] != key[j])
            keys.insert(keys.begin() + at, key[j]);
      }
      if (keys.size() > most) {
        keys.clear(), upto.clear();
        return false;
      }
      return true;
    }
    // Room in each class for its jobs among the n keys classified.
    void make_room(const Key* key, size_t n) {
      std::vector<int32_t> count(keys.size());
      for (size_t j = 0; j < n; ++j) ++count[class_of(key[j])];
      ranks.resize(keys.size());
      for (size_t c = 0; c < keys.size(); ++c) ranks[c].reserve(count[c]);
    }
    // The job of rank r, key k, joins its class after those of lower ranks; its slot there.
    int32_t join(Key k, int32_t r) {
      std::vector<int32_t>& in = ranks[class_of(k)];
      in.push_back(r);
      return static_cast<int32_t>(in.size() - 1);
    }
    // Once every job has joined: a tree per class.
    void plant() {
      for (const std::vector<int32_t>& in : ranks) trees.emplace_back(in.size());
    }
    size_t class_of(Key k) const {
      if constexpr (std::is_integral_v<Key>)
        return upto[k] - 1;
      else
        return lower(k);
    }
    // The first key not below k (keys.size() if none) in the non-empty keys, by a search
    // without a branch to mispredict: requests come in no order.
    size_t lower(Key k) const {
      return bisect(keys.data(), keys.size(), [k](Key x) { return x < k; });
    }
    // The value of the job of key k at `slot` of its class.
    void set(Key k, int32_t slot, Value v) {
      if (!keys.empty()) trees[class_of(k)].set(slot, v);
    }
    [[gnu::always_inline]] void prefetch(Key k, int32_t slot) const {
      if (!keys.empty()) trees[class_of(k)].prefetch(slot);
    }
    // How many classes have a key <= k.
    size_t classes_to(Key k) const {
      if constexpr (std::is_integral_v<Key>)  // an EASY scan asks twice per job it starts
        return k < 0 ? 0 : size_t(k) < upto.size() ? upto[k] : keys.size();
      else
        return std::upper_bound(keys.begin(), keys.end(), k) - keys.begin();
    }
  };
  // The lowest rank in class c whose value passes, size() if none.
  template <typename Key, typename Value, typename Test>
  size_t first_rank(const Classes<Key, Value>& in, size_t c, Test passes) const {
    const MinTree<Value>& tree = in.trees[c];
    if (!passes(tree.min())) return size();
    return in.ranks[c][tree.first_from(0, passes)];
  }
  int32_t job_at(size_t r) const { return r < size() ? by_rank_[r] : -1; }
  // The value at slot s of size class c, set to the job's prediction where it is lower (its
  // user's mean rose since it was set: user_mean()); on requests, the request.
  double predicted(size_t c, size_t s) {
    MinTree<double>& tree = sizes_.trees[c];
    const double v = tree.at(s);
    if (!predicted_ || v == MinTree<double>::kUnset) return v;
    const double exact = prediction(by_rank_[sizes_.ranks[c][s]]);
    if (exact != v) tree.set(s, exact);
    return exact;
  }
  // Job j's EASY++ prediction: its user's mean, at most its request.
  double prediction(int32_t j) const {
    return std::min(mean_[user_class_[j - begin_]], request_[j]);
  }

  const int32_t* procs_;
  const double* request_;
  size_t begin_ = 0;
  // Per job of the window, side by side (a removal reads them in one cache line): its rank,
  // its slots in its size, request and user classes.
  struct Place {
    int32_t rank = 0, size_slot = 0, request_slot = 0, user_slot = 0;
  };
  std::vector<int32_t> by_rank_;  // per rank
  std::vector<Place> places_;
  MinTree<int32_t> waiting_;           // per rank: the procs of a waiting job
  Classes<int32_t, double> sizes_;     // by procs: requests
  Classes<double, int32_t> requests_;  // by request: procs
  // Built with users: per job of the window, its user (unknown users as one more); per user,
  // its mean runtime. EASY: by user, procs, and the means of the users with waiting jobs in a
  // tree (kUnset elsewhere). Conservative (predicted_: sizes_ holds predictions): per user, its
  // jobs added since its mean last changed and those then waiting (a job that leaves never
  // comes back).
  std::vector<int32_t> user_class_;
  std::vector<double> mean_;
  Classes<int32_t, int32_t> users_;
  MinTree<double> means_;
  bool predicted_ = false;
  // A job in its user's list: its request, its slot in the size classes and its rank.
  struct Listed {
    double request;
    uint32_t size_class;
    int32_t size_slot, rank;
  };
  std::vector<Listed> lists_;  // user u's: from list_at_[u], listed_[u] of them
  std::vector<uint32_t> list_at_, listed_;
};

// The waiting jobs in groups of equal (user, procs, request), the user only for SJBF and for
// EASY on predictions (a group's jobs then have one prediction): in a group the scores of WFP3
// and UNICEP only fall with the wait, SJBF's are equal and FCFS's rise with the index, so
// (score, index) order within it is index order, and so is the order of an EASY scan, where
// they pass or fail alike. A pick or a scan need only look at the groups' oldest
// waiting jobs, a few hundred where the queue holds tens of thousands.
class WaitingGroups {
 public:
  // `user` null: all in one. Groups are numbered by (procs, request), then user. `cached`
  // (per job of the window) is equal within a group: the simulator's cached_, a function of
  // procs and request for WFP3 and UNICEP (FCFS's, its submit time, is not, and no FCFS scan
  // reads a group's: its heads are keyed by their own, in ordered_heads_).
  WaitingGroups(const int64_t* user, const int32_t* procs, const double* request,
                const double* submit, const double* cached, size_t begin, size_t end)
      : submit_(submit),
        begin_(begin),
        group_(end - begin),
        slot_(end - begin),
        waits_(end - begin) {
    // The distinct (procs, request, user) in one pass (a hash of them: sorting the 11.5M-job
    // store's jobs by them took a tenth of its runs without backfilling), numbered in that
    // order; then each job, in index order, joins its group.
    using Key = std::tuple<int32_t, double, int64_t>;
    auto key = [&](size_t j) { return Key{procs[j], request[j], user ? user[j] : 0}; };
    struct KeyHash {
      size_t operator()(const Key& k) const {
        return std::hash<double>()(std::get<1>(k)) * 31 +
               static_cast<size_t>(std::get<0>(k)) * 1000003 + static_cast<size_t>(std::get<2>(k));
      }
    };
    std::unordered_map<Key, int32_t, KeyHash> seen;
    std::vector<int32_t> first;  // per key in order of appearance, its first job
    for (size_t j = begin; j < end; ++j) {
      const auto [at, added] = seen.try_emplace(key(j), static_cast<int32_t>(first.size()));
      if (added) first.push_back(static_cast<int32_t>(j));
      group_[j - begin] = at->second;
    }
    std::vector<int32_t> by_key(first.size()), number(first.size());
    std::iota(by_key.begin(), by_key.end(), 0);
    std::sort(by_key.begin(), by_key.end(),
              [&](int32_t a, int32_t b) { return key(first[a]) < key(first[b]); });
    for (const int32_t k : by_key) {
      const int32_t j = first[k];
      if (groups_.empty() || procs[j] != sizes_.back()) class_end_.push_back(groups_.size());
      number[k] = static_cast<int32_t>(groups_.size());
      groups_.emplace_back();
      class_.push_back(static_cast<int32_t>(class_end_.size() - 1));
      sizes_.push_back(procs[j]);
      requests_.push_back(request[j]);
      cached_.push_back(cached[j - begin]);
    }
    for (size_t j = begin; j < end; ++j) {
      Group& g = groups_[group_[j - begin] = number[group_[j - begin]]];
      slot_[j - begin] = static_cast<int32_t>(g.jobs.size());
      g.jobs.push_back(static_cast<int32_t>(j));
    }
    // class_end_ held each class's first group: make it the group after each class.
    if (!class_end_.empty()) class_end_.erase(class_end_.begin());
    class_end_.push_back(groups_.size());
    live_bits_.resize((groups_.size() + 63) / 64);
    oldest_.resize(groups_.size());
    oldest_submit_.resize(groups_.size());
    // groups_to() by a table over procs, not a search of sizes_ (two a scan; on the 11.5M-job
    // store, ~9,650 groups, that search took 6.5% of WFP3 + EASY's instructions).
    groups_to_.assign(sizes_.empty() ? 1 : sizes_.back() + 1, 0);
    for (int32_t p : sizes_) ++groups_to_[p];
    std::partial_sum(groups_to_.begin(), groups_to_.end(), groups_to_.begin());
    // The requests' buckets: one per request where there are at most kBuckets, else split at
    // the groups' request quantiles (fewer, uneven, where many groups share a request); tops_
    // holds each bucket's largest request.
    std::vector<double> sorted(requests_);
    std::sort(sorted.begin(), sorted.end());
    tops_ = sorted;
    tops_.erase(std::unique(tops_.begin(), tops_.end()), tops_.end());
    if (tops_.size() > kBuckets) {
      tops_.clear();
      for (size_t b = 1; b <= kBuckets; ++b)
        if (const double top = sorted[b * sorted.size() / kBuckets - 1];
            tops_.empty() || top > tops_.back())
          tops_.push_back(top);
    }
    bucket_.resize(groups_.size());
    bottoms_.assign(tops_.size(), std::numeric_limits<double>::infinity());
    for (size_t g = 0; g < groups_.size(); ++g) {
      bucket_[g] = static_cast<uint8_t>(std::lower_bound(tops_.begin(), tops_.end(), requests_[g]) -
                                        tops_.begin());
      bottoms_[bucket_[g]] = std::min(bottoms_[bucket_[g]], requests_[g]);
    }
    ending_bits_.resize(tops_.size() * live_bits_.size());
    live_summary_.resize((live_bits_.size() + 63) / 64);
    ending_summary_.resize(tops_.size() * live_summary_.size());
  }
  // Jobs are added in index order.
  void add(int32_t j) {
    waits_[j - begin_] = 1;
    const int32_t id = group_[j - begin_];
    Group& g = groups_[id];
    ++g.added;
    if (g.waiting++ == 0) {
      g.live_at = live_.size();
      live_.push_back(id);
      live_oldest_.emplace_back();
      live_submit_.emplace_back();
      live_cached_.push_back(cached_[id]);
      mark_live(id, true);
      set_oldest(id, j);
    }
  }
  void remove(int32_t j) {
    if (!waits_[j - begin_]) return;
    waits_[j - begin_] = 0;
    const int32_t id = group_[j - begin_];
    Group& g = groups_[id];
    if (--g.waiting > 0) {
      if (oldest_[id] == j) set_oldest(id, oldest(g));
      return;
    }
    mark_live(id, false);
    groups_[live_.back()].live_at = g.live_at;
    live_[g.live_at] = live_.back(), live_.pop_back();
    live_oldest_[g.live_at] = live_oldest_.back(), live_oldest_.pop_back();
    live_submit_[g.live_at] = live_submit_.back(), live_submit_.pop_back();
    live_cached_[g.live_at] = live_cached_.back(), live_cached_.pop_back();
  }
  // Calls visit(group, j, j's submit time, the group's cached value) for every group that has a
  // waiting job, j its oldest: a pass over arrays in live order, not by group (a conservative
  // scan or a pick keys every group this way).
  template <typename Visit>
  void each_live(Visit visit) const {
    for (size_t i = 0; i < live_.size(); ++i)
      visit(static_cast<size_t>(live_[i]), live_oldest_[i], live_submit_[i], live_cached_[i]);
  }
  // Calls visit(j) for the oldest waiting job of every group that has one.
  template <typename Visit>
  void each_oldest(Visit visit) const {
    each_live([&](size_t, int32_t j, double, double) { visit(j); });
  }
  // Calls visit(j, submit, cached) for the oldest waiting job j of every group whose jobs an
  // EASY scan may start, in group order, j's submit time and the group's cached value: procs
  // <= free and either procs <= extra or now + request <= shadow. By (procs, request), these
  // groups are among the first groups_to(free): those up to the extra procs all pass, and a
  // walk of the live groups' bits finds them; past those, a walk of the bits of the live
  // groups in the request buckets that may end by the shadow time (on the 11.5M-job store,
  // 10 requests, the live groups past the extra procs were 15 (WFP3) to 45 (UNICEP) times
  // those that pass). On EASY++ predictions, with groups of one user and `predicted(group)`
  // their jobs' prediction: past the extra procs, every live group that fits is tested.
  template <typename Visit, typename Predicted = std::nullptr_t>
  void each_oldest_fitting(int32_t free, int32_t extra, double now, double shadow, Visit visit,
                           Predicted predicted = nullptr) const {
    const size_t to = groups_to(free), anyway = std::min(groups_to(std::min(free, extra)), to);
    auto oldest = [&](size_t k) { visit(oldest_[k], oldest_submit_[k], cached_[k]); };
    each_live_bit(0, anyway, oldest);
    if constexpr (!std::is_null_pointer_v<Predicted>) {
      each_live_bit(anyway, to, [&](size_t k) {
        if (now + predicted(k) <= shadow) oldest(k);
      });
      return;
    }
    each_live_ending(anyway, to, [&](double request) { return now + request <= shadow; }, oldest);
  }
  // Calls visit(group) for every group with a waiting job, procs in (above, most] and a request
  // that `ends` (true up to some request, false past it), in (procs, request) order: a walk of
  // the bits of the live groups in the request buckets up to there (the store: ~9,650 groups,
  // 10 requests).
  template <typename Ends, typename Visit>
  void each_live_within(int32_t above, int32_t most, Ends ends, Visit visit) const {
    each_live_ending(groups_to(above), groups_to(most), ends, visit);
  }
  // Calls visit(group) for every group with a waiting job and procs <= p, in (procs, request)
  // order: a walk of the live groups' bits among the first groups_to(p).
  template <typename Visit>
  void each_live_to(int32_t p, Visit visit) const {
    each_live_bit(0, groups_to(p), visit);
  }
  // Calls visit(g, end) for every class of groups of equal procs, with procs <= p, that has a
  // group with a waiting job, in procs order: g is the first such group, `end` the group after
  // the class (a conservative scan cuts each class once, not each group).
  template <typename Visit>
  void each_live_class_to(int32_t p, Visit visit) const {
    const size_t to = groups_to(p);
    for (size_t g = next_live(0); g < to;) {
      const size_t end = class_end_[class_[g]];
      visit(g, end);
      g = next_live(end);
    }
  }
  // The first group at or after g with a waiting job, size() if none.
  size_t next_live(size_t g) const {
    size_t word = g / 64;
    if (word >= live_bits_.size()) return size();
    for (uint64_t bits = live_bits_[word] & (~uint64_t{0} << (g % 64));; bits = live_bits_[word]) {
      if (bits) return 64 * word + __builtin_ctzll(bits);
      if (++word == live_bits_.size()) return size();
    }
  }
  // The last group in [first, below) with a waiting job, kNoGroup if none.
  static constexpr size_t kNoGroup = std::numeric_limits<size_t>::max();
  size_t last_live(size_t first, size_t below) const {
    if (below <= first) return kNoGroup;
    size_t word = (below - 1) / 64;
    for (uint64_t bits = live_bits_[word] & (~uint64_t{0} >> (63 - (below - 1) % 64));;
         bits = live_bits_[--word]) {
      if (bits) {
        const size_t g = 64 * word + 63 - __builtin_clzll(bits);
        return g >= first ? g : kNoGroup;
      }
      if (64 * word <= first) return kNoGroup;
    }
  }
  // The first group in [first, end), of one class, whose jobs would end past `until` if they
  // started at `now`, end if none: those before it, with shorter requests, would not. Most
  // classes fit whole or not at all (the store: 965 sizes, 10 requests).
  size_t fitting_end(size_t first, size_t end, double now, double until) const {
    if (now + requests_[end - 1] <= until) return end;
    if (!(now + requests_[first] <= until)) return first;
    return std::partition_point(requests_.begin() + first, requests_.begin() + end,
                                [&](double r) { return now + r <= until; }) -
           requests_.begin();
  }
  // The class of group g (groups of equal procs, numbered by procs), and its first group.
  size_t class_of(size_t group) const { return class_[group]; }
  size_t class_first(size_t c) const { return c == 0 ? 0 : class_end_[c - 1]; }
  size_t classes() const { return class_end_.size(); }
  // The oldest waiting job of j's group, -1 if none.
  int32_t oldest_beside(int32_t j) const { return oldest_of(group(j)); }
  // A conservative scan walks each group from its oldest waiting job: the group's id, its
  // procs and request, its oldest waiting job (-1 if none) with that job's submit time and the
  // group's cached value (valid while it has one), and the next waiting job after j in j's
  // group (-1 if none).
  size_t size() const { return groups_.size(); }
  size_t live() const { return live_.size(); }  // groups with waiting jobs
  size_t group(int32_t j) const { return group_[j - begin_]; }
  int32_t procs_of(size_t group) const { return sizes_[group]; }
  double request_of(size_t group) const { return requests_[group]; }
  int32_t first_of(size_t group) const { return groups_[group].jobs[0]; }
  int32_t oldest_of(size_t group) const {
    return live_bits_[group / 64] >> (group % 64) & 1 ? oldest_[group] : -1;
  }
  double oldest_submit(size_t group) const { return oldest_submit_[group]; }
  double cached_of(size_t group) const { return cached_[group]; }
  int32_t next_beside(int32_t j) const {
    const Group& g = groups_[group_[j - begin_]];
    for (size_t s = slot_[j - begin_] + 1; s < g.added; ++s)
      if (waits_[g.jobs[s] - begin_]) return g.jobs[s];
    return -1;
  }

 private:
  struct Group {
    std::vector<int32_t> jobs;  // in index order
    size_t first = 0;           // no job before it waits (none comes back)
    size_t added = 0;           // jobs[0, added) have arrived
    int32_t waiting = 0;
    size_t live_at = 0;  // its position in live_ while it has waiting jobs
  };
  // Word `word` of `words`, its bits outside [from, to) cleared.
  static uint64_t bits_within(const uint64_t* words, size_t word, size_t from, size_t to) {
    uint64_t bits = words[word];
    if (64 * word < from) bits &= ~uint64_t{0} << (from % 64);
    if (64 * word + 64 > to) bits &= (uint64_t{1} << (to - 64 * word)) - 1;
    return bits;
  }
  // Calls visit(k) for every bit k set in [from, to) of `words`, in order, where `summary` has
  // bit w set iff words[w] is not 0: words with none set are skipped 64 at a time (the store's
  // SJBF groups, by user, are 16,914, of which ~350 have waiting jobs).
  template <typename Visit>
  static void each_bit(const uint64_t* words, const uint64_t* summary, size_t from, size_t to,
                       Visit visit) {
    const size_t first = from / 64, end = (to + 63) / 64;  // the words of [from, to)
    for (size_t s = first / 64; 64 * s < end; ++s)
      for (uint64_t any = bits_within(summary, s, first, end); any; any &= any - 1) {
        const size_t word = 64 * s + __builtin_ctzll(any);
        for (uint64_t bits = bits_within(words, word, from, to); bits; bits &= bits - 1)
          visit(64 * word + __builtin_ctzll(bits));
      }
  }
  // each_bit() over the live groups, and over those of the buckets up to b.
  template <typename Visit>
  void each_live_bit(size_t from, size_t to, Visit visit) const {
    each_bit(live_bits_.data(), live_summary_.data(), from, to, visit);
  }
  template <typename Visit>
  void each_ending_bit(size_t b, size_t from, size_t to, Visit visit) const {
    each_bit(&ending_bits_[b * live_bits_.size()], &ending_summary_[b * live_summary_.size()], from,
             to, visit);
  }
  // Calls visit(k) for every group k in [from, to) with a waiting job whose request `ends`
  // (true up to some request, false past it): buckets [0, ending) end whole, bucket `ending`
  // in part, unless its least request does not either (where a bucket is one request, as on
  // the store, always).
  template <typename Ends, typename Visit>
  void each_live_ending(size_t from, size_t to, Ends ends, Visit visit) const {
    const size_t ending = std::partition_point(tops_.begin(), tops_.end(), ends) - tops_.begin();
    if (ending == tops_.size())
      each_live_bit(from, to, visit);
    else if (ends(bottoms_[ending]))
      each_ending_bit(ending, from, to, [&](size_t k) {
        if (ends(requests_[k])) visit(k);
      });
    else if (ending > 0)
      each_ending_bit(ending - 1, from, to, visit);
  }
  // Sets (or clears) group id's bit in live_bits_ and in ending_bits_ from its bucket on, and
  // their summaries' bits of its word.
  void mark_live(int32_t id, bool live) {
    const size_t w = id / 64;
    const uint64_t bit = uint64_t{1} << (id % 64), word_bit = uint64_t{1} << (w % 64);
    auto mark = [&](uint64_t* words, uint64_t* summary) {
      words[w] = live ? words[w] | bit : words[w] & ~bit;
      summary[w / 64] = words[w] ? summary[w / 64] | word_bit : summary[w / 64] & ~word_bit;
    };
    mark(live_bits_.data(), live_summary_.data());
    for (size_t b = bucket_[id]; b < tops_.size(); ++b)
      mark(&ending_bits_[b * live_bits_.size()], &ending_summary_[b * live_summary_.size()]);
  }
  // How many groups have procs <= p.
  size_t groups_to(int32_t p) const {
    return p < 0 ? 0 : groups_to_[std::min<size_t>(p, groups_to_.size() - 1)];
  }
  void set_oldest(int32_t id, int32_t j) {
    oldest_[id] = live_oldest_[groups_[id].live_at] = j;
    oldest_submit_[id] = live_submit_[groups_[id].live_at] = submit_[j];
  }
  // The group's oldest waiting job, found when the one before leaves.
  int32_t oldest(Group& g) {
    while (!waits_[g.jobs[g.first] - begin_]) ++g.first;
    return g.jobs[g.first];
  }
  const double* submit_;
  size_t begin_ = 0;
  std::vector<int32_t> group_, slot_;  // per job of the window: its group, its place there
  std::vector<int32_t> class_;         // per group: its class (its procs' rank among sizes)
  std::vector<size_t> class_end_;      // per class: the group after it
  std::vector<char> waits_;            // per job of the window
  std::vector<Group> groups_;          // by (procs, request)
  std::vector<int32_t> live_;          // the groups with waiting jobs
  // Per group of live_, in its order: its oldest waiting job, that job's submit time and the
  // group's cached value (key_live() reads them in one pass, with no group's arrays between).
  std::vector<int32_t> live_oldest_;
  std::vector<double> live_submit_, live_cached_;
  // Per group: its procs, request and cached value, its oldest waiting job and that job's
  // submit time, and a bit if it has one: a scan keys every group from these, close together.
  std::vector<int32_t> sizes_, oldest_;
  std::vector<double> requests_, cached_, oldest_submit_;
  std::vector<uint64_t> live_bits_;
  std::vector<uint32_t> groups_to_;  // per procs p up to the largest: the groups with procs <= p
  // At most kBuckets buckets of requests, each with its largest and least request, per group its
  // bucket, and per bucket b the bits of the live groups in buckets up to b (8, 16, 32 or 64
  // buckets: LANL-CM5 x0.25's instructions under WFP3 + EASY within 0.3%).
  static constexpr size_t kBuckets = 16;
  std::vector<double> tops_, bottoms_;
  std::vector<uint8_t> bucket_;
  std::vector<uint64_t> ending_bits_;
  // Per word of live_bits_, and per bucket per word of its ending_bits_: a bit if it has one.
  std::vector<uint64_t> live_summary_, ending_summary_;
};

// SJBF's pick without backfilling: the job of least (score, index) among the groups' oldest
// waiting jobs. A group of user u and request r scores min(capped(u), key(r)), capped(u) from
// u's history (at_least_tenth of the mean of its last two runtimes, or of its only one;
// infinite without history) and key(r) = at_least_tenth(r). So u's best is its group of least
// (key, oldest job) if that key is below capped(u), else (capped(u), u's oldest waiting job):
// a change of u's history moves one entry here instead of every group of u whose request is
// over its mean (thousands per completion on a long queue of many users). Groups without a
// user (-1) keep key(r) and are entries of their own.
class SjbfPicks {
 public:
  using Keyed = std::pair<double, int32_t>;  // (score, job)
  explicit SjbfPicks(size_t users) : users_(users) {}
  // The oldest waiting job of a group of user u (-1: no user) with key `key` was `was` and is
  // `now` (each -1 where the group had or has no waiting job); `capped` is capped(u) now.
  void move(int32_t u, double key, int32_t was, int32_t now, double capped) {
    if (u < 0) {
      if (was >= 0) picks_.erase({key, was});
      if (now >= 0) picks_.insert({key, now});
      return;
    }
    User& user = users_[u];
    if (was >= 0) user.groups.erase({key, was}), user.oldest.erase(was);
    if (now >= 0) user.groups.insert({key, now}), user.oldest.insert(now);
    rekey(u, capped);
  }
  // User u's capped score is now `capped`.
  void rekey(int32_t u, double capped) {
    User& user = users_[u];
    Keyed best = kNone;
    if (!user.groups.empty())
      best = user.groups.begin()->first < capped ? *user.groups.begin()
                                                 : Keyed{capped, *user.oldest.begin()};
    if (best == user.best) return;
    if (user.best != kNone) picks_.erase(user.best);
    if (best != kNone) picks_.insert(best);
    user.best = best;
  }
  // The job to pick, -1 if none waits.
  int32_t first() const { return picks_.empty() ? -1 : picks_.begin()->second; }

 private:
  static constexpr Keyed kNone{0, -1};
  struct User {
    std::set<Keyed> groups;    // per group with waiting jobs: (key, its oldest waiting job)
    std::set<int32_t> oldest;  // the same groups' oldest waiting jobs
    Keyed best = kNone;        // its entry in picks_
  };
  std::set<Keyed> picks_;  // each user's best, and each group's without a user
  std::vector<User> users_;
};

}  // namespace ddppo
