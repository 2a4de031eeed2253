// Free procs over future time for conservative backfilling: a step function that holds
// steps[k].free on [steps[k].time, steps[k+1].time) and the last value from the last time on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddppo {

class Profile {
 public:
  // An empty profile: `free` procs from `now` on.
  void reset(double now, int32_t free);
  // A running job's procs come back at `at` (called in non-decreasing order of `at`).
  void release(double at, int32_t procs);
  // Whether `procs` are free at the profile's start and over [start, start + duration).
  bool fits_now(int32_t procs, double duration) const;
  // Takes `procs` over [at, at + duration).
  void reserve(double at, double duration, int32_t procs);
  // Takes `procs` for `duration` from the earliest step start at which they are free at that
  // instant and over all of [start, start + duration); returns that start.
  double reserve_earliest(int32_t procs, double duration);

 private:
  struct Step {
    double time;
    int32_t free;
  };
  size_t earliest(int32_t procs, double duration) const;
  size_t split(size_t from, double at);
  void take(size_t first, double until, int32_t procs);

  std::vector<Step> steps_;
};

}  // namespace ddppo
