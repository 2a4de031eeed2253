#include "profile.hpp"

#include <algorithm>

namespace ddppo {

void Profile::reset(double now, int32_t free) { steps_.assign(1, {now, free}); }

void Profile::release(double at, int32_t procs) {
  if (at == steps_.back().time)
    steps_.back().free += procs;
  else
    steps_.push_back({at, steps_.back().free + procs});
}

bool Profile::fits_now(int32_t procs, double duration) const {
  double until = steps_[0].time + duration;
  if (steps_[0].free < procs) return false;
  for (size_t k = 1; k < steps_.size() && steps_[k].time < until; ++k)
    if (steps_[k].free < procs) return false;
  return true;
}

// The index of the earliest step where a job fits; the last step, past every running job
// and reservation, holds any job that fits the machine.
size_t Profile::earliest(int32_t procs, double duration) const {
  size_t i = 0;
  for (;;) {
    while (steps_[i].free < procs) ++i;
    // Every later step that starts before start + duration must hold procs too; if one
    // does not, no start before its end can work either.
    double until = steps_[i].time + duration;
    size_t k = i + 1;
    while (k < steps_.size() && steps_[k].time < until && steps_[k].free >= procs) ++k;
    if (k == steps_.size() || steps_[k].time >= until) return i;
    i = k + 1;
  }
}

// Makes `at` (>= steps_[from].time) a step start and returns its index.
size_t Profile::split(size_t from, double at) {
  auto it = std::upper_bound(steps_.begin() + from, steps_.end(), at,
                             [](double t, const Step& s) { return t < s.time; });
  size_t i = it - steps_.begin() - 1;
  if (steps_[i].time == at) return i;
  steps_.insert(it, {at, steps_[i].free});
  return i + 1;
}

// Takes procs from step `first` up to `until`, which split() made step starts.
void Profile::take(size_t first, double until, int32_t procs) {
  size_t last = split(first, until);
  for (size_t i = first; i < last; ++i) steps_[i].free -= procs;
  // A breakpoint between equal values is no rise and starts no job: drop it.
  if (last < steps_.size() && steps_[last].free == steps_[last - 1].free)
    steps_.erase(steps_.begin() + last);
  if (first > 0 && steps_[first].free == steps_[first - 1].free)
    steps_.erase(steps_.begin() + first);
}

void Profile::reserve(double at, double duration, int32_t procs) {
  if (duration > 0) take(split(0, at), at + duration, procs);
}

double Profile::reserve_earliest(int32_t procs, double duration) {
  size_t i = earliest(procs, duration);
  double at = steps_[i].time;
  if (duration > 0) take(i, at + duration, procs);
  return at;
}

}  // namespace ddppo
