// EASY backfilling (Lifka 1995) for the Simulator: the shadow time, the extra procs, and the
// scans over the waiting-job indexes (docs/simulation.md, "Backfilling while H waits").
#include <algorithm>

#include "simulator.hpp"

namespace ddppo {

// EASY (Lifka 1995): the shadow time S is when the committed job H would fit if running
// jobs ended at their estimates; `extra` procs are free at S beyond what H needs.
void Simulator::easy_scan() {
  Shadow s = easy_shadow();
  if (estimate_ == Estimate::kPredicted)
    scan_queue(s);
  else if (static_order())
    scan_in_rank_order(s);
  else
    scan_candidates(s);
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

// Free procs and extra only fall during a scan, so a job the index passes over cannot start
// in it, and every job it gives starts.
void Simulator::scan_in_rank_order(Shadow& s) {
  index_->begin_scan();
  for (int32_t j; (j = index_->next(free_, s.extra, now_, s.time)) >= 0;) {
    index_->passed(j);
    admit(j, s);  // it passes: this takes its procs from extra where it runs past S
    start(j);
  }
}

// Free procs and extra only fall during a scan: only the jobs that could start as it began
// might, and few of them do; in a group, only its oldest. So each round takes the first of
// them in policy order that still can (its group's next oldest then joins), until none can.
void Simulator::scan_candidates(Shadow& s) {
  auto can = [&](int32_t j) {
    return w_.procs[j] <= free_ && (w_.procs[j] <= s.extra || now_ + estimate(j) <= s.time);
  };
  candidates_.clear();
  groups_->each_oldest([&](int32_t j) {
    if (can(j)) candidates_.push_back(keyed(j));
  });
  for (;;) {
    size_t best = candidates_.size();
    for (size_t i = 0; i < candidates_.size(); ++i)
      if (can(candidates_[i].second) &&
          (best == candidates_.size() || before(candidates_[i], candidates_[best])))
        best = i;
    if (best == candidates_.size()) return;
    const int32_t j = candidates_[best].second;
    admit(j, s);  // it passes: this takes its procs from extra where it runs past S
    start(j);
    const int32_t next = groups_->oldest_beside(j);
    if (next >= 0) {
      candidates_[best] = keyed(next);
    } else {
      candidates_[best] = candidates_.back();
      candidates_.pop_back();
    }
  }
}

// With predicted estimates, which change while jobs wait, the queue itself (passing over the
// jobs that left it, rather than compacting it at every scan).
void Simulator::scan_queue(Shadow& s) {
  if (policy_ != Policy::kFcfs) {
    // Free procs only fall during a scan: only the jobs that fit now matter.
    std::vector<int32_t> order;
    for (int32_t j : queue_)
      if (w_.procs[j] <= free_ && !left(j)) order.push_back(j);
    sort_by_policy(order);
    for (int32_t j : order)
      if (w_.procs[j] <= free_ && admit(j, s)) start(j);
    return;
  }
  // FCFS order is queue order: scan the queue itself, and stop once no job left in it can
  // fit (`fitting` never undercounts the unvisited jobs that need at most free procs).
  int32_t fitting = waiting_fitting();
  for (size_t i = 0; i < queue_.size() && fitting > 0; ++i) {
    int32_t j = queue_[i];
    if (w_.procs[j] > free_ || left(j)) continue;
    if (admit(j, s)) {
      start(j);
      fitting = waiting_fitting();
    } else {
      --fitting;
    }
  }
}

}  // namespace ddppo
