// Free procs over future time for conservative backfilling: a step function that holds
// vals[i] on [times[i], times[i+1]) and vals.back() from times.back() on.
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
  // The earliest segment start at which `procs` are free at that instant and over all of
  // [start, start + duration).
  double earliest(int32_t procs, double duration) const;
  // Whether `procs` are free at the profile's start and over [start, start + duration).
  bool fits_now(int32_t procs, double duration) const;
  // Takes `procs` over [at, at + duration).
  void reserve(double at, double duration, int32_t procs);

 private:
  size_t split(double at);

  std::vector<double> times_;
  std::vector<int32_t> vals_;
};

}  // namespace ddppo
