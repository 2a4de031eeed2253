// Agent backfilling for the Simulator (the RL environment's env.agent_backfill;
// docs/simulation.md, "Decision model"): a backfill scan that could start a job becomes a
// backfill decision, where the caller starts the allowed jobs of its choice one at a time, or
// stops. Allowed are the jobs the configured backfill may start now without breaking its
// guarantee, so the heuristic's scan is the choice of the first allowed job in policy order
// at every decision.
#include <stdexcept>

#include "simulator.hpp"

namespace ddppo {

// One backfill scan at now (false), or with agent backfilling a stop at a backfill decision
// (true) when some waiting job is allowed to start.
bool Simulator::scan_or_decide() {
  if (!agent_backfill_) {
    backfill_scan();
    return false;
  }
  if (backfill_ == Backfill::kNone) return false;
  if (backfill_ == Backfill::kEasy && waiting_fitting() > 0) shadow_ = easy_shadow();
  return find_backfills();
}

// Whether some waiting job is allowed now; sets backfilling_ to that.
bool Simulator::find_backfills() {
  backfilling_ = false;
  if (waiting_fitting() == 0) return false;  // no waiting job fits the free procs
  if (backfill_ == Backfill::kConservative) plan_backfills();
  for (int32_t j : waiting())
    if (backfill_allows(j)) return backfilling_ = true;
  return false;
}

// Conservative: the committed job is reserved at its earliest start (the shadow time); then
// each waiting job in policy order is allowed if it fits now beside the reservations made so
// far, and is reserved at its earliest start (now, if allowed). So a job is allowed iff
// starting it now delays the reservation of no job ahead of it. Past the last job that fits
// the free procs, none is allowed and none needs a reservation.
void Simulator::plan_backfills() {
  ++decisions_;
  shadow_ = {plan_from_scratch(), 0};
  std::vector<int32_t> order = waiting();
  sort_by_policy(order);
  size_t through = order.size();
  while (through > 0 && w_.procs[order[through - 1]] > free_) --through;
  for (size_t k = 0; k < through; ++k) {
    const int32_t j = order[k];
    const double duration = estimate(j);
    if (w_.procs[j] <= free_ && profile_.fits_now(w_.procs[j], duration))
      allowed_[j - begin_] = decisions_;
    profile_.reserve_earliest(w_.procs[j], duration);
  }
}

// EASY: it fits the free procs and ends by the shadow time or fits in the extra procs;
// conservative: the last plan_backfills() allowed it (and it still fits the free procs).
bool Simulator::backfill_allows(int32_t job) const {
  if (left(job) || w_.procs[job] > free_) return false;
  if (backfill_ == Backfill::kConservative) return allowed_[job - begin_] == decisions_;
  return easy_allows(job, shadow_);
}

void Simulator::backfill_at(size_t position) {
  const std::vector<int32_t>& queue = waiting();
  if (!backfilling_ || position >= queue.size() || !backfill_allows(queue[position]))
    throw std::invalid_argument("no backfill decision allows that job");
  const int32_t job = queue[position];
  if (backfill_ == Backfill::kEasy) admit(job, shadow_);  // takes extra if it runs past S
  queue_.erase(queue_.begin() + position);
  start(job);
  if (find_backfills()) return;
  advance();  // none is allowed any more: the scan ends
  settle();
}

void Simulator::stop_backfill() {
  if (!backfilling_) throw std::invalid_argument("not at a backfill decision");
  backfilling_ = false;
  advance();
  settle();
}

}  // namespace ddppo
