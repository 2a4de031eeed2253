#include "simulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>

#include "metrics.hpp"
#include "nearly_sorted.hpp"
#include "profile.hpp"

namespace ddppo {

namespace {
constexpr double kNotStarted = std::numeric_limits<double>::quiet_NaN();
// How many arrivals ahead apply_events() has the index bring a job's slots into the cache.
constexpr size_t kPrefetchAhead = 8;
}  // namespace

Simulator::Simulator(const Workload& w, size_t begin, size_t end, int32_t machine_procs,
                     Policy policy, Backfill backfill, Estimate estimate, AgentChoices agent)
    : w_(w),
      begin_(begin),
      end_(std::min(end, w.size)),
      machine_(machine_procs),
      policy_(policy),
      backfill_(backfill),
      estimate_(estimate),
      free_(machine_procs),
      next_arrival_(begin),
      agent_backfill_(agent.backfill),
      any_rule_(agent.rules) {
  if (machine_ <= 0) throw std::invalid_argument("machine size must be positive");
  if (begin_ > end_) throw std::invalid_argument("window start is past the end of the trace");
  arrivals_end_ = end_;
  start_.assign(end_ - begin_, kNotStarted);
  started_jobs_.reserve(end_ - begin_);
  waiting_by_procs_.assign(machine_ + 1, 0);
  if (backfill_ == Backfill::kConservative || any_rule_) {  // conservative scans' only
    hopeful_.resize(end_ - begin_);
    listed_.resize(end_ - begin_);
  }
  cached_.resize(end_ - begin_);
  if (agent_backfill_) allowed_.resize(end_ - begin_);
  for (size_t j = begin_; j < end_; ++j) {
    if (w_.procs[j] <= 0 || w_.procs[j] > machine_ || !(w_.runtime[j] >= 0) ||
        !(w_.requested_time[j] >= 0))
      throw std::invalid_argument("job " + std::to_string(w_.id[j]) +
                                  " has procs outside 1..machine or a negative time");
    longest_request_ = std::max(longest_request_, w_.requested_time[j]);
    if (w_.requested_time[j] > 0) least_request_ = std::min(least_request_, w_.requested_time[j]);
    if (j > begin_ && w_.submit[j] < w_.submit[j - 1])
      throw std::invalid_argument("jobs are not ordered by submit time");
    cached_[j - begin_] = cached_of(j);
  }
  near_width_ = longest_request_ / 3;
  many_sizes_ = (backfill_ == Backfill::kConservative || any_rule_) && window_has_many_sizes();
  groups_hold_many_ = many_sizes_ && estimate_ == Estimate::kRequest &&
                      (policy_ == Policy::kSjf || any_rule_) && window_groups_hold_many();
  // With rule actions, SJBF may become the order at any decision: its predictions need the
  // whole history.
  if (policy_ == Policy::kSjbf || estimate_ == Estimate::kPredicted || any_rule_)
    predictions_.emplace(w_, begin_, end_, estimate_ == Estimate::kPredicted);
  make_index();
  now_ = begin_ < end_ ? w_.submit[begin_] : 0;
  settle();
}

double Simulator::cached_of(size_t j) const {
  switch (policy_) {
    case Policy::kUnicep:
      return unicep_divisor(w_, j);
    case Policy::kWfp3:
      return w_.procs[j] / std::pow(at_least_tenth(w_.requested_time[j]), 3.0);
    default:
      return score(policy_, w_, j, 0);  // sjbf: unused
  }
}

// Whether the window holds more than kIndexPlanSizes sizes, counted only until there are that
// many.
bool Simulator::window_has_many_sizes() const {
  std::vector<char> seen(machine_ + 1);
  size_t sizes = 0;
  for (size_t j = begin_; j < end_ && sizes <= kIndexPlanSizes; ++j)
    sizes += !std::exchange(seen[w_.procs[j]], 1);
  return sizes > kIndexPlanSizes;
}

// Whether the window's jobs average at least kManyJobsPerGroup to a group of equal procs and
// request, its groups counted only until there are too many (a sort of the window's jobs took
// 4-8% of SJF's run on lublin_256 and HPC2N).
bool Simulator::window_groups_hold_many() const {
  struct KindHash {
    size_t operator()(const std::pair<int32_t, double>& k) const {
      return std::hash<double>{}(k.second) * 31 + static_cast<size_t>(k.first);
    }
  };
  std::unordered_set<std::pair<int32_t, double>, KindHash> kinds;
  const size_t most = (end_ - begin_) / kManyJobsPerGroup;
  for (size_t j = begin_; j < end_ && kinds.size() <= most; ++j)
    kinds.emplace(w_.procs[j], w_.requested_time[j]);
  return kinds.size() <= most;
}

void Simulator::make_index() {
  index_.reset();
  groups_.reset();
  const bool grouped = !static_order() || plans_by_groups();
  const bool predicted = estimate_ == Estimate::kPredicted;
  if (static_order())
    index_.emplace(w_.procs, w_.requested_time, begin_, end_,
                   policy_ == Policy::kFcfs ? nullptr : cached_.data(),
                   grouped ? WaitingIndex::Scans::kNone : index_scans(),
                   predicted ? predictions_->history().user_indexes().data() : nullptr);
  if (grouped)
    groups_.emplace(groups_by_user() ? w_.user : nullptr, w_.procs, w_.requested_time, w_.submit,
                    cached_.data(), begin_, end_);
  group_users_.clear();
  sjbf_picks_.reset();
  head_tournament_.reset();
  if ((policy_ == Policy::kWfp3 || policy_ == Policy::kUnicep) && backfill_ == Backfill::kNone &&
      groups_->size() > kTournamentGroups) {  // else no pick would ask it
    std::vector<double> slopes, cached;
    for (size_t g = 0; g < groups_->size(); ++g) {
      cached.push_back(groups_->cached_of(g));
      slopes.push_back(policy_ == Policy::kWfp3 ? std::cbrt(cached.back()) : 1 / cached.back());
    }
    head_tournament_.emplace(std::move(slopes), std::move(cached));
  }
  ordered_heads_.clear();
  user_groups_.clear();
  // The groups' heads in order for the conservative scans that walk them (FCFS's, SJF's and
  // F1's keys never change; SJBF's only as its users' histories do). EASY picks seldom (LANL-CM5
  // x0.5: 1 job in 4; its scans key their candidates): there, moving a user's groups at each
  // completion cost more (18% of instructions) than the picks it saves, and so does SjbfPicks'
  // upkeep (CPU time, LANL-CM5 x0.5 1.57M -> 1.24M jobs/s, x0.25 1.19M -> 1.05M, the store's first
  // 1M jobs 0.53M-0.59M -> 0.50M).
  keep_heads_ = groups_ && backfill_ == Backfill::kConservative &&
                (static_order() || policy_ == Policy::kSjbf);
  // A conservative scan finds the groups that fit now band by band of procs where classes hold
  // few groups (the store: 8.3 a class); with hundreds a class (LANL-CM5: 2,779 groups of 6
  // sizes), by one search per class (the bands cost 8-12% there, x0.25).
  fit_by_bands_ = groups_ && groups_->size() <= kBandGroupsPerClass * groups_->classes();
  if (index_ && predicted)
    for (size_t u = 0; u < predictions_->history().users(); ++u)
      index_->user_mean(static_cast<int32_t>(u), user_mean(static_cast<int32_t>(u)));
  if (groups_ && groups_by_user())
    for (size_t g = 0; g < groups_->size(); ++g)
      group_users_.push_back(predictions_->history().user_index(groups_->first_of(g)));
  const int32_t users =
      group_users_.empty() ? 0 : *std::max_element(group_users_.begin(), group_users_.end()) + 1;
  if (tracks_user_groups()) {
    user_groups_.resize(users);
    user_at_.assign(groups_->size(), 0);
  }
  if (predicted_groups()) group_predictions_.assign(groups_->size(), 0);
  if (policy_ != Policy::kSjbf) return;
  if (backfill_ == Backfill::kNone) sjbf_picks_.emplace(users);
  if (!keep_heads_) return;
  user_capped_.resize(users);
  for (int32_t u = 0; u < users; ++u) user_capped_[u] = sjbf_capped(u);
  capped_jobs_.assign(users, {});
  capped_entry_.assign(users, Keyed{0, -1});
}

// The waiting jobs are indexed again for order p and backfill b; what the conservative scans
// keep from one scan to the next (the order of the waiting jobs, the plan) was the old rule's.
void Simulator::set_rule(Policy p, Backfill b) {
  if (!any_rule_ || done_ || committed_ >= 0)
    throw std::logic_error("the rule changes only at a decision, with rule actions");
  if (p == policy_ && b == backfill_) return;
  policy_ = p;
  backfill_ = b;
  for (size_t j = begin_; j < end_; ++j) cached_[j - begin_] = cached_of(j);
  make_index();
  for (int32_t j : waiting()) index_add(j);
  ranked_.clear();
  std::fill(listed_.begin(), listed_.end(), 0);
  planned_ = 0;
  plan_head_ = -1;
  near_.clear();
}

bool Simulator::run_within(double most) {
  constexpr size_t kPicksABound = 16;
  const bool bounded = !std::isinf(most);
  for (size_t picks = 1; !done_; ++picks) {
    if (bounded && picks % kPicksABound == 0 && least_total_bsld() > most) return false;
    const int32_t job = pick_heuristic();
    ++stale_;  // its entry in queue_ goes at the next compaction
    take(job);
  }
  return true;
}

double Simulator::least_total_bsld() const {
  double least = 0;
  for (size_t i = 0; i < start_.size(); ++i) {
    const size_t j = begin_ + i;
    const double wait =
        std::isnan(start_[i]) ? std::max(now_ - w_.submit[j], 0.0) : start_[i] - w_.submit[j];
    least += bounded_slowdown(wait, w_.runtime[j]);
  }
  return least;
}

const std::vector<double>& Simulator::run() {
  run_within(std::numeric_limits<double>::infinity());
  return start_;
}

void Simulator::pick(int32_t job) {
  const std::vector<int32_t>& queue = waiting();
  auto it = std::find(queue.begin(), queue.end(), job);
  if (done_ || committed_ >= 0 || it == queue.end())
    throw std::invalid_argument("job " + std::to_string(job) + " is not waiting");
  pick_at(it - queue.begin());
}

void Simulator::pick_at(size_t position) {
  int32_t job = waiting()[position];
  queue_.erase(queue_.begin() + position);
  take(job);
}

void Simulator::take(int32_t job) {
  if (w_.procs[job] <= free_) {
    start(job);
  } else {
    committed_ = job;
    index_remove(job);
    if (scan_or_decide()) return;
    advance();
  }
  settle();
}

const std::vector<int32_t>& Simulator::waiting() const {
  if (stale_ > 0) {
    queue_.erase(
        std::remove_if(queue_.begin(), queue_.end(), [this](int32_t j) { return left(j); }),
        queue_.end());
    stale_ = 0;
  }
  return queue_;
}

// Lowest score, ties by (submit, id), which is index order.
int32_t Simulator::pick_heuristic() const {
  switch (policy_) {
    case Policy::kFcfs:
    case Policy::kSjf:
    case Policy::kF1:
      return index_->first();
    case Policy::kWfp3:
      return pick_wfp3();
    case Policy::kUnicep:
      if (tournament_picks()) {
        const int32_t g = head_tournament_->first(now_, unicep_score);
        return g < 0 ? -1 : head_tournament_->head(g);
      }
      return lowest([this](size_t, int32_t, double submit, double divisor) {
        return unicep_score(now_, submit, divisor);
      });
    default:
      if (sjbf_picks_) return sjbf_picks_->first();  // ties by index order, as in lowest()
      if (keep_heads_) return ordered_heads_.empty() ? -1 : ordered_heads_.begin()->second;
      return lowest([this](size_t g, int32_t, double, double) { return sjbf_score_of(g); });
  }
}

// At a backfill decision, among the allowed jobs (count when none of them is).
size_t Simulator::heuristic_position(size_t count) const {
  const std::vector<int32_t>& queue = waiting();
  size_t best = backfilling_ ? count : 0;
  double best_score = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < count; ++k)
    if (double s = priority(queue[k]);
        s < best_score && (!backfilling_ || backfill_allows(queue[k])))
      best_score = s, best = k;
  return best;
}

// The waiting job with the lowest key(group, its oldest job, that job's submit time, the group's
// cached value), a score that orders each group
// as index order; ties go to the first in queue order.
template <typename Key>
int32_t Simulator::lowest(Key key) const {
  int32_t best = -1;
  double best_key = std::numeric_limits<double>::infinity();
  groups_->each_live([&](size_t g, int32_t j, double submit, double cached) {
    const double k = key(g, j, submit, cached);
    if (best < 0 || k < best_key || (k == best_key && j < best)) best_key = k, best = j;
  });
  return best;
}

void Simulator::start(int32_t job) {
  start_[job - begin_] = now_;
  ++started_;
  started_jobs_.push_back(job);
  waiting_count_add(w_.procs[job], -1);
  index_remove(job);
  // A job of runtime 0 ends as it starts: its procs are never held (docs/simulation.md).
  const double run = runtime(job);
  if (predictions_) predictions_->start(job, now_, run);
  if (run == 0) return;
  free_ -= w_.procs[job];
  Running r{now_ + w_.requested_time[job], job};
  running_.insert(std::upper_bound(running_.begin(), running_.end(), r), r);
  ends_.emplace(now_ + run, job);
}

// Runs the decision model until a pick is needed (waiting jobs, none committed) or every
// job of the window has started.
void Simulator::settle() {
  for (;;) {
    apply_events();
    if (committed_ >= 0) {
      if (w_.procs[committed_] > free_) {
        if (scan_or_decide()) return;
        advance();
        continue;
      }
      start(committed_);
      committed_ = -1;
    }
    if (queue_.size() > stale_) return;
    if (next_arrival_ == arrivals_end_) {
      done_ = true;
      return;
    }
    advance();
  }
}

void Simulator::limit_foresight(Foresight f) {
  if (!f.arrivals) arrivals_end_ = next_arrival_;
  if (f.runtimes || estimated_runs_) return;
  estimated_runs_ = true;
  if (predictions_) predictions_->freeze();  // runtime(job) stays the estimate of now
  std::vector<Completion> ends;
  for (const Running& r : estimated_ends())
    ends.emplace_back(std::max(r.estimated_end, now_), r.job);
  ends_ = decltype(ends_)(std::greater<Completion>(), std::move(ends));
  apply_events();  // those past their estimates end at the decision: their procs are free
}

double Simulator::next_event() const {
  double next = std::numeric_limits<double>::infinity();
  if (next_arrival_ < arrivals_end_) next = w_.submit[next_arrival_];
  if (!ends_.empty()) next = std::min(next, ends_.top().first);
  return next;
}

void Simulator::advance() { now_ = next_event(); }

// Nothing is committed, so nothing is backfilled: the events at the next event time are
// applied and the next decision follows there.
void Simulator::wait() {
  if (!can_wait()) throw std::invalid_argument("nothing to wait for");
  advance();
  settle();
}

// Every arrival and completion at or before now, before any pick or scan.
void Simulator::apply_events() {
  for (; next_arrival_ < arrivals_end_ && w_.submit[next_arrival_] <= now_; ++next_arrival_) {
    const int32_t j = static_cast<int32_t>(next_arrival_);
    queue_.push_back(j);
    waiting_count_add(w_.procs[j], 1);
    if (index_ && next_arrival_ + kPrefetchAhead < end_)
      index_->prefetch(static_cast<int32_t>(next_arrival_ + kPrefetchAhead));
    index_add(j);
  }
  if (predictions_) predictions_->advance(now_);
  while (!ends_.empty() && ends_.top().first <= now_) {
    auto [end, job] = ends_.top();
    ends_.pop();
    free_ += w_.procs[job];
    const double started = start_[job - begin_];
    Running key{started + w_.requested_time[job], job};
    running_.erase(std::lower_bound(running_.begin(), running_.end(), key));
    ++ended_;
    if (predictions_) predictions_->end(job, started, end);
  }
  if (!predictions_) return;
  if (index_ && estimate_ == Estimate::kPredicted)
    for (int32_t u : predictions_->changed_users()) index_->user_mean(u, user_mean(u));
  if (predicted_groups())
    for (int32_t u : predictions_->changed_users())
      for (uint32_t g : user_groups_[u]) group_predictions_[g] = group_prediction(g);
  if (keep_heads_ && policy_ == Policy::kSjbf)
    for (int32_t u : predictions_->changed_users()) sjbf_rekey(u);
  if (sjbf_picks_)
    for (int32_t u : predictions_->changed_users()) sjbf_picks_->rekey(u, sjbf_capped(u));
  predictions_->clear_changed();
}

void Simulator::waiting_count_add(int32_t procs, int32_t delta) {
  for (; procs <= machine_; procs += procs & -procs) waiting_by_procs_[procs] += delta;
}

int32_t Simulator::waiting_fitting() const {
  int32_t count = 0;
  for (int32_t p = free_; p > 0; p -= p & -p) count += waiting_by_procs_[p];
  return count;
}

void Simulator::backfill_scan() {
  if (backfill_ == Backfill::kNone || waiting_fitting() == 0) return;
  size_t started_before = started_;
  if (backfill_ == Backfill::kEasy)
    easy_scan();
  else
    conservative_scan();
  stale_ += started_ - started_before;
}

// The policy's sort key at now; ties go by (submit, id), which is index order.
double Simulator::priority(int32_t job) const {
  switch (policy_) {
    case Policy::kWfp3:
      return score(policy_, w_, job, now_);
    case Policy::kUnicep:
      return unicep_score(now_, w_.submit[job], cached_[job - begin_]);
    case Policy::kSjbf:
      return sjbf_score(job);
    default:
      return cached_[job - begin_];
  }
}

// Orders a run of close WFP3 keys by the exact score.
void Simulator::settle(std::vector<Keyed>::iterator first,
                       std::vector<Keyed>::iterator last) const {
  for (auto it = first; it != last; ++it) it->first = priority(it->second);
  std::sort(first, last);
}

// The groups within kWfp3Close of the largest product (near_picks_), which the score settles
// where there are several: from the tournament, or in one pass over the live groups, where the
// bound only rises, so every group within it of the largest at the end is kept.
int32_t Simulator::pick_wfp3() const {
  double most = 0, near = 0;
  const double now = now_;
  near_picks_.clear();
  if (tournament_picks()) {
    auto key = [](double t, double submit, double cached) {
      return -wfp3_product(t, submit, cached);
    };
    const int32_t g = head_tournament_->first(now, key);
    if (g < 0) return -1;
    near = wfp3_product(now, head_tournament_->submit(g), groups_->cached_of(g)) * (1 - kWfp3Close);
    head_tournament_->each_within(now, key, -near,
                                  [&](int32_t j) { near_picks_.push_back({near, j}); });
  } else {
    groups_->each_live([&](size_t, int32_t j, double submit, double cached) {
      const double product = wfp3_product(now, submit, cached);
      if (product < near) return;
      if (product > most) most = product, near = most * (1 - kWfp3Close);
      near_picks_.push_back({product, j});
    });
  }
  if (near_picks_.size() == 1) return near_picks_[0].second;
  int32_t best = -1;
  double best_score = std::numeric_limits<double>::infinity();
  for (auto [product, j] : near_picks_) {
    if (product < near) continue;
    const double s = priority(j);
    if (best < 0 || s < best_score || (s == best_score && j < best)) best_score = s, best = j;
  }
  return best;
}

// Orders runs of close WFP3 keys in sorted keyed jobs by the score.
void Simulator::settle_runs(std::vector<Keyed>& keys) const {
  if (policy_ != Policy::kWfp3) return;
  for (auto first = keys.begin(); first != keys.end();) {
    auto last = first + 1;
    while (last != keys.end() && close_keys(last[-1].first, last->first)) ++last;
    if (last - first > 1) settle(first, last);
    first = last;
  }
}

// Waiting jobs (given in queue order) into policy order at now.
void Simulator::sort_by_policy(std::vector<int32_t>& jobs) const {
  std::vector<Keyed> keys;
  keys.reserve(jobs.size());
  for (int32_t j : jobs) keys.push_back(keyed(j));
  std::sort(keys.begin(), keys.end());
  settle_runs(keys);
  for (size_t i = 0; i < keys.size(); ++i) jobs[i] = keys[i].second;
}

// Brings ranked_ to the waiting jobs in policy order at now. It keeps the last scan's order:
// between scans few jobs leave or arrive and few pairs of keys cross (WFP3 and UNICEP keys
// move with the wait, SJBF's with the predictions), so sorting it again by insertion is nearly
// linear; the arrivals are sorted apart and merged in. FCFS, SJF and F1 keys never change:
// only the arrivals are keyed.
void Simulator::rerank() {
  size_t kept = 0;
  for (const Keyed& k : ranked_)
    if (k.second != committed_ && std::isnan(start_[k.second - begin_])) ranked_[kept++] = k;
  ranked_.resize(kept);
  for (int32_t j : waiting())
    if (!listed_[j - begin_]) listed_[j - begin_] = 1, ranked_.push_back(keyed(j));
  if (!static_order())
    for (Keyed& k : ranked_) k = keyed(k.second);
  sort_nearly_sorted(ranked_.begin(), ranked_.begin() + kept, ranked_.end());
  settle_runs(ranked_);
}

}  // namespace ddppo
