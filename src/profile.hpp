// Free procs over future time for conservative backfilling: a step function that holds
// steps[k].free on [steps[k].time, steps[k+1].time) and the last value from the last time on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace ddppo {

class Profile {
 public:
  // An empty profile: `free` procs from `now` on.
  void reset(double now, int32_t free);
  // Moves the start to `now`, the free procs held there, unless a step starts in (start,
  // now]; returns whether it moved.
  bool move_start(double now);
  // A running job's procs come back at `at` (called in non-decreasing order of `at`, before
  // any reservation).
  void release(double at, int32_t procs);
  // Whether `procs` are free at the profile's start and over [start, start + duration).
  // Inline: a conservative scan asks it of every job it walks.
  bool fits_now(int32_t procs, double duration) const {
    const double until = steps_[0].time + duration;
    if (steps_[0].free < procs) return false;
    for (size_t k = 1; k < steps_.size() && steps_[k].time < until; ++k)
      if (steps_[k].free < procs) return false;
    return true;
  }
  // The start of the first step with fewer than `procs` free, infinity if none, -infinity if
  // the first: a job fits now iff start + duration <= that (fits_now() for many durations).
  double fits_until(int32_t procs) const {
    if (steps_[0].free < procs) return -std::numeric_limits<double>::infinity();
    for (size_t k = 1; k < steps_.size(); ++k)
      if (steps_[k].free < procs) return steps_[k].time;
    return std::numeric_limits<double>::infinity();
  }
  // Takes `procs` over [start, start + duration).
  void reserve_now(int32_t procs, double duration);
  // The earliest step start at which `procs` are free at that instant and over all of
  // [start, start + duration), and where to take them from: valid until the profile changes.
  struct Slot {
    double at;
    size_t first, next;
  };
  Slot earliest_slot(int32_t procs, double duration);
  // Takes `procs` for `duration` from the slot's start.
  void reserve(const Slot& slot, int32_t procs, double duration);
  // Both: takes them from the earliest start; returns that start.
  double reserve_earliest(int32_t procs, double duration);

  struct Step {
    double time;
    int32_t free;
  };
  // The least free procs from the start on: the first step, then every step with fewer free
  // procs than all before it. fits_now(procs, duration) holds iff every one of them that
  // starts before start + duration holds procs: a few checks per job where many jobs are
  // asked against one profile.
  void lows(std::vector<Step>& out) const;
  // For jobs of `procs`: `within`, the longest run (`free` procs permitting) from the start,
  // or from a rise before `near` up to `until` at most, with at least procs free throughout;
  // `beyond`, the first rise into a longer one (unbounded), before which no longer job of
  // those procs can start. The walk stops once `within` reaches `enough`: then `within` is
  // at least that, maybe not the longest, and `beyond` is NaN.
  struct Runs {
    double within, beyond;
  };
  Runs runs(int32_t procs, int32_t free, double near, double until,
            double enough = std::numeric_limits<double>::infinity()) const;
  // For every least free f at once, the longest run with at least f procs free throughout that
  // begins before `near` (unbounded): `out` gets (f, length) pairs by f falling, each length the
  // longest for that f or any higher. So a job of `procs` finds no run before near as long as
  // its duration where the last pair with f >= procs is shorter, or there is none: runs() with
  // `until` infinite, for every procs.
  void runs_before(double near, std::vector<std::pair<int32_t, double>>& out) const;
  // Counts the resets, reservations and moves: equal counts, equal profiles.
  uint64_t changes() const { return changes_; }
  // Whether the profile, as changes() counted `since`, had at least `procs` free exactly where
  // it has now: every reservation since left at least procs free where it took procs, or had
  // fewer than procs there before; so runs(procs, ...) is as it was then.
  bool same_runs(int32_t procs, uint64_t since) const {
    if (since < reset_at_) return false;
    for (size_t i = since - reset_at_; i < taken_.size(); ++i)
      if (procs > taken_[i].least && procs <= taken_[i].most) return false;
    return true;
  }

 private:
  size_t at_or_after(double t) const;
  std::pair<size_t, size_t> earliest(size_t i, int32_t procs, double duration) const;
  void take(size_t first, size_t next, double until, int32_t procs);

  std::vector<Step> steps_;
  mutable std::vector<size_t> rising_;  // runs_before()'s stack of steps
  // Per procs, the earliest starts found since the reset (`reset` tells which) for jobs of
  // those procs, as (duration, start) pairs with both rising: the profile has only lost procs
  // since, so no earlier start fits a job of those procs and a duration at least that.
  struct Found {
    uint64_t reset = 0;
    std::vector<std::pair<double, double>> starts;
  };
  std::vector<Found> found_;
  uint64_t resets_ = 0, changes_ = 0;
  // Per change since the last reset (or move, which counts as one), at changes() = reset_at_
  // + its index + 1: the least free procs it left and the most it found where it took procs
  // (a move: all procs).
  struct Taken {
    int32_t least, most;
  };
  std::vector<Taken> taken_;
  uint64_t reset_at_ = 0;
};

}  // namespace ddppo
