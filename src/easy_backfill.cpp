// EASY backfilling (Lifka 1995) for the Simulator: the shadow time, the extra procs, and the
// scans over the waiting-job indexes (docs/simulation.md, "Backfilling while H waits").
#include <algorithm>
#include <limits>

#include "simulator.hpp"

namespace ddppo {

// EASY (Lifka 1995): the shadow time S is when the committed job H would fit if running
// jobs ended at their estimates; `extra` procs are free at S beyond what H needs.
void Simulator::easy_scan() {
  Shadow s = easy_shadow();
  if (estimate_ == Estimate::kRequest && easy_holds(s)) return;
  if (static_order())
    scan_in_rank_order(s);
  else
    scan_candidates(s);
  easy_head_ = committed_, easy_ended_ = ended_, easy_arrived_ = next_arrival_, easy_shadow_ = s;
}

// Whether no waiting job can start, known from the last scan, which left none that could: with
// the same committed job and no completion since, the free procs are those it ended with
// (while a job is committed, jobs start only in scans; agent backfilling never comes here),
// and S is the same or now (a running job's estimated end, passed, counts as now). So where
// extra is not larger, a job that could not start then cannot now (now + its request, over S
// then, is over S now: in the second case, its request is at least least_request_, since a
// job of request 0 that fitted the free procs started then), and only the jobs that arrived
// since might start (on LANL-CM5 x0.25 under WFP3, 2 in 7 scans end here).
bool Simulator::easy_holds(const Shadow& s) {
  if (committed_ != easy_head_ || ended_ != easy_ended_ || s.extra > easy_shadow_.extra ||
      !(s.time == easy_shadow_.time || (s.time == now_ && now_ + least_request_ > now_)))
    return false;
  for (; easy_arrived_ < next_arrival_; ++easy_arrived_) {
    if (easy_allows(static_cast<int32_t>(easy_arrived_), s)) return false;
  }
  return true;
}

// S and extra at now, computed once per scan.
Simulator::Shadow Simulator::easy_shadow() {
  const std::vector<Running>& ends = estimated_ends();
  const int32_t need = w_.procs[committed_];
  int32_t avail = free_;
  Shadow s{now_, 0};
  size_t k = 0;
  while (avail < need) {
    s.time = std::max(ends[k].estimated_end, now_);
    avail += w_.procs[ends[k++].job];
  }
  for (; k < ends.size() && std::max(ends[k].estimated_end, now_) == s.time; ++k)
    avail += w_.procs[ends[k].job];
  s.extra = avail - need;
  return s;
}

// J may start if it fits now and ends by the shadow time or fits in the extra procs.
bool Simulator::admit(int32_t job, Shadow& s) const {
  if (now_ + estimate(job) <= s.time) return true;
  if (w_.procs[job] > s.extra) return false;
  s.extra -= w_.procs[job];
  return true;
}

// Every job the index gives starts.
void Simulator::scan_in_rank_order(Shadow& s) {
  for (int32_t j; (j = index_->next(free_, s.extra, now_, s.time)) >= 0;) {
    admit(j, s);  // it passes: this takes its procs from extra where it runs past S
    start(j);
  }
}

// Free procs and extra only fall during a scan: only the jobs that could start as it began
// might, and few of them do; in a group, only its oldest. So each round drops those that no
// longer can and takes the first of the others in policy order (its group's next oldest then
// joins), until none is left. The first round drops none: each_oldest_fitting() made the same
// test. The candidates stay in the groups' order, by procs: after a start, those past the free
// procs go at once (on LANL-CM5 x0.25 under WFP3, two in three of those a later round would
// test). The first in policy order is the least (key, job), or under WFP3 one whose key is
// within close_keys() of the least key and comes before it by score: before() agrees with the
// order of the exact scores, so its first among those is the first of all.
void Simulator::scan_candidates(Shadow& s) {
  candidates_.clear();
  auto candidate = [&](int32_t j, double submit, double cached) {
    candidates_.push_back(keyed(j, submit, cached));
  };
  if (estimate_ == Estimate::kPredicted)
    groups_->each_oldest_fitting(free_, s.extra, now_, s.time, candidate,
                                 [&](size_t g) { return group_prediction(g); });
  else
    groups_->each_oldest_fitting(free_, s.extra, now_, s.time, candidate);
  // A local view: the loops then keep the array and its length in registers.
  Keyed* c = candidates_.data();
  size_t n = candidates_.size();
  for (bool tested = true; n > 0; tested = false) {
    size_t best = 0;  // the least (key, job) of those kept so far
    double second = std::numeric_limits<double>::infinity();  // the least key of the others
    if (tested) {
      for (size_t i = 1; i < n; ++i)
        if (c[i] < c[best])
          second = c[best].first, best = i;
        else
          second = std::min(second, c[i].first);
    } else {
      const size_t fit =
          std::partition_point(c, c + n,
                               [&](const Keyed& k) { return w_.procs[k.second] <= free_; }) -
          c;
      n = 0;
      for (size_t i = 0; i < fit; ++i) {
        if (!easy_allows(c[i].second, s)) continue;  // nor later in this scan: it leaves them
        c[n] = c[i];
        if (c[n] < c[best])
          second = c[best].first, best = n;
        else if (n > 0)
          second = std::min(second, c[n].first);
        ++n;
      }
      if (n == 0) return;
    }
    // WFP3's keys are at most 0: a key close to the least one is at most this (twice the
    // tolerance, for the rounding of the product); mostly no other is.
    if (const double close = c[best].first * (1 - 2 * kWfp3Close);
        policy_ == Policy::kWfp3 && second <= close) {
      for (size_t i = 0; i < n; ++i)
        if (c[i].first <= close && before(c[i], c[best])) best = i;
    }
    const int32_t j = c[best].second;
    admit(j, s);  // it passes: this takes its procs from extra where it runs past S
    start(j);
    if (const int32_t next = groups_->oldest_beside(j); next >= 0) {
      c[best] = keyed(next);
    } else {
      std::copy(c + best + 1, c + n, c + best);
      --n;
    }
  }
}

}  // namespace ddppo
