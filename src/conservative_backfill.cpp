// Conservative backfilling (Mu'alem and Feitelson 2001) for the Simulator: every waiting job
// ahead in priority order holds a reservation on the free-procs profile, and a job starts now
// only if that delays none of them (docs/simulation.md, "Backfilling while H waits").
#include <algorithm>
#include <limits>

#include "simulator.hpp"

namespace ddppo {

// Marks as hopeful the waiting jobs that can start now beside the profile and, if there are
// any, puts the waiting jobs into ranked_ in policy order at now (FCFS: always); returns one
// past the last hopeful job's position there (0 if none).
size_t Simulator::rank_hopeful() {
  // can_start_now() for every waiting job, from the profile's lows.
  profile_.lows(lows_);
  bool any = false;
  for (int32_t j : waiting()) {
    const int32_t procs = w_.procs[j];
    const double until = now_ + estimate(j);
    bool fits = procs <= free_ && procs <= lows_[0].free;
    for (size_t k = 1; fits && k < lows_.size() && lows_[k].time < until; ++k)
      fits = lows_[k].free >= procs;
    hopeful_[j - begin_] = fits ? scan_ : 0;
    any |= fits;
  }
  if (policy_ == Policy::kFcfs) {  // queue order, kept for the next scan's plan_holds()
    ranked_.clear();
    for (int32_t j : waiting()) ranked_.emplace_back(0, j);
  } else if (any) {
    rerank();
  }
  if (!any) return 0;
  size_t through = ranked_.size();
  while (!hopeful(ranked_[through - 1].second)) --through;
  return through;
}

// The profile of the running jobs with the committed job's reservation; returns its start.
double Simulator::plan_from_scratch() {
  profile_.reset(now_, free_);
  for (const Running& r : estimated_ends())
    profile_.release(std::max(r.estimated_end, now_), w_.procs[r.job]);
  planned_ = 0;
  return profile_.reserve_earliest(w_.procs[committed_], estimate(committed_));
}

// Whether the last scan's plan is the one a scan from scratch would make now, up to the jobs
// that arrived since: under FCFS with requests, the same committed job, no start or
// completion since, and no reservation or step of the profile come due. Then the profile from
// now on is the same, and every job that could not start then still cannot.
bool Simulator::plan_holds() {
  return policy_ == Policy::kFcfs && estimate_ == Estimate::kRequest && committed_ == plan_head_ &&
         started_ == plan_started_ && ended_ == plan_ended_ && now_ < plan_earliest_ &&
         profile_.move_start(now_);
}

// Puts the jobs that arrived since the last scan at the end of ranked_ (queue order) and marks
// those that can start now; returns one past the last of them there (0 if none).
size_t Simulator::rank_arrivals() {
  size_t through = 0;
  for (size_t i = plan_arrivals_; i < next_arrival_; ++i) {
    const int32_t j = static_cast<int32_t>(i);
    ranked_.emplace_back(0, j);
    if (can_start_now(j)) hopeful_[j - begin_] = scan_, through = ranked_.size();
  }
  return through;
}

// Runs the reservations of the jobs in policy order that a plan lacks, through the last that
// might start now; a plan that still holds is extended, not made again.
void Simulator::conservative_scan() {
  ++scan_;
  size_t end;
  if (plan_holds()) {
    end = rank_arrivals();
  } else {
    plan_earliest_ = plan_from_scratch();
    // Reservations only take procs away, so a job that cannot start now beside the
    // reservations made so far never starts in this scan: the "hopeful" jobs are those that
    // still might, and past the last of them in policy order nothing else can start.
    end = rank_hopeful();
  }
  // ranked_[end - 1] is the last hopeful job not yet found unable to start. `touched`: the
  // earliest time the profile or the free procs changed since it was last found still able
  // to start; later changes leave it able to.
  double touched = std::numeric_limits<double>::infinity();
  for (size_t k = planned_; k < end; ++k) {
    int32_t j = ranked_[k].second;
    const double duration = estimate(j);
    if (hopeful(j) && can_start_now(j)) {
      start(j);
      if (w_.runtime[j] > 0) profile_.reserve_now(w_.procs[j], duration);
      touched = now_;
    } else {
      double at = profile_.reserve_earliest(w_.procs[j], duration);
      plan_earliest_ = std::min(plan_earliest_, at);
      if (duration > 0) touched = std::min(touched, at);
    }
    while (k + 1 < end) {
      int32_t last = ranked_[end - 1].second;
      if (touched > now_ && touched >= now_ + estimate(last)) break;
      if (can_start_now(last)) {
        touched = std::numeric_limits<double>::infinity();
        break;
      }
      do --end;
      while (end > k + 1 && !hopeful(ranked_[end - 1].second));
      touched = now_;  // the new last job has not been checked against what changed
    }
  }
  planned_ = std::max(planned_, end);
  plan_head_ = committed_, plan_started_ = started_, plan_ended_ = ended_;
  plan_arrivals_ = next_arrival_;
}

bool Simulator::can_start_now(int32_t job) const {
  return w_.procs[job] <= free_ && profile_.fits_now(w_.procs[job], estimate(job));
}

}  // namespace ddppo
