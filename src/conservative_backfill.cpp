// Conservative backfilling (Mu'alem and Feitelson 2001) for the Simulator: every waiting job
// ahead in priority order holds a reservation on the free-procs profile, and a job starts now
// only if that delays none of them (docs/simulation.md, "Backfilling while H waits").
#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <utility>

#include "simulator.hpp"

namespace ddppo {

namespace {
constexpr size_t kNone = std::numeric_limits<size_t>::max();
// near_from() looks at every size class for each job it does not pass over: that pays where
// the queue holds more jobs than this per class (instructions with 16, 8, 4, 1, 0: KTH-SP2 x0.5,
// 97 sizes, 7.52G, 6.75G, 6.71G, 7.00G, 7.17G; lublin_256 x0.5 8.72G, 6.25G, 4.06G, 4.61G,
// 5.09G; the store's first 2,000 jobs, 85 sizes and a short queue, 68M at 4 and above, 127M at
// 1, 250M at 0).
constexpr size_t kNearJobsPerClass = 4;
// SJF plans near now only on EASY++ predictions, and where the queue holds more jobs than this
// per class: on requests its last job that can start comes early in its order (a plan near now
// was 2-5x slower: LANL-CM5 x0.25, lublin_256 and KTH-SP2 x0.5), but a prediction far below
// its request lets a job late in that order start. jobs/s on LANL-CM5 (6 sizes) by index ->
// near now, x1 / x0.5 / x0.25: 1.03M / 121k / 37k -> 0.82M / 331k / 148k with 4 a class,
// ~1.04M / ~340k / ~157k with 16, 32 or 64.
constexpr size_t kNearSjfJobsPerClass = 16;
// The plan near now by groups keeps only the heads that might still start before its end
// (narrow_heads()) after walking some jobs, then twice as many and so on, where more than
// kNarrowLeft heads are left: learn_narrow() moves the first try within [kNarrowFirst,
// kNarrowLast].
constexpr size_t kNarrowLeft = 32, kNarrowFirst = 16, kNarrowLast = 64;
constexpr size_t kNarrowShare = 2;
// learn_near()'s bound on the plans near now skipped in a row.
constexpr uint32_t kMostNearSkips = 64;
}  // namespace

// The waiting jobs in policy order as ranked_ holds them (positions), the hopeful ones marked.
struct Simulator::RankedOrder {
  Simulator& sim;
  int32_t job(size_t k) const { return sim.ranked_[k].second; }
  size_t next(size_t k, size_t) const { return k + 1; }
  bool may_start(int32_t j) const { return sim.hopeful(j); }
  // The last hopeful position in (k, last), k if none.
  size_t before(size_t k, size_t last) const {
    do --last;
    while (last > k && !may_start(job(last)));
    return last;
  }
};

// The waiting jobs of FCFS, SJF and F1 by their rank in index_: the last that can start now
// beside the profile is found there, without a walk over the queue.
struct Simulator::IndexOrder {
  Simulator& sim;
  int32_t job(size_t r) const { return sim.index_->at(r); }
  // The first waiting job at rank r or after that the plan near now must place (through
  // `last`), size() if none.
  size_t from(size_t r, size_t last) const {
    return std::isinf(sim.near_until_) ? sim.index_->waiting_from(r) : sim.near_from(r, last);
  }
  size_t next(size_t r, size_t last) const { return from(r + 1, last); }
  bool may_start(int32_t) const { return true; }
  // The rank of the last waiting job in (k, last) that can start now, k if none.
  size_t before(size_t k, size_t last) const {
    const size_t r = last_fitting(k + 1, last);
    return r == kNone ? k : r;
  }
  // The rank of the last waiting job in [from, below) that can start now, kNone if none.
  size_t last_fitting(size_t from, size_t below) const {
    sim.profile_.lows(sim.lows_);
    const int32_t free = std::min(sim.free_, sim.lows_[0].free);
    const int32_t j = sim.index_->last_fitting(below, free, sim.now_,
                                               [&](int32_t procs) { return sim.fit_until(procs); });
    return j >= 0 && sim.index_->rank(j) >= from ? sim.index_->rank(j) : kNone;
  }
};

// procs fit now over [now, until) beside the profile whose lows_ are taken iff until <= this:
// the time of the first low below procs.
inline double Simulator::fit_until(int32_t procs) const {
  auto low = std::find_if(lows_.begin(), lows_.end(),
                          [&](const Profile::Step& s) { return s.free < procs; });
  return low == lows_.end() ? std::numeric_limits<double>::infinity() : low->time;
}

// The plan near now passes over whole size classes: a job of procs p with a request over
// runs(p).within cannot start now, nor end by exact_until_ from a start before near_until_,
// and starts at or after runs(p).beyond, so it is left out and brings exact_until_ down to
// that. Both fall as the profile loses procs and exact_until_ falls, and a job's earliest start
// only moves later, so per class a candidate found earlier is no later than the next one now,
// and a class brought down to `beyond` with a `within` covers its jobs with requests over it.
// Returns the first rank at or after r (through `last`) whose job is not passed over.
size_t Simulator::near_from(size_t r, size_t last) {
  const size_t below = last + 1;
  if (near_.empty()) return index_->size();
  for (;;) {
    NearClass* first = nullptr;  // the class whose candidate comes first, made exact
    for (;;) {
      first = &*std::min_element(near_.begin(), near_.end(), [](const auto& a, const auto& b) {
        return a.candidate < b.candidate;
      });
      const size_t c = first - near_.data();
      const bool exact = near_runs(c);
      if (first->candidate >= r && exact) break;
      first->candidate_slot = index_->first_in_class(
          c, index_->slot_at(c, first->candidate_slot, r), near_limit(first->runs.runs.within));
      first->candidate = index_->class_rank(c, first->candidate_slot);
      first->exact = true;
    }
    const size_t next = first->candidate;
    const double was = exact_until_;
    for (size_t c = 0; c < near_.size(); ++c) {
      NearClass& k = near_[c];
      if (k.covered_from < r && k.exact && k.covered == near_limit(k.runs.runs.within)) {
        // Its candidate, found by that limit and at or after r, is the first job from r found.
        k.covered_slot = k.candidate_slot, k.covered_from = k.candidate;
      } else if (k.covered_from < r) {
        k.covered_slot =
            index_->first_in_class(c, index_->slot_at(c, k.covered_slot, r), k.covered);
        k.covered_from = index_->class_rank(c, k.covered_slot);
      }
      if (k.covered_from >= std::min(next, below)) continue;
      near_runs(c);
      k.covered = near_limit(k.runs.runs.within);
      k.covered_slot = index_->first_in_class(c, k.covered_slot, k.covered);
      k.covered_from = index_->class_rank(c, k.covered_slot);
      exact_until_ = std::min(exact_until_, k.runs.runs.beyond);
    }
    if (exact_until_ == was) return next;
  }
}

// Class c's runs as of the profile and exact_until_ now; whether its candidate was exact.
bool Simulator::near_runs(size_t c) {
  NearClass& k = near_[c];
  if (!fresh_runs(k.runs, index_->class_procs(c))) return k.exact;
  return k.exact = false;
}

// Makes k, the runs of `procs`, those of the profile, free_ and exact_until_ now, at least
// through a run of `enough` (Profile::runs()); returns whether they were made again. Only the
// reservations that took procs where at least `procs` were free and left fewer change them
// (Profile::same_runs()); near_until_ is the same through a scan, which resets the profile.
bool Simulator::fresh_runs(ProcsRuns& k, int32_t procs, double enough) {
  const bool same = k.until == exact_until_ && k.fitted == (procs <= free_) &&
                    profile_.same_runs(procs, k.changes) &&
                    !(std::isnan(k.runs.beyond) && enough > near_limit(k.runs.within));
  k.changes = profile_.changes();
  if (same) return false;
  k.until = exact_until_, k.fitted = procs <= free_;
  k.runs = profile_.runs(procs, free_, near_until_, exact_until_, enough);
  return true;
}

// Marks as hopeful the waiting jobs that can start now beside the profile and, if there are
// any, puts the waiting jobs into ranked_ in policy order at now; returns the last hopeful
// job's position there (kNone if none).
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
  if (!any) return kNone;
  rerank();
  size_t last = ranked_.size() - 1;
  while (!hopeful(ranked_[last].second)) --last;
  return last;
}

// The profile of the running jobs with the committed job's reservation; returns its start.
double Simulator::plan_from_scratch() {
  profile_.reset(now_, free_);
  exact_until_ = std::numeric_limits<double>::infinity();
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

// Runs the reservations of the jobs in policy order that the plan lacks, through the last
// that might start now; a plan that still holds is extended, not made again (FCFS, whose
// arrivals rank last).
void Simulator::conservative_scan() {
  constexpr double kWhole = std::numeric_limits<double>::infinity();
  ++scan_;
  if (index_ && !groups_ && index_scans() == WaitingIndex::Scans::kConservative) {
    // FCFS (on at most kIndexPlanSizes sizes) and SJF on predictions: the plan near now, or
    // the whole plan where that cannot tell what starts (rare). On predictions, index_
    // searches the jobs' predictions. SJF on requests (where groups hold few jobs:
    // plans_by_groups()) and F1 rank short or small jobs first: their last job that can start
    // comes early.
    const bool sjf_near = policy_ == Policy::kSjf && estimate_ == Estimate::kPredicted;
    const bool near =
        (policy_ == Policy::kFcfs || sjf_near) &&
        queue_.size() - stale_ >
            (sjf_near ? kNearSjfJobsPerClass : kNearJobsPerClass) * index_->size_classes();
    const bool held = plan_holds();
    if (!plan_by_index(held, near ? now_ + near_width_ : kWhole)) plan_by_index(false, kWhole);
    start_planned();
  } else if (groups_ && (estimate_ == Estimate::kRequest || predicted_groups())) {
    // Where the plan near now cannot tell, one up to twice the longest estimate of the groups
    // that fit as the scan begins (fit_longest_, from the plan near now), and at least twice
    // the plan near now, mostly can: a job that starts now ends before any reservation it
    // leaves out begins. On the store of bench/sim_throughput.py, where one request in ten is
    // the longest (36 h), the plan near now could not tell at 36% of WFP3's scans (first 2,000
    // jobs); of 11,824 such scans over its first 20,000 jobs, one up to twice the longest
    // request could not tell at 144. Twice the longest that fits is shorter than that at half
    // the wider plans (the store's first 300,000 jobs, WFP3: 21.6 h at 66,126 of 214,279, 12 h
    // at 37,593): WFP3 166k -> 175k jobs/s there, side by side (1.5 and 2.5 times it: 147k,
    // 161k; at least the plan near now once: 162k); UNICEP, SJBF, FCFS and SJF there, and
    // lublin_256 and LANL-CM5 x1, x0.5 and x0.25 on requests and on predictions, within noise
    // or faster. Where that fails too (1 scan in 60 to 140 on the store), one up to eight times
    // the longest request has told every time over the store's first 600,000 jobs (FCFS, WFP3,
    // SJBF), where the whole plan walks a queue of tens of thousands.
    // -1: twice the longest that fits, known once the plan near now has found the groups.
    for (double width : {near_width_, -1.0, 8 * longest_request_, kWhole}) {
      if (width < 0) width = 2 * std::max(fit_longest_, near_width_);
      const bool told = plan_by_groups(now_ + width);  // the whole plan always tells
      if (std::exchange(probing_near_, false)) learn_near(told);
      if (told) break;
      unplan_starts();
    }
    start_planned();
  } else {
    plan_earliest_ = plan_from_scratch();
    // Reservations only take procs away, so a job that cannot start now beside the
    // reservations made so far never starts in this scan: the "hopeful" jobs are those that
    // still might, and past the last of them in policy order nothing else can start. The
    // plan near now, as plan_through() makes FCFS's, leaves out the reservations that would
    // start at or after now + near_width_ (the profile stays short: each reservation is
    // cheaper); where it cannot tell what starts, the whole plan is made.
    const size_t last = rank_hopeful();
    near_until_ = now_ + near_width_;
    if (last != kNone && !plan_through(RankedOrder{*this}, 0, last)) {
      unplan_starts();
      plan_earliest_ = plan_from_scratch();
      near_until_ = kWhole;
      plan_through(RankedOrder{*this}, 0, last);
    }
    start_planned();
  }
  plan_head_ = committed_, plan_started_ = started_, plan_ended_ = ended_;
}

// FCFS, SJF and F1 with requests: plans in index_'s order, extending the last scan's plan
// where it `held`, leaving out the reservations that would start at or after `near`. False,
// with nothing planned to start, where that plan cannot tell whether a job starts.
bool Simulator::plan_by_index(bool held, double near) {
  IndexOrder order{*this};
  if (!held) plan_earliest_ = plan_from_scratch();
  near_until_ = near;
  if (!std::isinf(near)) near_.assign(index_->size_classes(), NearClass{});
  const size_t last = order.last_fitting(planned_, index_->size());
  if (last == kNone || plan_through(order, order.from(planned_, last), last)) return true;
  unplan_starts();
  return false;
}

// Reserves or starts the jobs of `order` from position k through `last`, the last that might
// start now, which moves back while it is found unable to; the jobs that start go to
// starting_ (their procs taken from free_). Returns false, as soon as it cannot tell whether
// a job starts now.
//
// The plan near now (FCFS). A job's earliest start only moves later as the profile loses
// procs, and a job starts now iff it fits over [now, now + its estimate). The profile holds
// exactly the plan from scratch's free procs before exact_until_ and at least as many after
// it: the jobs left out (near_from()) start at or after it there. So (1) a job that fits now
// in the profile fits in the plan from scratch where now + d <= exact_until_; where not, the
// answer is unknown and the scan is made again whole (near_until_ infinite: nothing left out);
// a job that does not fit in the profile fits in no lower one; (2) a job found earliest at
// `at` in the profile starts no earlier in the plan from scratch, and exactly there where its
// run ends by exact_until_: then it is reserved alike, else left out (reserve_near()); the jobs
// near_from() does not pass over are almost all of the first kind. So
// the jobs that start are those of the plan from scratch, while the profile holds only the
// reservations near now (on LANL-CM5 x0.5: ~1 in 40 of the plan's jobs).
template <typename Order>
bool Simulator::plan_through(const Order& order, size_t k, size_t last) {
  // `touched`: the earliest time the profile or the free procs changed since the last job was
  // last found still able to start; later changes leave it able to.
  double touched = std::numeric_limits<double>::infinity();
  for (; k <= last; k = order.next(k, last)) {
    const int32_t j = order.job(k);
    const double duration = estimate(j);
    if (order.may_start(j) && can_start_now(j)) {
      if (!before_left_out(duration)) return false;
      starting_.push_back(j);
      if (runtime(j) > 0) profile_.reserve_now(w_.procs[j], duration), free_ -= w_.procs[j];
      touched = now_;
    } else {
      if (const double at = reserve_near(w_.procs[j], duration); !std::isnan(at)) {
        plan_earliest_ = std::min(plan_earliest_, at);
        if (duration > 0) touched = std::min(touched, at);
      }
    }
    while (last > k) {
      const int32_t l = order.job(last);
      if (touched > now_ && touched >= now_ + estimate(l)) break;
      if (can_start_now(l)) {
        touched = std::numeric_limits<double>::infinity();
        break;
      }
      last = order.before(k, last);
      touched = now_;  // the new last job has not been checked against what changed
    }
  }
  planned_ = std::max(planned_, last + 1);
  plan_earliest_ = std::min(plan_earliest_, exact_until_);  // no job left out starts before
  return true;
}

// WFP3, UNICEP, SJBF, FCFS and SJF (plans_by_groups()) with requests, WFP3, UNICEP and SJBF on
// predictions: in a group of waiting jobs (equal procs and request, and user for SJBF
// and on predictions, one estimate) policy order is index order and every job fits now or none
// does; once one cannot start, none after it can. The walk merges the groups
// by policy order at now from their oldest jobs (merge_heads(), merge_pop()) and ends once no group
// that fitted as the scan began still fits: no later job can start. The plan is made near now as
// plan_through() makes FCFS's (false where it cannot tell what starts; near infinite: the whole
// plan), a group passed over once the walk reaches it; the jobs that start go to starting_.
bool Simulator::plan_by_groups(double near) {
  near_until_ = near;
  if (!std::exchange(base_kept_, false)) {
    plan_earliest_ = plan_from_scratch();
    fitting_groups();
  }
  if (fit_classes_.empty()) return true;
  if (runs_past_near()) {
    if (near_skips_ > 0) {
      --near_skips_;
      base_kept_ = true;  // the wider plan starts from this profile and these groups
      return false;       // as if it could not tell: the wider plan comes at once
    }
    probing_near_ = true;
  }
  return walk_groups();
}

// plan_by_groups()'s first part: the profile of the running jobs and the committed one's
// reservation, and the groups that fit now beside it (fit_cuts_, fit_classes_) with their
// longest estimate (fit_longest_). None depends on how near the plan is, so a plan near now
// that is skipped leaves them to the next (base_kept_): on the store, 89,748 of WFP3's 204,699
// plans near now over its first 150,000 jobs are skipped, and the instructions of
// conservative_scan() fall by 1.6% (UNICEP) to 3.8% (SJBF) there (LANL-CM5 x 0.25: within
// 0.5%).
void Simulator::fitting_groups() {
  profile_.lows(lows_);
  const int32_t free = std::min(free_, lows_[0].free);
  ++group_plans_;  // a scan may plan four times (conservative_scan())
  dropped_.resize(groups_->size());
  fit_cuts_.resize(groups_->classes());
  fit_classes_.clear();
  fit_longest_ = 0;
  // The groups that fit now, among those of at most the free procs; where none does (2 in 5
  // scans on LANL-CM5 x0.25), no group is keyed. In a class of groups of equal procs, by
  // request, those that fit come first: one search per class finds them (fit_cuts_), with
  // fit_until() found once per procs. On predictions, which do not rise with the request
  // across users, each live group of the class is tested, marked (fitted_) and listed
  // (fitted_groups_); the cut follows the last that fits.
  if (predicted_groups() || !fit_by_bands_) {
    if (predicted_groups()) fitted_.resize(groups_->size()), fitted_groups_.clear();
    groups_->each_live_class_to(free, [&](size_t g, size_t end) {
      const double until = fit_until(groups_->procs_of(g));
      size_t cut = g;
      if (!predicted_groups()) {
        cut = groups_->fitting_end(g, end, now_, until);
      } else {
        for (size_t k = g; k < end; k = groups_->next_live(k + 1))
          if (now_ + group_estimate(k) <= until) {
            fitted_[k] = group_plans_, cut = k + 1;
            fitted_groups_.push_back(static_cast<uint32_t>(k));
            fit_longest_ = std::max(fit_longest_, group_estimate(k));
          }
      }
      if (cut == g) return;
      fit_cuts_[groups_->class_of(g)] = {group_plans_, cut};
      fit_classes_.push_back(groups_->class_of(g));
    });
  } else {
    // Procs in (lows_[k + 1].free, lows_[k].free] fit until lows_[k + 1].time (fit_until()):
    // per such band, from the fewest procs, one walk of the bits of the groups in the request
    // buckets that end by then, not a search of every class up to the free procs.
    const double now = now_;
    for (size_t k = lows_.size(); k-- > 0;) {
      const bool last_low = k + 1 == lows_.size();
      const double until = last_low ? std::numeric_limits<double>::infinity() : lows_[k + 1].time;
      groups_->each_live_within(
          last_low ? 0 : lows_[k + 1].free, std::min(lows_[k].free, free),
          [now, until](double request) { return now + request <= until; },
          [&](size_t g) {
            const size_t c = groups_->class_of(g);
            if (fit_cuts_[c].plan != group_plans_) fit_classes_.push_back(c);
            fit_cuts_[c] = {group_plans_, g + 1};
          });
    }
  }
  if (!predicted_groups())  // in a class, the last group that fits has the longest request
    for (const size_t c : fit_classes_)
      fit_longest_ = std::max(fit_longest_, groups_->request_of(fit_cuts_[c].cut - 1));
}

// plan_by_groups()'s walk, from fitting_groups()'s profile and groups.
bool Simulator::walk_groups() {
  passed_.clear();
  merge_heads();
  // The last group that fitted as the scan began and may still: no later job can start once
  // there is none. It moves back through fit_classes_ (at fit_class_), on predictions through
  // fitted_groups_ (at fit_at_).
  fit_class_ = fit_classes_.size() - 1;
  fit_at_ = fitted_groups_.size();
  size_t last = last_fitting(fit_cuts_[fit_classes_.back()].cut);
  // `touched`: the earliest time the profile or the free procs changed since the group at
  // `last` was last found still able to start a job; later changes leave it able to.
  double touched = std::numeric_limits<double>::infinity();
  size_t walked = 0, narrow_at = narrow_after_;
  // The bound narrow_heads() last narrowed by: it is tried again only with a lower one, and
  // only after now (a job that can start now has no slot before now: narrowed by now, its group
  // would be dropped unseen, where the plan cannot tell whether it starts, before_left_out()).
  double narrowed_by = std::numeric_limits<double>::infinity();
  Keyed at{0, -1};  // the job walked last
  while (last != WaitingGroups::kNoGroup) {
    if (walked == narrow_at && !std::isinf(near_until_) && !predicted_groups() &&
        heads_left() > kNarrowLeft) {
      if (const double bound = std::min(near_until_, exact_until_);
          bound < narrowed_by && bound > now_) {
        const bool narrowed = narrow_heads(at, bound);
        if (narrowed) narrowed_by = bound;
        learn_narrow(walked, narrowed);
      }
      narrow_at *= 2;
    }
    if (merged_ == heads_end_ && nexts_.empty()) break;  // the rest passed over
    // The job's procs and request (its estimate) are its group's: read from the groups' few
    // arrays, not the jobs' (one cache miss less per job walked).
    at = merge_pop(), ++walked;
    const int32_t j = at.second;
    const size_t g = groups_->group(j);
    const int32_t procs = groups_->procs_of(g);
    const double duration = group_estimate(g);
    const bool passed = passed_over(procs, duration);  // and with it the rest of its group
    if (passed) {
      dropped_[g] = group_plans_;
    } else if (group_fits(g) && can_start_now(procs, duration)) {
      if (!before_left_out(duration)) return false;
      starting_.push_back(j);
      if (runtime(j) > 0) profile_.reserve_now(procs, duration), free_ -= procs;
      touched = now_;
    } else {
      if (const double at = reserve_near(procs, duration); std::isnan(at))
        pass_over_later(procs, duration);
      else if (duration > 0)
        touched = std::min(touched, at);
      dropped_[g] = group_plans_;
    }
    if (int32_t next = passed ? -1 : groups_->next_beside(j); next >= 0) push_next(keyed(next));
    if (policy_ == Policy::kSjbf && !narrowed_ && in_capped(g) && groups_->oldest_of(g) == j) {
      // The next head that its user's entry in ordered_heads_ stands for.
      const std::set<int32_t>& jobs = capped_jobs_[group_users_[g]];
      if (auto it = jobs.upper_bound(j); it != jobs.end())
        push_next({user_capped_[group_users_[g]], *it}), --capped_left_;
    }
    while (last != WaitingGroups::kNoGroup) {
      if (dropped_[last] != group_plans_) {
        const double estimate = group_estimate(last);  // its oldest job's
        if (touched > now_ && touched >= now_ + estimate) break;
        const int32_t procs = groups_->procs_of(last);
        const double until =
            procs <= free_ ? profile_.fits_until(procs) : -std::numeric_limits<double>::infinity();
        if (now_ + estimate <= until) {  // can_start_now() for its oldest job
          touched = std::numeric_limits<double>::infinity();
          break;
        }
        // Nor can the groups of these procs and a longer request, just before it: all go at
        // once (on predictions, only this one). Their marks stay: their jobs, if walked, are
        // found unable to start.
        last = last_fitting(
            predicted_groups() ? last
                               : groups_->fitting_end(groups_->class_first(groups_->class_of(last)),
                                                      last, now_, until));
      } else {
        last = last_fitting(last);
      }
      touched = now_;  // the next group has not been checked against what changed
    }
  }
  return true;
}

// Whether, with requests, a group that fits now as the scan begins would run past near_until_
// or up to it (the longest of their requests, fit_longest_, would): where a job of it can
// start, the plan near now cannot tell (before_left_out()), and where its run ends at
// near_until_, only while no job left out brings exact_until_ down at all. How often that
// happens depends on the workload: of such plans near now, on the store of
// bench/sim_throughput.py at load 1.2 (first 300,000 jobs) WFP3's told at 22,481 of 175,354 and
// FCFS's at 12,134 of 174,281, on LANL-CM5 x0.25 UNICEP's at all but 66 of 114,323. The store's
// requests include 12 h, a third of its longest (near_width_): counted as running past (as
// 10.8 h would not), WFP3's plans near now that walked and could not tell fell from 39,509 to
// 3,691 and the cycles of its plans by 9%.
inline bool Simulator::runs_past_near() const {
  return !predicted_groups() && now_ + fit_longest_ >= near_until_;
}

// After a plan near now made where runs_past_near(): the plans near now such a scan skips (for
// the wider plan at once) double after one that could not tell, up to kMostNearSkips, and halve
// after one that told.
void Simulator::learn_near(bool told) {
  near_streak_ = told ? near_streak_ / 2 : std::clamp(2 * near_streak_, 1u, kMostNearSkips);
  near_skips_ = near_streak_;
}

// After narrow_heads() tried at `walked` jobs: the next plan tries first after half as many
// where it narrowed, and after twice as many where it did not at this plan's first try. A try
// that keeps more than half the heads costs a walk of the groups' bits for nothing, one made
// late leaves the walk to pass over the closed groups one by one, and where the right point
// lies depends on the workload (instructions of conservative_scan(), the store's first 150,000
// jobs / LANL-CM5 x0.25, against a fixed 32: WFP3 -12% / -2%, UNICEP -5% / -2%, SJBF -7% / -7%,
// FCFS -10% / the index; a fixed 16: store -5% to -12%, LANL-CM5 +5% to +9%).
void Simulator::learn_narrow(size_t walked, bool narrowed) {
  if (narrowed)
    narrow_after_ = std::max(walked / 2, kNarrowFirst);
  else if (walked == narrow_after_)
    narrow_after_ = std::min(2 * walked, kNarrowLast);
}

// Whether group g fitted now as the scan began (plan_by_groups()) and has not been found unable
// to start a job since.
inline bool Simulator::group_fits(size_t g) const {
  const FitCut& f = fit_cuts_[groups_->class_of(g)];
  return f.plan == group_plans_ && g < f.cut && dropped_[g] != group_plans_ &&
         (!predicted_groups() || fitted_[g] == group_plans_);
}

// The last group with a waiting job before `below` in fit_classes_[fit_class_] that fitted as the
// scan began, or else in the classes before; kNoGroup if none. On predictions, the last listed
// in fitted_groups_: a search of the live groups' bits for one marked (fitted_) passed over
// the groups that did not fit one by one (LANL-CM5 x0.25, WFP3: 10% of the time).
size_t Simulator::last_fitting(size_t below) {
  if (predicted_groups()) {  // fitted_groups_, back from fit_at_
    while (fit_at_ > 0 && fitted_groups_[fit_at_ - 1] >= below) --fit_at_;
    return fit_at_ == 0 ? WaitingGroups::kNoGroup : fitted_groups_[fit_at_ - 1];
  }
  for (;;) {
    const size_t c = fit_classes_[fit_class_], first = groups_->class_first(c);
    const size_t g = groups_->last_live(first, std::min(below, fit_cuts_[c].cut));
    if (g != WaitingGroups::kNoGroup || fit_class_ == 0) return g;
    below = fit_cuts_[fit_classes_[--fit_class_]].cut;
  }
}

namespace {
// sort_heads_through() sorts a part of heads_ this long or shorter at once.
constexpr size_t kSortedAtOnce = 16;
// merge_heads() puts this many first heads into order in one pass: half the walks settle at
// most 3 heads (LANL-CM5 x0.25, WFP3; 3 in 10 more than 16, 1 in 15 more than 128). 8 or 16: 1-16%
// more instructions (more moves per head taken in), 2: 1-4% more (more partitions).
constexpr size_t kFirstHeads = 4;
// merge_heads() cuts the heads this much of the way from the last walk's deepest head's key
// toward 0, later in order (WFP3's and UNICEP's keys are at most 0): a front too short for the
// walk costs a pass over all the heads, one a little long costs little. Instructions against
// the key itself (LANL-CM5, first 40,000 jobs at x0.25 / 60,000 at x0.5): 0.95 WFP3 -2.7% /
// -1.4%, UNICEP -2.1% / -0.7%; 0.9 -2.8% / -1.4%, -1.7% / -0.1%; 0.75 and 0.5 less or worse.
constexpr double kCutSlack = 0.95;
}  // namespace

// The groups' heads in policy order, without a heap or a sort over all of them (a walk pops a
// few dozen of some hundreds): one pass keys every group's oldest job into heads_, which
// merge_pop() puts into order only as far as the walk reaches (SJBF, FCFS, SJF, F1: ordered_heads_
// holds them in order). The groups' next jobs, pushed as the walk goes, wait in the heap nexts_.
void Simulator::merge_heads() {
  if (heads_.size() < groups_->live()) heads_.resize(groups_->live());
  heads_end_ = keep_heads_ ? ordered_heads_.size() : groups_->live();
  merged_ = heads_settled_ = 0;
  const bool was_narrowed = std::exchange(narrowed_, false);
  nexts_.clear();
  capped_left_ = groups_->live() - heads_end_;
  if (keep_heads_) {  // in order already: settle_heads() takes them one by one
    next_head_ = ordered_heads_.begin();
    heads_sorted_ = 0;  // nor is there a deepest head for the next scan
    return;
  }
  // Locals: the pass writes doubles, which might alias now_. The last plan's deepest head in
  // order, keyed now (its group's oldest job), is where this plan's ordering of all the heads
  // most likely ends (deepest_head_key()).
  const double now = now_, cut = deepest_head_key(was_narrowed);
  // The heads keyed at most `cut` go to the front, the others to the back.
  size_t front = 0, back = heads_end_;
  auto key_each = [&](auto key) {
    groups_->each_live([&](size_t g, int32_t j, double submit, double cached) {
      const Keyed head{key(g, submit, cached), j};
      const bool before = head.first <= cut;
      heads_[before ? front : back - 1] = head;
      front += before, back -= !before;
    });
  };
  switch (policy_) {
    case Policy::kWfp3:
      key_each([now](size_t, double submit, double cached) {
        return -wfp3_product(now, submit, cached);
      });
      break;
    default:  // UNICEP (SJBF's, FCFS's and SJF's heads are kept in order: above)
      key_each([now](size_t, double submit, double divisor) {
        return unicep_score(now, submit, divisor);
      });
  }
  // Every head in the front comes before every one behind (a bound of sort_heads_through()):
  // the first heads are found there, and the heads behind it are partitioned only if the walk
  // gets there. A front too short for the first heads is not kept apart.
  head_bounds_.assign(1, static_cast<uint32_t>(heads_end_));
  if (front < std::min(heads_end_, kFirstHeads)) front = heads_end_;
  if (front < heads_end_) head_bounds_.push_back(static_cast<uint32_t>(front));
  heads_sorted_ = first_heads(front);
}

// The plan near now, after its first narrow_after_ jobs through `at` (and again after twice as many
// walked, and so on), keeps in heads_ only the heads of groups not yet walked whose jobs might
// still start before `bound`, the lesser of near_until_ and exact_until_, after now
// (plan_by_groups() sees to it: by now itself, the groups that can start now would be dropped too):
// those of `procs` with an estimate up to the longest run beginning before it with at least procs
// free (runs_before(), as passed_over() but up to no exact_until_). The profile only loses procs,
// and before exact_until_ it is the plan from scratch's (after it, that plan has no more free
// procs), so the others' jobs have no slot before `bound` now or later in the walk, nor in the plan
// from scratch: exact_until_ comes down to `bound` (passed_over() or reserve_near() would leave
// them out one by one, with that bound or a lower one). exact_until_ falls as the walk goes on, so
// narrowing by it, and again after twice, four times, ... as many jobs walked where it fell since
// (or where the last try kept too many), keeps fewer heads than narrowing once by near_until_ (the
// store at load 1.2, first 300,000 jobs: FCFS 170k -> 193k jobs/s, WFP3 92k -> 108k, SJF 158k ->
// 223k; KTH-SP2 x0.25 WFP3 85k -> 118k, lublin_256 x0.5 80k -> 121k; HPC2N x0.5 and x0.25 1-2%
// slower, where trying again at every doubling, whether exact_until_ fell or not, cost 4-7%). With
// requests, they are found by the groups' request buckets (each_live_within(), one walk of bits per
// band of procs with one longest run: 8 bands a plan on the store; a search per class of groups
// visited 210 classes to keep 26 groups); on predictions, which are not requests, testing each
// group cost more than it saved (LANL-CM5 x0.25, 7-10% slower). Only where at most 1 in
// kNarrowShare of the heads left would be kept: keying and sorting them again costs more than the
// walk saves where the profile near now still has room (LANL-CM5 x0.25, WFP3: half the heads would
// be kept). Over the store's first 200,000 jobs under FCFS, 25 of its 283 groups are kept on
// average, where the walk would go on through 200 more. Returns whether it narrowed.
bool Simulator::narrow_heads(const Keyed& at, double bound) {
  profile_.runs_before(bound, runs_before_);
  // Procs in (the next pair's free, this pair's] have this pair's longest run.
  open_groups_.clear();
  for (size_t k = 0; k < runs_before_.size(); ++k) {
    const double limit = near_limit(runs_before_[k].second);
    groups_->each_live_within(
        k + 1 < runs_before_.size() ? runs_before_[k + 1].first : 0, runs_before_[k].first,
        [limit](double request) { return request <= limit; },
        [&](size_t g) { open_groups_.push_back(static_cast<uint32_t>(g)); });
  }
  if (open_groups_.size() * kNarrowShare > heads_left()) return false;
  exact_until_ = bound;
  narrowed_at_ = at.second;
  if (policy_ == Policy::kSjbf) {
    // The heads taken from users' capped_jobs_ into nexts_ are among heads_ now if open.
    nexts_.erase(std::remove_if(nexts_.begin(), nexts_.end(),
                                [this](const Keyed& k) {
                                  return groups_->oldest_of(groups_->group(k.second)) == k.second;
                                }),
                 nexts_.end());
    std::make_heap(nexts_.begin(), nexts_.end(), after_in_order());
  }
  heads_end_ = 0;  // as many open groups as heads at most: heads_ is as long as the live groups
  for (const uint32_t g : open_groups_)
    if (const Keyed h = oldest_head(g); before(at, h)) heads_[heads_end_++] = h;
  merged_ = heads_settled_ = heads_sorted_ = 0;
  head_bounds_.assign(1, static_cast<uint32_t>(heads_end_));
  narrowed_ = true;
  capped_left_ = 0;
  return true;
}

// The last plan's deepest head in policy order (heads_sorted_), or where it was `narrowed`, the
// job walked then (after it, only the heads it kept were put in order: on the store at load 1.2
// its deepest head made a front of most heads, and ordering them took a fifth of WFP3's
// instructions), its group's oldest job keyed now and moved by kCutSlack; infinity where there
// is none. First 150,000 store jobs, conservative_scan: WFP3 10.73G -> 9.07G instructions,
// UNICEP 7.60G -> 6.04G; LANL-CM5 x0.25 WFP3 4.11G -> 3.97G, UNICEP 4.25G -> 4.16G.
double Simulator::deepest_head_key(bool narrowed) const {
  if (!narrowed && heads_sorted_ == 0) return std::numeric_limits<double>::infinity();
  const int32_t j =
      groups_->oldest_beside(narrowed ? narrowed_at_ : heads_[heads_sorted_ - 1].second);
  return j < 0 ? std::numeric_limits<double>::infinity() : keyed(j).first * kCutSlack;
}

// Moves the first kFirstHeads heads (all, if fewer) by (key, job) among heads_[0, end) to the
// front of heads_, in order, the others behind them; returns how many. One pass: most heads are
// compared with the last of the first found so far only, and stay where they are.
size_t Simulator::first_heads(size_t end) {
  const size_t n = std::min(end, kFirstHeads);
  std::array<std::pair<Keyed, size_t>, kFirstHeads> first;  // (head, position), in order
  size_t count = 0;
  double most = std::numeric_limits<double>::infinity();  // the last first head's key, once n
  for (size_t i = 0; i < end; ++i) {
    if (heads_[i].first > most || (count == n && !(heads_[i] < first[n - 1].first))) continue;
    size_t at = count < n ? count++ : n - 1;
    for (; at > 0 && heads_[i] < first[at - 1].first; --at) first[at] = first[at - 1];
    first[at] = {heads_[i], i};
    if (count == n) most = first[n - 1].first.first;
  }
  // The heads before n that are not among the first go where those after n were.
  std::array<bool, kFirstHeads> front{};
  size_t vacated = 0;
  for (size_t k = 0; k < n; ++k)
    if (first[k].second < n) front[first[k].second] = true;
  for (size_t p = 0; p < n; ++p) {
    if (front[p]) continue;
    while (first[vacated].second < n) ++vacated;
    heads_[first[vacated++].second] = heads_[p];
  }
  for (size_t k = 0; k < n; ++k) heads_[k] = first[k].first;
  return n;
}

inline void Simulator::push_next(const Keyed& job) {
  nexts_.push_back(job);
  std::push_heap(nexts_.begin(), nexts_.end(), after_in_order());
}

// The first job in policy order among heads_ from merged_ on and nexts_.
inline Simulator::Keyed Simulator::merge_pop() {
  if (merged_ == heads_settled_ && merged_ < heads_end_) settle_heads();
  if (!nexts_.empty() && (merged_ == heads_end_ || before(nexts_.front(), heads_[merged_]))) {
    std::pop_heap(nexts_.begin(), nexts_.end(), after_in_order());
    const Keyed k = nexts_.back();
    nexts_.pop_back();
    return k;
  }
  return heads_[merged_++];
}

// Puts heads_[merged_] into its place in policy order (SJBF, FCFS, SJF, F1: the next of
// ordered_heads_, unless narrowed), and with it (WFP3) the heads after it whose keys are close,
// a chain of them: those are ordered by before(), which settles them by the score; a key after
// them is not close to any before it.
void Simulator::settle_heads() {
  if (keep_heads_ && !narrowed_) {
    heads_[merged_] = *next_head_++;
    heads_settled_ = merged_ + 1;
    return;
  }
  size_t end = merged_ + 1;
  sort_heads_through(merged_);
  if (policy_ == Policy::kWfp3) {
    while (end < heads_end_ &&
           (sort_heads_through(end), close_keys(heads_[end - 1].first, heads_[end].first)))
      ++end;
    if (end - merged_ > 1)
      std::sort(heads_.begin() + merged_, heads_.begin() + end,
                [this](const Keyed& a, const Keyed& b) { return before(a, b); });
  }
  heads_settled_ = end;
}

// Sorts heads_ by (key, job) through position i, partitioning only what lies before: an
// incremental quicksort (Paredes and Navarro, 2006). head_bounds_ holds positions past
// heads_sorted_, the nearest on top (heads_end_ at the bottom): every head before one of
// them comes before every head from it on.
void Simulator::sort_heads_through(size_t i) {
  while (heads_sorted_ <= i) {
    const auto first = heads_.begin() + heads_sorted_, last = heads_.begin() + head_bounds_.back();
    auto below = last;  // where the part splits; `last` if it is sorted at once
    if (static_cast<size_t>(last - first) > kSortedAtOnce) {
      // Below the median of three keys, or at it where no key is below (if none is above
      // either, the part holds one key). Lomuto's partition by keys alone, without a branch on
      // the comparison: comparing the jobs too, where keys are equal, mispredicted 29% more
      // branches (LANL-CM5 x0.25, WFP3).
      const double a = first[0].first, b = first[(last - first) / 2].first, c = last[-1].first;
      const double key = std::max(std::min(a, b), std::min(std::max(a, b), c));
      auto split = [&](auto goes_before) {
        auto at = first;
        for (auto it = first; it != last; ++it) {
          const Keyed x = *it;
          *it = *at;
          *at = x;
          at += goes_before(x.first);
        }
        return at;
      };
      below = split([key](double k) { return k < key; });
      if (below == first) below = split([key](double k) { return k <= key; });
    }
    if (below != last) {
      head_bounds_.push_back(static_cast<uint32_t>(below - heads_.begin()));
      continue;
    }
    std::sort(first, last);
    heads_sorted_ = head_bounds_.back();
    head_bounds_.pop_back();
  }
}

// The plan near now by groups: whether a job's request (`duration`) is over the longest run in
// which a job of its `procs` could start now, or before near_until_ and end by exact_until_ (as in
// near_from()); then it and the rest of its group, of the same request, are left out, and
// exact_until_ comes down to runs.beyond.
//
// A job of as many procs or more and as long or longer than one passed over or left out in
// this plan (passed_, pass_over_later()) is passed over too, without its runs: the profile only
// loses procs and exact_until_ only falls, so its runs are no longer and it cannot start now;
// it starts no earlier than that one, at or after exact_until_ as that one left it (in the
// plan from scratch too, which has no more free procs), so exact_until_ needs no lowering. On
// the store's first 300,000 jobs, 63% of WFP3's jobs passed over are found so (from passed
// jobs alone); side by side, medians of 5, WFP3 167k -> 174k jobs/s, UNICEP 253k -> 278k,
// SJBF 250k -> 275k, FCFS 269k -> 281k.
inline bool Simulator::passed_over(int32_t procs, double duration) {
  if (std::isinf(near_until_)) return false;
  for (const auto& [p, d] : passed_)
    if (procs >= p && duration >= d) return true;
  if (procs_runs_.size() <= static_cast<size_t>(procs)) procs_runs_.resize(procs + 1);
  ProcsRuns& k = procs_runs_[procs];
  // Most jobs walked are not passed over (63% under UNICEP at x0.25): the walk of the runs
  // stops at one long enough, and is made whole only for a job that is longer than it.
  fresh_runs(k, procs, duration);
  if (duration <= near_limit(k.runs.within)) return false;
  exact_until_ = std::min(exact_until_, k.runs.beyond);
  pass_over_later(procs, duration);
  return true;
}

// Adds (procs, duration) to passed_, dropping the pairs it covers.
inline void Simulator::pass_over_later(int32_t procs, double duration) {
  passed_.erase(
      std::remove_if(passed_.begin(), passed_.end(),
                     [&](const auto& x) { return x.first >= procs && x.second >= duration; }),
      passed_.end());
  passed_.push_back({procs, duration});
}

// The longest request a job may have not to be passed over where runs.within is `within`: a
// little more, for the rounding of a run's end minus its start; the jobs visited that do not
// fit near now after all are left out one by one (reserve_near()).
inline double Simulator::near_limit(double within) const {
  return within + 1e-9 * (std::fabs(near_until_) + within);
}

// Reserves a job of `procs` for `duration` at its earliest start and returns it, or, in the plan
// near now where that start is at or after near_until_ or its run ends past exact_until_, leaves it
// out, brings exact_until_ down to that start (no earlier one fits in the plan from scratch) and
// returns NaN.
inline double Simulator::reserve_near(int32_t procs, double duration) {
  const Profile::Slot slot = profile_.earliest_slot(procs, duration);
  if (slot.at < near_until_ && slot.at + duration <= exact_until_) {
    profile_.reserve(slot, procs, duration);
    return slot.at;
  }
  exact_until_ = std::min(exact_until_, slot.at);
  return std::numeric_limits<double>::quiet_NaN();
}

// The free procs back from the jobs planned to start, which start no more.
void Simulator::unplan_starts() {
  for (int32_t j : starting_)
    if (runtime(j) > 0) free_ += w_.procs[j];
  starting_.clear();
}

void Simulator::start_planned() {
  for (int32_t j : starting_)
    if (runtime(j) > 0) free_ += w_.procs[j];
  for (int32_t j : starting_) start(j);
  starting_.clear();
}

// Whether a job of this estimate that starts now in the plan near now starts in the plan from
// scratch too: its run and the instant now itself end before exact_until_, where the
// reservations left out may begin. A job of estimate 0 still needs its procs at now
// (docs/simulation.md), so where a left-out reservation begins now it cannot tell.
inline bool Simulator::before_left_out(double duration) const {
  return now_ < exact_until_ && now_ + duration <= exact_until_;
}

inline bool Simulator::can_start_now(int32_t job) const {
  return can_start_now(w_.procs[job], estimate(job));
}

inline bool Simulator::can_start_now(int32_t procs, double duration) const {
  return procs <= free_ && profile_.fits_now(procs, duration);
}

}  // namespace ddppo
