#include "profile.hpp"

#include <algorithm>

namespace ddppo {

void Profile::reset(double now, int32_t free) {
  times_.assign(1, now);
  vals_.assign(1, free);
}

bool Profile::fits_now(int32_t procs, double duration) const {
  double until = times_[0] + duration;
  if (vals_[0] < procs) return false;
  for (size_t k = 1; k < times_.size() && times_[k] < until; ++k)
    if (vals_[k] < procs) return false;
  return true;
}

void Profile::release(double at, int32_t procs) {
  if (at == times_.back()) {
    vals_.back() += procs;
  } else {
    times_.push_back(at);
    vals_.push_back(vals_.back() + procs);
  }
}

double Profile::earliest(int32_t procs, double duration) const {
  size_t i = 0;
  while (true) {
    if (vals_[i] < procs) {
      ++i;
      continue;
    }
    // Every later segment that starts before start + duration must hold procs too; if one
    // does not, no start before its end can work either.
    double until = times_[i] + duration;
    size_t k = i + 1;
    while (k < times_.size() && times_[k] < until && vals_[k] >= procs) ++k;
    if (k == times_.size() || times_[k] >= until) return times_[i];
    i = k + 1;
  }
}

// Makes `at` a segment start and returns its index.
size_t Profile::split(double at) {
  size_t i = std::upper_bound(times_.begin(), times_.end(), at) - times_.begin() - 1;
  if (times_[i] == at) return i;
  times_.insert(times_.begin() + i + 1, at);
  vals_.insert(vals_.begin() + i + 1, vals_[i]);
  return i + 1;
}

void Profile::reserve(double at, double duration, int32_t procs) {
  if (duration <= 0) return;
  size_t first = split(at);
  size_t last = split(at + duration);
  for (size_t i = first; i < last; ++i) vals_[i] -= procs;
}

}  // namespace ddppo
