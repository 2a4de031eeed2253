#include "profile.hpp"

#include <algorithm>
#include <iterator>
#include <limits>

#include "bisect.hpp"

// earliest(), at_or_after() and take() are `inline` to be inlined into the calls a scan makes
// (see src/conservative_backfill.cpp).
namespace ddppo {

void Profile::reset(double now, int32_t free) {
  steps_.assign(1, {now, free});
  ++resets_, ++changes_;
  taken_.clear(), reset_at_ = changes_;
}

bool Profile::move_start(double now) {
  if (steps_.size() > 1 && steps_[1].time <= now) return false;
  steps_[0].time = now;
  taken_.clear(), reset_at_ = ++changes_;
  return true;
}

void Profile::release(double at, int32_t procs) {
  if (at == steps_.back().time)
    steps_.back().free += procs;
  else
    steps_.push_back({at, steps_.back().free + procs});
}

void Profile::lows(std::vector<Step>& out) const {
  out.assign(1, steps_[0]);
  for (const Step& s : steps_)
    if (s.free < out.back().free) out.push_back(s);
}

// Each step's longest run with at least its free procs spans from the step after the last one
// before it with fewer to the first one after it with fewer (all nearest smaller values, by a
// stack): steps in rising_ have rising free procs, and a step popped there by one with fewer
// free procs has its run end at that one (by one with as many, it is left to that one, whose
// run holds its own: each free count gets one pair).
void Profile::runs_before(double near, std::vector<std::pair<int32_t, double>>& out) const {
  out.clear();
  rising_.clear();
  for (size_t i = 0; i <= steps_.size(); ++i) {
    const bool past = i == steps_.size();
    while (!rising_.empty() && (past || steps_[rising_.back()].free >= steps_[i].free)) {
      const Step& s = steps_[rising_.back()];
      rising_.pop_back();
      const double from = steps_[rising_.empty() ? 0 : rising_.back() + 1].time;
      const double end = past ? std::numeric_limits<double>::infinity() : steps_[i].time;
      if (s.free > 0 && from < near && (past || s.free > steps_[i].free))
        out.emplace_back(s.free, end - from);
    }
    if (!past) rising_.push_back(i);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 1; k < out.size(); ++k)
    out[k].second = std::max(out[k].second, out[k - 1].second);
}

// One walk over the steps: the stretches of at least procs free that `within` looks at are
// kept (a few) for `beyond`, which then walks on only past them.
Profile::Runs Profile::runs(int32_t procs, int32_t free, double near, double until,
                            double enough) const {
  constexpr size_t kKept = 32;
  double kept_from[kKept], kept_end[kKept];
  size_t n = 0, k = 0;
  bool all_kept = true;
  Runs r{0, std::numeric_limits<double>::infinity()};
  double from, end;
  // The next stretch [from, end) from step k on with at least procs free; false if none.
  auto next_run = [&] {
    while (k < steps_.size() && steps_[k].free < procs) ++k;
    if (k == steps_.size()) return false;
    from = steps_[k].time;
    while (k < steps_.size() && steps_[k].free >= procs) ++k;
    end = k < steps_.size() ? steps_[k].time : std::numeric_limits<double>::infinity();
    return true;
  };
  while (next_run()) {
    if (from == steps_[0].time && procs <= free) r.within = end - from;
    if (from < near) r.within = std::max(r.within, std::min(end, until) - from);
    if (r.within >= enough) return {r.within, std::numeric_limits<double>::quiet_NaN()};
    if (n < kKept)
      kept_from[n] = from, kept_end[n++] = end;
    else
      all_kept = false;
    if (!(from < near)) break;
  }
  if (!all_kept) n = 0, k = 0;  // too many to keep: walk again from the start
  for (size_t i = 0; i < n; ++i)
    if (kept_end[i] - kept_from[i] > r.within) return {r.within, kept_from[i]};
  while (next_run())
    if (end - from > r.within) return {r.within, from};
  return r;
}

// The index of the earliest step from i on where a job fits, and the index of the first step
// at or after its end from there; the last step, past every running job and reservation, holds any
// job that fits the machine.
inline std::pair<size_t, size_t> Profile::earliest(size_t i, int32_t procs, double duration) const {
  for (;;) {
    while (steps_[i].free < procs) ++i;
    // Every later step that starts before start + duration must hold procs too; if one
    // does not, no start before its end can work either.
    double until = steps_[i].time + duration;
    size_t k = i + 1;
    while (k < steps_.size() && steps_[k].time < until && steps_[k].free >= procs) ++k;
    if (k == steps_.size() || steps_[k].time >= until) return {i, k};
    i = k + 1;
  }
}

// The first step at or after `t`. A long queue's reservations start near the profile's end
// (LANL-CM5 x0.5 under FCFS: 85% of them within 32 steps of the end of ~930), so the search
// walks back over the last steps before it bisects the rest: a binary search over the whole
// profile, its branches mispredicted, was a fifth of the time of a reservation. The start itself
// comes first: a job of procs not yet reserved in a scan is searched from there (under WFP3 and
// UNICEP at x0.25, a quarter of the searches, and half of the steps walked back). A profile of
// at most kWalk steps (a conservative scan by groups: ~18) is bisected without a branch on the
// comparisons: the walk's end was mispredicted about once a search.
inline size_t Profile::at_or_after(double t) const {
  constexpr size_t kWalk = 32;
  if (t <= steps_[0].time) return 0;
  size_t end = steps_.size();
  if (end <= kWalk) return bisect(steps_.data(), end, [t](const Step& s) { return s.time < t; });
  const size_t walked = end - kWalk;
  while (end > walked && steps_[end - 1].time >= t) --end;
  if (end > walked) return end;
  return std::lower_bound(steps_.begin(), steps_.begin() + walked, t,
                          [](const Step& s, double at) { return s.time < at; }) -
         steps_.begin();
}

// Takes procs from step `first` up to `until` (past its start); `next` is the first step at
// or after `until`.
inline void Profile::take(size_t first, size_t next, double until, int32_t procs) {
  ++changes_;
  if (next == steps_.size() || steps_[next].time != until)
    steps_.insert(steps_.begin() + next, {until, steps_[next - 1].free});
  Taken t{std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  for (size_t i = first; i < next; ++i) {
    t.most = std::max(t.most, steps_[i].free);
    t.least = std::min(t.least, steps_[i].free -= procs);
  }
  taken_.push_back(t);
  // A breakpoint between equal values is no rise and starts no job: drop it.
  if (steps_[next].free == steps_[next - 1].free) steps_.erase(steps_.begin() + next);
  if (first > 0 && steps_[first].free == steps_[first - 1].free)
    steps_.erase(steps_.begin() + first);
}

// A duration of 0, or one lost to rounding next to the start time, takes nothing.
void Profile::reserve_now(int32_t procs, double duration) {
  double until = steps_[0].time + duration;
  if (!(until > steps_[0].time)) return;
  auto next = std::lower_bound(steps_.begin() + 1, steps_.end(), until,
                               [](const Step& s, double t) { return s.time < t; });
  take(0, next - steps_.begin(), until, procs);
}

double Profile::reserve_earliest(int32_t procs, double duration) {
  const Slot slot = earliest_slot(procs, duration);
  reserve(slot, procs, duration);
  return slot.at;
}

void Profile::reserve(const Slot& slot, int32_t procs, double duration) {
  if (slot.at + duration > slot.at) take(slot.first, slot.next, slot.at + duration, procs);
}

// Starts the search from the latest start found since the reset for a job of as many procs
// and no longer: the profile has only lost procs since.
Profile::Slot Profile::earliest_slot(int32_t procs, double duration) {
  if (found_.size() <= static_cast<size_t>(procs)) found_.resize(procs + 1);
  Found& f = found_[procs];
  if (f.reset != resets_) f.reset = resets_, f.starts.clear();
  auto above = std::upper_bound(f.starts.begin(), f.starts.end(), duration,
                                [](double d, const auto& s) { return d < s.first; });
  double from = above == f.starts.begin() ? steps_[0].time : std::prev(above)->second;
  auto [first, next] = earliest(at_or_after(from), procs, duration);
  double at = steps_[first].time;
  // Kept per procs: (duration, start) pairs, both rising; this one replaces the pairs of
  // longer jobs that start no later.
  auto stale = above;
  while (stale != f.starts.end() && stale->second <= at) ++stale;
  above = f.starts.erase(above, stale);
  if (above != f.starts.begin() && std::prev(above)->first == duration)
    std::prev(above)->second = at;
  else if (above == f.starts.begin() || std::prev(above)->second < at)
    f.starts.insert(above, {duration, at});
  return {at, first, next};
}

}  // namespace ddppo
