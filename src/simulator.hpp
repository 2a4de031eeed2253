// Event-driven cluster simulator with the "pick and wait" decision model of RLScheduler
// (Zhang et al., SC'20) and none/EASY/conservative backfilling on the users' requests or on
// EASY++ runtime predictions; semantics in docs/simulation.md. One Simulator runs one window
// [begin, end) of a Workload.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <queue>
#include <set>
#include <utility>
#include <vector>

#include "head_tournament.hpp"
#include "policy.hpp"
#include "predictions.hpp"
#include "profile.hpp"
#include "waiting_index.hpp"
#include "workload.hpp"

namespace ddppo {

// What the RL environment decides besides the picks (docs/simulation.md, "Decision model").
struct AgentChoices {
  bool backfill = false;  // the jobs a backfill scan starts (env.agent_backfill)
  bool rules = false;     // the backfill and its order, at each decision (env.order_actions)
};

// What a rollout sees of what is to come (BatchEnv::rule_costs()): the window's later arrivals,
// and the jobs' true runtimes (without them, each job runs for its estimate).
struct Foresight {
  bool arrivals = true;
  bool runtimes = true;
  bool all() const { return arrivals && runtimes; }
};

class Simulator {
 public:
  Simulator(const Workload& w, size_t begin, size_t end, int32_t machine_procs, Policy policy,
            Backfill backfill, Estimate estimate = Estimate::kRequest, AgentChoices agent = {});

  // Picks by the heuristic until every job of the window has started; returns start times
  // (index i is job begin + i).
  const std::vector<double>& run();
  // run(), given up (false) once the window's total bounded slowdown is sure to end above
  // `most` (least_total_bsld(), every kPicksABound picks; never where `most` is infinite).
  bool run_within(double most);

  // The decision interface used by the RL environment: after construction and after each
  // pick(), the simulator stands at the next decision (waiting jobs, nothing committed)
  // or is done.
  bool done() const { return done_; }
  double now() const { return now_; }
  int32_t free_procs() const { return free_; }
  const std::vector<int32_t>& waiting() const;
  void pick(int32_t job);
  const std::vector<double>& start_times() const { return start_; }
  // The least total bounded slowdown the window's jobs can end with: the started jobs', and
  // each other job's had it started now (a later start only raises it).
  double least_total_bsld() const;
  // The same, moved out of a simulator that is done with them.
  std::vector<double> take_start_times() && { return std::move(start_); }
  // The jobs started so far, in the order they started.
  const std::vector<int32_t>& started_jobs() const { return started_jobs_; }

  // Running jobs by start + requested_time, their estimated end with `estimate = request`
  // (jobs of runtime 0 never run).
  const std::vector<Running>& running() const { return running_; }
  // Picks the job at `position` of waiting() (the RL environment's action).
  void pick_at(size_t position);
  // The heuristic's pick among waiting()[0, count): its position there.
  size_t heuristic_position(size_t count) const;
  // The RL environment's wait (docs/simulation.md, "Decision model"): at a decision,
  // start nothing and move to the next event time, where the next decision follows. Only
  // while an event is still to come: the earliest of the next arrival's submit and the next
  // completion (infinity when neither is left).
  double next_event() const;
  bool can_wait() const { return !done_ && committed_ < 0 && std::isfinite(next_event()); }
  void wait();
  // From now on, only what `f` sees: without its arrivals no job arrives after now (the run
  // is done when the jobs waiting now have started); without its runtimes every job runs for
  // its estimate (request or EASY++ prediction, as backfilling takes it), the running ones
  // until their estimated ends (those past them end now, before the decision), and the
  // EASY++ predictions stay those of now.
  void limit_foresight(Foresight f);
  // The runtime this run gives `job`: its own, or after limit_foresight() without the
  // runtimes its estimate.
  double runtime(int32_t job) const { return estimated_runs_ ? estimate(job) : w_.runtime[job]; }
  // The RL environment's rule actions (docs/simulation.md, "Decision model"): with
  // `agent.rules`, at a decision, the backfill scans from now on are b's in order p (and
  // heuristic_position() and run()'s picks follow p).
  void set_rule(Policy p, Backfill b);

  // The RL environment's agent backfilling (docs/simulation.md, "Decision model"): with
  // `agent_backfill`, a backfill scan that could start a job stops at a backfill decision
  // instead of starting the heuristic's jobs (src/backfill_decisions.cpp).
  bool backfilling() const { return backfilling_; }
  int32_t committed() const { return committed_; }
  // At a backfill decision: whether waiting job `job` may start now within the guarantee.
  bool backfill_allows(int32_t job) const;
  // The committed job's shadow time (EASY's S; conservative: its reserved start) and EASY's
  // extra procs left, as of the current backfill decision.
  double shadow_time() const { return shadow_.time; }
  int32_t extra_procs() const { return shadow_.extra; }
  // Starts the allowed job at `position` of waiting() now; the decision stays at this time
  // if another job is still allowed, else the scan ends as stop_backfill() ends it.
  void backfill_at(size_t position);
  // Ends this scan: the clock moves to the next event time.
  void stop_backfill();

 private:
  using Completion = std::pair<double, int32_t>;  // (end, job), min-heap

  // The picked job, out of the queue, starts or is committed.
  void take(int32_t job);
  // Whether a job of queue_ has left the queue (stale until waiting() compacts it).
  bool left(int32_t job) const { return job == committed_ || !std::isnan(start_[job - begin_]); }
  int32_t pick_heuristic() const;
  int32_t pick_wfp3() const;
  template <typename Key>
  int32_t lowest(Key key) const;
  // WFP3's score is -pow(w/r, 3) * n, and pow() is slow. Picks and ranks use
  // w^3 * (n / r^3) with n / r^3 computed once, within 1e-14 of the score's magnitude:
  // only keys closer than kWfp3Close (relative) can be out of order, and those are settled by
  // the score.
  static constexpr double kWfp3Close = 1e-9;
  static double wfp3_product(double now, double submit, double cached) {
    double wait = now - submit;
    return wait * wait * wait * cached;
  }
  // UNICEP's score with its divisor computed once.
  static double unicep_score(double now, double submit, double divisor) {
    return -(now - submit) / divisor;
  }
  // cached_'s value for job j under policy_.
  double cached_of(size_t j) const;
  // An empty index_ (FCFS, SJF, F1) or groups_ (the others) for policy_; FCFS and SJF get both
  // where plans_by_groups().
  void make_index();
  // A job joins or leaves the waiting jobs of index_ and groups_ (and ordered_heads_).
  void index_add(int32_t job);
  void index_remove(int32_t job);
  void sjbf_rekey(int32_t user);
  void settle_capped(int32_t user);
  void sjbf_move(size_t group, int32_t was, int32_t now);
  void start(int32_t job);
  void advance();
  void apply_events();
  void settle();
  void backfill_scan();
  bool scan_or_decide();
  bool find_backfills();
  void plan_backfills();
  void easy_scan();
  struct Shadow {
    double time;    // S
    int32_t extra;  // procs free at S beyond the committed job's
  };
  Shadow easy_shadow();
  bool easy_holds(const Shadow& s);
  bool admit(int32_t job, Shadow& s) const;
  // Whether EASY may start the waiting job now: it fits the free procs and either ends by S or
  // fits in extra. In the class: a scan tests every candidate with it.
  bool easy_allows(int32_t job, const Shadow& s) const {
    return w_.procs[job] <= free_ && (w_.procs[job] <= s.extra || now_ + estimate(job) <= s.time);
  }
  void scan_in_rank_order(Shadow& s);
  void scan_candidates(Shadow& s);
  bool static_order() const {
    return policy_ == Policy::kFcfs || policy_ == Policy::kSjf || policy_ == Policy::kF1;
  }
  // FCFS's conservative scans on requests merge groups of like jobs, as WFP3's do, where the
  // window holds more sizes than this: the plan by index, near now by size class, pays where
  // they are few. CPU time, FCFS + conservative, index -> groups (before the groups' heads
  // were kept in order, which made the groups faster still), jobs/s: LANL-CM5 (6 sizes)
  // x1 646k -> 496k, x0.5 ~210k -> ~130k, x0.25 286k -> 131k; HPC2N (45) 1.92M -> 1.61M,
  // 399k -> 297k, 78k -> 141k; KTH-SP2 (97) 859k -> 824k, 40k -> 98k, 32k -> 59k; lublin_256
  // (181) 117k -> 167k, 25k -> 44k, 19k -> 25k; the store (965; first 20,000 / 100,000 jobs)
  // 34k -> 152k, 3.3k -> 62k.
  // On EASY++ predictions, FCFS's, SJF's and F1's conservative scans plan by index only where
  // there are as few sizes, else in a ranked walk of the queue, as the other orders do. jobs/s,
  // ranked walk -> index, LANL-CM5 (6 sizes): x1 FCFS 458k -> 436k, SJF 1.12M -> 1.05M, F1
  // 1.69M -> 1.43M; x0.5 2.5k -> 96k, 33k -> 115k, 69k -> 742k; x0.25 1.4k -> 77k, 9.4k ->
  // 37k, 20k -> 298k; but KTH-SP2 (97) x0.25 FCFS 11.9k -> 13.1k, F1 16.7k -> 5.1k, lublin_256
  // (181) x0.5 FCFS 51k -> 21k, HPC2N (45) x0.25 FCFS 70k -> 28k (with a tree per user).
  static constexpr size_t kIndexPlanSizes = 16;
  bool window_has_many_sizes() const;
  bool many_sizes_ = false;  // conservative (or rule actions) only: window_has_many_sizes()
  // Conservative scans with requests plan by groups under FCFS and F1 where the window holds
  // many sizes, and under SJF where its groups also hold many jobs each (groups_hold_many_): SJF
  // ranks long requests last, so its last job that can start comes late in a long queue of few
  // requests (the store's first 300,000 jobs, 10 requests, 81 jobs a group: by index 13.8k
  // jobs/s, by groups 115k), but by groups it was slower where groups hold few jobs (KTH-SP2
  // 16 a group, x0.25 418k -> 244k; lublin_256 1.6, 430k -> 136k; HPC2N 9, 653k -> 517k). F1
  // (its score rises with the submit time, as FCFS's, in a group of equal procs and request),
  // by index -> by groups (medians of 3 side by side, or one run): KTH-SP2 x0.25 3.3k -> 131k,
  // x0.5 36k -> 235k (1), x1 1.27M -> 1.38M; the store's first 300,000 jobs 404k -> 872k (2);
  // lublin_256 x0.25 71k -> 145k (1), but x0.5 778k -> 537k, x1 832k -> 786k; HPC2N x0.25
  // 160k -> 172k (1), x1 2.44M -> 2.10M: the worst case 40x faster, the others above 500k.
  bool plans_by_groups() const {
    return (policy_ == Policy::kFcfs || policy_ == Policy::kF1 ||
            (policy_ == Policy::kSjf && groups_hold_many_)) &&
           estimate_ == Estimate::kRequest && index_scans() == WaitingIndex::Scans::kConservative &&
           many_sizes_;
  }
  static constexpr size_t kManyJobsPerGroup = 32;
  bool window_groups_hold_many() const;
  bool groups_hold_many_ = false;  // many_sizes_ only: window_groups_hold_many()
  // The scans that use index_: EASY's and conservative's (on predictions, with few sizes), but
  // not an agent's.
  WaitingIndex::Scans index_scans() const {
    if (agent_backfill_) return WaitingIndex::Scans::kNone;
    if (backfill_ == Backfill::kEasy) return WaitingIndex::Scans::kEasy;
    if (backfill_ == Backfill::kConservative && (estimate_ == Estimate::kRequest || !many_sizes_))
      return WaitingIndex::Scans::kConservative;
    return WaitingIndex::Scans::kNone;
  }
  // Whether scans on predictions take groups of one user (their jobs one prediction): EASY's,
  // and conservative's under WFP3, UNICEP and SJBF (predicted_groups()).
  bool groups_by_user() const {
    return policy_ == Policy::kSjbf ||
           (estimate_ == Estimate::kPredicted &&
            (index_scans() == WaitingIndex::Scans::kEasy || predicted_groups()));
  }
  bool predicted_groups() const {
    return estimate_ == Estimate::kPredicted && backfill_ == Backfill::kConservative &&
           !agent_backfill_ && !static_order();
  }
  // The prediction of every job of group g (groups_by_user(): one user, one request).
  double group_prediction(size_t g) const {
    return predictions_->predict_for(group_users_[g], groups_->request_of(g));
  }
  // A group's estimate in a conservative scan by groups: its request, or (predicted_groups())
  // its prediction as group_predictions_ keeps it.
  double group_estimate(size_t g) const {
    return estimate_ == Estimate::kPredicted ? group_predictions_[g] : groups_->request_of(g);
  }
  void conservative_scan();
  struct RankedOrder;
  struct IndexOrder;
  template <typename Order>
  bool plan_through(const Order& order, size_t k, size_t last);
  double plan_from_scratch();
  bool plan_holds();
  bool plan_by_index(bool held, double near);
  bool plan_by_groups(double near);
  void fitting_groups();
  bool walk_groups();
  bool base_kept_ = false;  // a skipped plan near now left its profile and groups to the next

  bool runs_past_near() const;
  void learn_near(bool told);
  void learn_narrow(size_t walked, bool narrowed);
  bool group_fits(size_t g) const;
  size_t last_fitting(size_t below);
  bool passed_over(int32_t procs, double duration);
  void pass_over_later(int32_t procs, double duration);
  double near_limit(double within) const;
  double reserve_near(int32_t procs, double duration);
  double fit_until(int32_t procs) const;
  size_t near_from(size_t r, size_t last);
  bool near_runs(size_t c);
  struct ProcsRuns;
  bool fresh_runs(ProcsRuns& k, int32_t procs,
                  double enough = std::numeric_limits<double>::infinity());
  bool hopeful(int32_t job) const { return hopeful_[job - begin_] == scan_; }
  double priority(int32_t job) const;
  using Keyed = std::pair<double, int32_t>;  // (rank key, job)
  // Inline: an EASY scan keys and compares every candidate (scan_candidates).
  Keyed keyed(int32_t job) const { return keyed(job, w_.submit[job], cached_[job - begin_]); }
  // The same from the job's submit time and cached_ value, as a group keeps them.
  Keyed keyed(int32_t job, double submit, double cached) const {
    switch (policy_) {
      case Policy::kWfp3:
        return {-wfp3_product(now_, submit, cached), job};
      case Policy::kUnicep:
        return {unicep_score(now_, submit, cached), job};
      default:
        return {priority(job), job};
    }
  }
  // Group g's oldest waiting job `job` keyed as a walk orders it (SJBF: by its user's capped
  // score as ordered_heads_ holds it, current once apply_events() is done).
  Keyed head(size_t g, int32_t job) const {
    if (policy_ != Policy::kSjbf) return keyed(job);
    const int32_t u = group_users_[g];
    const double key = group_key(g);
    return {u >= 0 ? std::min(user_capped_[u], key) : key, job};
  }
  // Group g's oldest waiting job keyed as head() keys it; under WFP3 and UNICEP from the
  // group's arrays, without reading the job's row (narrow_heads() keys some dozens a plan).
  Keyed oldest_head(size_t g) const {
    const int32_t j = groups_->oldest_of(g);
    if (policy_ != Policy::kWfp3 && policy_ != Policy::kUnicep) return head(g, j);
    return keyed(j, groups_->oldest_submit(g), groups_->cached_of(g));
  }
  // SJBF: the key of group g's request (SjbfPicks' too), and whether its oldest job is among
  // its user's capped_jobs_ (that key is over the user's capped score).
  double group_key(size_t g) const { return at_least_tenth(groups_->request_of(g)); }
  bool in_capped(size_t g) const {
    const int32_t u = group_users_[g];
    return u >= 0 && user_capped_[u] < group_key(g);
  }
  // Whether keyed job a comes before b in policy order: by the score where the keys are close.
  bool before(const Keyed& a, const Keyed& b) const {
    if (close_keys(a.first, b.first))
      return std::make_pair(priority(a.second), a.second) <
             std::make_pair(priority(b.second), b.second);
    return a < b;
  }
  // A max-heap comparator that puts the first in policy order on top.
  auto after_in_order() const {
    return [this](const Keyed& a, const Keyed& b) { return before(b, a); };
  }
  void merge_heads();
  bool narrow_heads(const Keyed& at, double bound);
  size_t first_heads(size_t end);
  double deepest_head_key(bool narrowed) const;
  Keyed merge_pop();
  void push_next(const Keyed& job);
  // The groups' heads not walked yet in this plan (heads_end_ - merged_ where each head has its
  // own entry).
  size_t heads_left() const { return heads_end_ - merged_ + capped_left_; }
  void settle_heads();
  void sort_heads_through(size_t i);
  bool close_keys(double x, double y) const {
    return policy_ == Policy::kWfp3 &&
           std::fabs(x - y) <= kWfp3Close * std::max(std::fabs(x), std::fabs(y));
  }
  void settle(std::vector<Keyed>::iterator first, std::vector<Keyed>::iterator last) const;
  void settle_runs(std::vector<Keyed>& keys) const;
  void sort_by_policy(std::vector<int32_t>& jobs) const;
  void rerank();
  size_t rank_hopeful();
  void waiting_count_add(int32_t procs, int32_t delta);
  int32_t waiting_fitting() const;
  bool can_start_now(int32_t job) const;
  bool can_start_now(int32_t procs, double duration) const;
  bool before_left_out(double duration) const;
  void unplan_starts();
  void start_planned();
  // What backfilling takes as the job's runtime if it started now: request or prediction.
  double estimate(int32_t job) const {
    return estimate_ == Estimate::kPredicted ? predictions_->predict(job) : w_.requested_time[job];
  }
  double sjbf_score(int32_t job) const { return at_least_tenth(predictions_->predict(job)); }
  // The same for every job of SJBF's group g.
  double sjbf_score_of(size_t g) const { return at_least_tenth(group_prediction(g)); }
  // User u's mean runtime, infinite without history.
  double user_mean(int32_t u) const {
    return predictions_->predict_for(u, std::numeric_limits<double>::infinity());
  }
  // SJBF's capped score of user u (SjbfPicks), infinite without history or user.
  double sjbf_capped(int32_t u) const {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    return u < 0 ? kInf : at_least_tenth(user_mean(u));
  }
  // The running jobs with their estimated ends (max(., now) gives them at now), by that end.
  const std::vector<Running>& estimated_ends() {
    return estimate_ == Estimate::kPredicted ? predictions_->ends_at(now_) : running_;
  }

  Workload w_;
  size_t begin_, end_;
  int32_t machine_;
  Policy policy_;
  Backfill backfill_;
  Estimate estimate_;

  double now_;
  int32_t free_;
  size_t next_arrival_;
  size_t arrivals_end_;          // end_, or where limit_foresight() stopped the arrivals
  bool estimated_runs_ = false;  // limit_foresight() without the runtimes
  int32_t committed_ = -1;
  bool done_ = false;
  size_t started_ = 0;
  size_t ended_ = 0;  // completions so far
  // Waiting jobs in (submit, id) order, without the committed one; after a run's picks and
  // scans it may also hold `stale_` jobs that left, until waiting() compacts it.
  mutable std::vector<int32_t> queue_;
  mutable size_t stale_ = 0;
  std::optional<WaitingIndex> index_;  // FCFS, SJF and F1's, for picks and EASY scans
  // WFP3, UNICEP and SJBF's, for picks and EASY scans; FCFS's conservative scans' on many sizes
  std::optional<WaitingGroups> groups_;
  std::vector<int32_t> group_users_;  // groups_by_user(): per group, its user_index()
  // predicted_groups(): per group with waiting jobs, group_prediction(), set as it gets its
  // first waiting job and again as its user's history changes (user_groups_ lists the user's
  // groups with waiting jobs, as for SJBF below). A plan tests every group that fits beside
  // the profile, and some hundreds of them fit on predictions (LANL-CM5 x0.25, WFP3: 329 of 385
  // tested a plan), each read from the user's history before.
  std::vector<double> group_predictions_;
  bool tracks_user_groups() const {
    return (keep_heads_ && policy_ == Policy::kSjbf) || predicted_groups();
  }
  std::optional<SjbfPicks> sjbf_picks_;                    // SJBF without backfilling: its picks
  mutable std::optional<HeadTournament> head_tournament_;  // WFP3's, UNICEP's likewise
  // Where fewer groups wait, keying each at a pick costs less than finding the tournament's
  // changed nodes again (LANL-CM5 at its native load: WFP3 3.7M -> 2.3M jobs/s, UNICEP 3.9M
  // -> 2.7M); it still follows every head, at one node each while it is not asked.
  static constexpr size_t kTournamentGroups = 128;
  bool tournament_picks() const { return head_tournament_ && groups_->live() > kTournamentGroups; }
  // SJBF with conservative backfilling: the oldest job of every group with waiting jobs, keyed
  // by the group's prediction, in order. A prediction changes only as its user's history does
  // (apply_events()), so the order is kept as jobs arrive and start: a pick takes the first, a
  // conservative scan walks it, and neither keys every group (on LANL-CM5 x0.5, some
  // hundreds). A group of user u scores min(capped(u), key of its request) (SjbfPicks), so u's
  // groups whose key is over capped(u) all score capped(u), in the order of their oldest jobs:
  // one entry, (capped(u), the first of those jobs), stands for them all, and the others wait in
  // capped_jobs_[u], from which a walk takes each after the one before (plan_by_groups()). A
  // change of u's history moves that entry and the groups whose key lies between the old and
  // the new capped(u), not every group of u whose request is over its mean (the store at load
  // 1.2, first 150,000 jobs: 8,488 groups moved where 881,789 did; conservative SJBF on its
  // first 300,000 jobs 182k-185k -> 208k jobs/s, LANL-CM5 x0.25 12% fewer instructions). Per
  // user: its groups (at user_at_ in the list), its capped(u) as the order holds it, those jobs,
  // and its entry (job -1: none). FCFS's, SJF's and F1's conservative scans by groups walk them
  // too, each keyed by its own score (FCFS's at_least_tenth of the submit time, SJF's of the
  // request, F1's from its request, procs and submit time), which never changes (CPU time
  // against sorting them at each scan, FCFS: the store's first 20,000 / 100,000 jobs 148k ->
  // 176k / 60k -> 77k jobs/s, KTH-SP2 x0.5 96k -> 146k, lublin_256 x0.5 44k -> 79k, HPC2N x0.25
  // 143k -> 154k, x1 the same).
  bool keep_heads_ = false;
  static constexpr size_t kBandGroupsPerClass = 64;
  bool fit_by_bands_ = false;
  std::set<Keyed> ordered_heads_;
  std::vector<std::vector<uint32_t>> user_groups_;
  std::vector<uint32_t> user_at_;
  std::vector<double> user_capped_;
  std::vector<std::set<int32_t>> capped_jobs_;
  std::vector<Keyed> capped_entry_;
  std::vector<Keyed> candidates_;          // an EASY scan's, kept to reuse its memory
  mutable std::vector<Keyed> near_picks_;  // pick_wfp3()'s (product, job), kept likewise
  std::vector<Running> running_;           // sorted by start + requested_time
  std::priority_queue<Completion, std::vector<Completion>, std::greater<Completion>> ends_;
  std::vector<double> start_;
  std::vector<int32_t> started_jobs_;
  // Per job: the score of policies that do not depend on time, UNICEP's divisor, WFP3's
  // n / r^3.
  std::vector<double> cached_;
  // Fenwick tree over procs of the number of waiting jobs (committed one included): a scan
  // can start nothing unless some waiting job needs at most the free procs.
  std::vector<int32_t> waiting_by_procs_;
  // The waiting jobs in policy order as of the last conservative scan that walked the queue
  // (WFP3, UNICEP, SJBF or predicted estimates); per job, the last scan at which it was
  // hopeful, and whether it has ever joined ranked_.
  std::vector<Keyed> ranked_;
  std::vector<uint32_t> hopeful_;
  std::vector<char> listed_;
  uint32_t scan_ = 0;  // conservative scans so far
  // The last conservative scan's plan, which profile_ holds: the waiting jobs of index_ ranks
  // [0, planned_) at that scan started or hold reservations, the earliest at plan_earliest_,
  // with committed_ = plan_head_ after plan_started_ starts and plan_ended_ completions.
  size_t planned_ = 0, plan_started_ = 0, plan_ended_ = 0;
  int32_t plan_head_ = -1;
  // The last EASY scan on requests: it left no waiting job that could start, with committed_ =
  // easy_head_ after easy_ended_ completions, S and the extra left after its starts at
  // easy_shadow_, the jobs before easy_arrived_ come.
  int32_t easy_head_ = -1;
  size_t easy_ended_ = 0, easy_arrived_ = 0;
  Shadow easy_shadow_{0, -1};
  double least_request_ = std::numeric_limits<double>::infinity();  // the least positive one
  double plan_earliest_ = 0;
  std::vector<Profile::Step> lows_;  // the profile's lows() as a scan begins
  // The plan's horizons: profile_ holds the plan from scratch's free procs before
  // exact_until_ and at least as many from there on; jobs whose reservations would start at
  // or after near_until_ are left out of it. The jobs a scan starts, once it is certain.
  double exact_until_ = 0, near_until_ = 0;
  std::vector<int32_t> starting_;
  // The plan near now (FCFS, WFP3, UNICEP, SJBF) reaches this far past now: a third of the
  // longest request among the window's jobs. On LANL-CM5 x0.25 under FCFS it then tells what
  // starts at all but 109 of ~169,000 scans, which make the whole plan; a wider one places more
  // reservations at every scan, a narrower one makes the whole plan more often (instructions
  // with 1/2, 1/2.5, 1/3, 1/3.5 and 1/4 of it: 4.93G, 4.28G, 3.86G, 4.25G, 4.71G, the last with
  // 1,667 whole plans; from 1/2 to 1/3 WFP3 -10%, UNICEP -16%, SJBF -9%; on KTH-SP2 at x1,
  // x0.5, x0.25 and lublin_256 at x1, x0.5: FCFS within 0.4%, WFP3 2% to 11% fewer).
  double near_width_ = 0, longest_request_ = 0;
  // By groups, where a group that fits as a scan begins would run past the plan near now
  // (runs_past_near()): whether this scan's plan near now was made all the same, and how many
  // such plans to skip next and skipped after the last one made could not tell
  // (learn_near()).
  bool probing_near_ = false;
  uint32_t near_skips_ = 0, near_streak_ = 0;
  // A size's free-procs runs (Profile::runs) as of profile_.changes() == changes, exact_until_
  // == until and whether the procs fitted free_ (fresh_runs()).
  struct ProcsRuns {
    Profile::Runs runs{0, 0};
    uint64_t changes = 0;
    double until = 0;
    bool fitted = false;
  };
  // near_from()'s, per size class of index_: its runs; a rank no later than its next job with
  // a request of at most runs.within (that job where `exact`); the jobs with requests over
  // `covered` are left out with exact_until_ at most their start, and the first one at most is
  // at covered_from; the class slots of both.
  struct NearClass {
    ProcsRuns runs;
    size_t candidate = 0, candidate_slot = 0;
    bool exact = false;
    double covered = std::numeric_limits<double>::infinity();
    size_t covered_from = 0, covered_slot = 0;
  };
  std::vector<NearClass> near_;
  // passed_over()'s, per procs.
  std::vector<ProcsRuns> procs_runs_;
  std::vector<std::pair<int32_t, double>> passed_;  // (procs, estimate) passed over, this plan
  // plan_by_groups()'s, which counts its calls (group_plans_): per group, the last call that
  // found it unable to start a job; per class of groups of equal procs, the groups that fitted
  // now as that call began (those before `cut`); the classes with such a group, in order, and
  // the one where the last of them is; every group's oldest job keyed (heads_, merge_heads()),
  // sorted by key through heads_sorted_ (head_bounds_: sort_heads_through()), in policy order
  // through heads_settled_, walked through merged_; the next jobs of the groups walked (nexts_).
  uint32_t group_plans_ = 0;
  std::vector<uint32_t> dropped_;
  struct FitCut {
    uint32_t plan = 0;
    size_t cut = 0;
  };
  std::vector<FitCut> fit_cuts_;
  std::vector<uint32_t> fitted_;  // predicted_groups(): per group, the last call it fitted at
  std::vector<uint32_t> fitted_groups_;  // and those of this call, in order (through fit_at_)
  size_t fit_at_ = 0;
  std::vector<size_t> fit_classes_;
  double fit_longest_ = 0;
  size_t fit_class_ = 0;
  // heads_[0, heads_end_): the heads (heads_ keeps its length between plans, not cleared anew).
  std::vector<Keyed> heads_, nexts_;
  size_t heads_end_ = 0;
  size_t capped_left_ = 0;  // SJBF: the heads behind users' entries not pushed into nexts_ yet
  std::set<Keyed>::const_iterator next_head_;  // keep_heads_: the next of ordered_heads_ to walk
  std::vector<uint32_t> head_bounds_;
  size_t merged_ = 0, heads_sorted_ = 0, heads_settled_ = 0;
  // narrow_heads()'s: whether it kept only some heads (then keyed, in heads_, as WFP3's are),
  // the job walked when it did, and the profile's longest runs before its bound
  // (Profile::runs_before()).
  bool narrowed_ = false;
  int32_t narrowed_at_ = -1;
  size_t narrow_after_ = 32;  // the jobs a plan walks before it first tries (learn_narrow())
  std::vector<uint32_t> open_groups_;  // narrow_heads()'s, scratch
  std::vector<std::pair<int32_t, double>> runs_before_;
  Profile profile_;  // conservative backfilling's, kept to reuse its memory between scans
  std::optional<Predictions> predictions_;  // sjbf or estimate = predicted only
  // Agent backfilling: whether the simulator stands at a backfill decision, its shadow, and
  // (conservative) per job the last decision at which it was allowed.
  bool agent_backfill_;
  bool any_rule_;  // set_rule() may change policy_ and backfill_
  bool backfilling_ = false;
  Shadow shadow_{0, 0};
  std::vector<uint32_t> allowed_;
  uint32_t decisions_ = 0;
};

}  // namespace ddppo
