// A batch of RL scheduling environments over the simulator (ARCHITECTURE.md, "RL
// environment contract"). Each environment runs episodes of `window_jobs` consecutive jobs
// of a shared workload, from seeded random starts; one step() applies one action per
// environment and writes observations, masks, rewards and episode ends into caller-owned
// arrays. Features and their normalisation: docs/environment.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "metrics.hpp"
#include "policy.hpp"
#include "predictions.hpp"
#include "simulator.hpp"
#include "workload.hpp"

namespace ddppo {

enum class Reward { kBsld, kWait, kUtilization, kFairshare };
Reward parse_reward(const std::string& name);

constexpr size_t kJobFeatures = 11;
constexpr size_t kClusterFeatures = 3;
// With `history`: per job slot, EASY++ and its user's history; per cluster, the queue past K
// (docs/environment.md, "History").
constexpr size_t kHistoryJobFeatures = 7;
constexpr size_t kHistoryClusterFeatures = 6;
// With `agent_backfill`: per cluster, what a backfill decision is about (docs/environment.md,
// "Agent backfilling").
constexpr size_t kBackfillClusterFeatures = 4;
// With `heuristic_ranks`: per job slot, its rank under each of kRankedPolicies, as feature 10
// is F1's (docs/environment.md, "Heuristic ranks").
constexpr size_t kRankJobFeatures = 4;
constexpr std::array<Policy, kRankJobFeatures> kRankedPolicies = {Policy::kSjf, Policy::kWfp3,
                                                                  Policy::kUnicep, Policy::kSjbf};
// With `fit_times`: per job slot, how long until it fits (docs/environment.md, "Fit times").
constexpr size_t kFitJobFeatures = 1;
// Every heuristic order, in the order that breaks ties between equal runs (`best`).
constexpr std::array<Policy, 6> kHeuristics = {Policy::kFcfs,   Policy::kSjf, Policy::kWfp3,
                                               Policy::kUnicep, Policy::kF1,  Policy::kSjbf};
// A heuristic rule: an order, and the backfill whose scans follow it.
struct Rule {
  Policy order;
  Backfill backfill;
};
// Whose picks heuristic_actions() gives (docs/environment.md, "Teachers").
enum class Teacher { kPolicy, kBest, kRollout };
constexpr size_t kSizeClasses = 4;        // procs <= 1/8, 1/4, 1/2 of the machine, larger
constexpr double kTimeScale = 12 * 3600;  // waits, requests and work are in units of 12 h
constexpr double kLogDecades = 6;         // log10 features: 10^6 s (11.6 days) maps to 1

struct EnvConfig {
  int32_t machine_procs;
  size_t window_jobs;
  size_t max_queue;  // K: waiting jobs shown, in FCFS order
  Policy policy;     // orders backfill scans (and the heuristic helper)
  Backfill backfill;
  Reward reward;
  // The runtime estimates of the backfill scans and of the reward baseline's run: the
  // requests, or the EASY++ predictions (docs/simulation.md).
  Estimate estimate = Estimate::kRequest;
  // When set, the reward is relative to this heuristic's on the same window (an
  // action-independent baseline: same expected gradient, much less variance).
  std::optional<Policy> baseline;
  // The reward is relative to the best heuristic's on the window: of every heuristic order's
  // run there, the one with the lowest avg bsld (docs/environment.md, "Best heuristic").
  bool baseline_best = false;
  // heuristic_actions() follows `policy`, the best heuristic of the window, or rollouts.
  Teacher teacher = Teacher::kPolicy;
  // With kBest: the jobs from the episode's start (to the workload's end at most) on which
  // the heuristics' runs choose the teacher; 0: the episode's window.
  size_t teacher_jobs = 0;
  // bsld and wait only: each job's share of the reward comes at the step it starts
  // (episode sums unchanged), not all of it at the episode's end.
  bool dense = false;
  // Slot K is the agent's wait: start nothing until the next arrival or completion
  // (docs/environment.md, "Waiting").
  bool wait = false;
  // Adds the history features (causal: only jobs completed by now count).
  bool history = false;
  // Backfill scans are the agent's: it starts the allowed jobs of its choice, one a step,
  // and slot K stops the scan (docs/environment.md, "Agent backfilling").
  bool agent_backfill = false;
  // Adds each job's rank under SJF, WFP3, UNICEP and SJBF (after the history features).
  bool heuristic_ranks = false;
  // Adds each job's time until it fits on the running jobs' requests (after the ranks).
  bool fit_times = false;
  // An action is a rule, an order of kHeuristics with a backfill of action_backfills (empty:
  // `backfill`): the order's pick among the visible jobs starts or is committed, and the
  // backfill scans are the rule's until the next decision; slot k shows rule k's pick
  // (docs/environment.md, "Order actions").
  bool order_actions = false;
  std::vector<Backfill> action_backfills;
};

// Per-job dense user ids (0-based), for the per-user features; a job the log gives no user
// is a user of its own (docs/environment.md, "Observation").
struct Accounts {
  const int32_t* user = nullptr;
  int32_t users = 0;
};

// Where step() and reset() write, one row per environment.
struct Outputs {
  float* jobs = nullptr;     // [B, S, job_features()], S = slots()
  float* cluster = nullptr;  // [B, cluster_features()]
  uint8_t* mask = nullptr;   // [B, S]: 1 where a job can be picked (slot K: where one may wait)
  float* reward = nullptr;   // [B]
  uint8_t* done = nullptr;   // [B]: the episode ended at this step (the row shows the next)
  int64_t* episode_start =
      nullptr;  // [B]: the window start of the episode that ended, or is running
  double* episode_metrics = nullptr;  // [B, 4]: avg_bsld, avg_wait, utilization, jain of ended ones
};

class BatchEnv {
 public:
  BatchEnv(const Workload& w, Accounts accounts, EnvConfig config,
           const std::vector<uint64_t>& seeds);
  size_t size() const { return envs_.size(); }
  // Slots of an observation: K job slots (with `order_actions`, one per rule),
  // and with `wait` or `agent_backfill` one more, which starts nothing until the next event
  // (the wait at a pick, the stop at a backfill decision).
  size_t slots() const { return choice_slots() + (config_.wait || config_.agent_backfill ? 1 : 0); }
  size_t choice_slots() const { return config_.order_actions ? rules() : config_.max_queue; }
  size_t job_features() const {
    return kJobFeatures + (config_.history ? kHistoryJobFeatures : 0) +
           (config_.heuristic_ranks ? kRankJobFeatures : 0) +
           (config_.fit_times ? kFitJobFeatures : 0) +
           (config_.order_actions ? rule_features() : 0);
  }
  // The rules of the actions (with order_actions) and of the best heuristic: rule k is order
  // k % 6 of kHeuristics with backfill k / 6 of backfills_.
  size_t rules() const { return kHeuristics.size() * backfills_.size(); }
  Rule rule(size_t k) const {
    return {kHeuristics[k % kHeuristics.size()], backfills_[k / kHeuristics.size()]};
  }
  size_t cluster_features() const {
    return kClusterFeatures + (config_.history ? kHistoryClusterFeatures : 0) +
           (config_.agent_backfill ? kBackfillClusterFeatures : 0);
  }
  void reset(Outputs out);
  // Actions are slots of the observation; at a pick, a slot without a job (or a masked
  // wait) picks slot 0; at a backfill decision, a slot the mask does not allow stops.
  void step(const int32_t* actions, Outputs out);
  // The teacher's pick among each environment's visible jobs; at a backfill decision, the job
  // its scan would start next. The teacher is `policy`, the episode's best heuristic, or the
  // rollout teacher (of the heuristics' picks, the one after which `policy` does best).
  void heuristic_actions(int32_t* actions) const;
  // With order actions, [B, slots()]: environment i's window avg bsld if it follows rule k
  // from now on, and with `wait` if it waits now and then follows the best rule (clairvoyant
  // by default: a training signal). With less foresight, the avg bsld of the jobs not started
  // yet that the rollout starts, on the runtimes it gives them (foreseen_bsld()); the wait
  // is masked where the rollouts could not wait (rule 0's cost).
  void rule_costs(double* costs, Foresight f = {}) const;
  // The heuristic heuristic_actions() follows in environment i's episode (the rollout
  // teacher's: `policy`, its rollouts').
  Policy teacher(size_t i) const { return envs_.at(i).teacher; }
  // The best heuristic of environment i's last finished episode and its avg bsld (NaN when
  // neither `teacher_best` nor `baseline_best` runs the heuristics; (fcfs, NaN) before one).
  std::pair<Policy, double> last_best(size_t i) const {
    return {envs_.at(i).last_best, envs_.at(i).last_best_bsld};
  }
  // The reward baseline's avg bsld on environment i's last finished episode's window (NaN
  // without a baseline, or before one ended).
  double last_baseline_bsld(size_t i) const { return envs_.at(i).last_baseline_bsld; }
  // Episodes started so far by environment i, the current one included.
  uint64_t episodes(size_t i) const { return envs_[i].episode + 1; }
  // Puts environment i back in its episode number `episode` after `actions` (for resuming
  // from a checkpoint); observe() then writes the observations.
  void restore(size_t i, uint64_t episode, const std::vector<int32_t>& actions);
  void observe(Outputs out);
  // Starts environment i's episode on the window at `start` (for evaluation on chosen
  // windows); observe() then writes the observations.
  void begin_at(size_t i, size_t start);
  // Start times of the jobs of environment i's last finished episode (empty before one).
  const std::vector<double>& last_start_times(size_t i) const { return envs_.at(i).last_start; }

 private:
  // What the history features need, kept as jobs arrive, start and end: each step costs
  // the arrivals, starts and ends since the last one (docs/environment.md, "History").
  struct History {
    std::optional<Predictions> predictions;  // the window's users' completed jobs (EASY++)
    size_t arrived = 0;                      // jobs [begin, arrived) have arrived
    size_t seen = 0;                         // the simulator's started_jobs() [0, seen) are in
    std::vector<int32_t> left;               // the waiting jobs that started, scratch
    int32_t committed = -1;  // agent backfilling: the committed job, out of the queue, not started
    std::vector<int32_t> running, waiting;   // per user: jobs running, jobs waiting
    using End = std::pair<double, int32_t>;  // (end, job) of a started job of runtime > 0
    std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
    double work = 0;                               // procs x requested_time of the waiting jobs
    std::array<int32_t, kSizeClasses> sizes = {};  // waiting jobs per size class
  };
  // Per job of the window, what an observation reads of it, in one cache line: what its row
  // and F1 score take from the job alone (computed once per window, not at every decision
  // that shows it) and the observations' scratch. At B = 64 on a long queue the environments'
  // jobs no longer stay in L2, and reading each visible job from eight arrays cost eight lines.
  struct alignas(64) WindowJob {
    float request, procs, log_request, log_procs;  // features 1, 2, 7 and 9
    double f1;                                     // F1's score
    double submit;
    double work;   // procs x requested time
    int32_t size;  // procs
    int32_t user;
    int32_t slot;       // its slot in the observation numbered `observed`, scratch
    uint32_t observed;  // Env::observations when it was last visible
    float log_wait;     // feature 8, as of Env::instants `instant` (the same time: reused)
    uint32_t instant;
  };
  static_assert(sizeof(WindowJob) == 64);
  using Ranked = std::pair<double, int32_t>;  // (score, job)
  // A user's history features (13 and 14) as of its recent jobs, and the log of its EASY++
  // prediction (feature 11 where that is below the request): they change only when one of
  // its jobs completes, not at every decision that shows one of its jobs.
  struct UserFeatures {
    int count = -1;  // of the recent jobs below; -1: not computed in this window
    std::array<int32_t, 2> recent = {-1, -1};
    float ratio = 0, log_mean = 0;
    double prediction = std::numeric_limits<double>::quiet_NaN();
    float log_prediction = 0;
  };
  struct Env {
    uint64_t seed = 0;
    uint64_t episode = 0;  // numbers the episodes: the window start is a hash of both
    size_t begin = 0;
    std::optional<Simulator> sim;
    double baseline_reward = 0;  // the baseline heuristic's reward on this window
    double baseline_bsld = std::numeric_limits<double>::quiet_NaN();       // and its avg bsld
    double last_baseline_bsld = std::numeric_limits<double>::quiet_NaN();  // the last episode's
    Policy teacher = Policy::kFcfs;    // heuristic_actions()'s heuristic in this episode
    size_t teacher_rule = 0;           // and its rule, with order actions
    Policy best = Policy::kFcfs;       // the window's best heuristic, when it is run
    size_t best_rule = 0;              // its rule (the next window's runs begin with it)
    double best_bsld = 0;              // its avg bsld (NaN when not run)
    Policy last_best = Policy::kFcfs;  // best and best_bsld of the last finished episode
    double last_best_bsld = std::numeric_limits<double>::quiet_NaN();
    double paid = 0;                     // dense reward given so far in this episode
    std::vector<double> last_start;      // the last finished episode's start times
    std::vector<int32_t> running_procs;  // per user, scratch for the features
    std::vector<double> queued_work;     // per user, scratch
    std::vector<WindowJob> window;       // per job of the window (job - begin)
    // The output rows the last observation filled (the others are 0); at first, any.
    size_t filled = std::numeric_limits<size_t>::max();
    // Observations in this episode, and the distinct times they were made at (the last: at).
    uint32_t observations = 0, instants = 0;
    double at = std::numeric_limits<double>::quiet_NaN();
    std::vector<UserFeatures> user_features;  // per user, with the history features
    // Per policy (its number): the visible jobs of the last observation in its order.
    std::array<std::vector<Ranked>, kHeuristics.size()> ranked;
    std::vector<int32_t> freed;  // fit times' free procs per end, scratch
    std::vector<float> rows;     // with order_actions: the visible jobs' rows, which slots show
    History history;             // with tracks_history() only
  };
  void start_episode(Env& e);
  void start_window(Env& e, size_t begin);
  void reset_window_jobs(Env& e) const;
  void run_heuristics(Env& e);
  // The rule of the lowest avg bsld on jobs [begin, end) and that run's metrics.
  std::pair<size_t, Metrics> best_heuristic(size_t begin, size_t end, size_t first) const;
  // With order actions, one per order, and one per backfill when there are several.
  size_t rule_features() const {
    return kHeuristics.size() + (backfills_.size() > 1 ? backfills_.size() : 0);
  }
  // The history is kept for its features, and for SJBF's EASY++ predictions (ranks, teacher,
  // order actions).
  bool tracks_history() const {
    return config_.history || config_.heuristic_ranks || config_.teacher != Teacher::kPolicy ||
           config_.order_actions;
  }
  double score_at(const Env& e, Policy p, int32_t job) const;
  void write_ranks(Env& e, Policy p, float* jobs, size_t column) const;
  void write_fit_times(Env& e, float* jobs, size_t column) const;
  int32_t lowest_position(const Env& e, Policy p) const;
  int32_t rollout_action(const Env& e) const;
  double rollout_bsld(const Env& e, int32_t action, const std::function<int32_t(const Env&)>& next,
                      Foresight f = {}) const;
  double foreseen_bsld(const Env& e, const Simulator& rollout) const;
  bool can_wait(const Env& e, Foresight f) const;
  void act(Env& e, int32_t action) const;
  float finish_episode(const Env& e, double* metrics) const;
  float dense_reward(Env& e) const;
  double reward_of(const Metrics& m) const;
  void observe(Env& e, size_t i, Outputs out) const;
  void clear_rows(Env& e, float* jobs, size_t filled) const;
  void observe_wait(const Env& e, float* f, uint8_t* mask) const;
  void observe_orders(Env& e, float* jobs, uint8_t* mask) const;
  void skip_hidden_backfills(Simulator& s) const;
  void observe_backfill(const Simulator& s, float* cluster) const;
  void start_history(Env& e);
  void track(Env& e, int32_t picked) const;
  void queue_job(History& h, int32_t job, int32_t sign) const;
  void record_start(History& h, int32_t job, double start, double runtime) const;
  size_t size_class(int32_t job) const;
  void observe_history(Env& e, float* jobs, float* cluster) const;
  const UserFeatures& user_features(Env& e, int32_t job, double p) const;

  Workload w_;
  Accounts accounts_;
  EnvConfig config_;
  std::vector<Backfill> backfills_;  // the rules': action_backfills, or `backfill`
  std::vector<Env> envs_;
};

}  // namespace ddppo
