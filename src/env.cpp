#include "env.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "nearly_sorted.hpp"
#include "replay.hpp"
#include "splitmix.hpp"

namespace ddppo {

namespace {
// A time on the log scale of the observation's log features: 10^kLogDecades s maps to 1.
float exact_log_time(double t) {
  return static_cast<float>(std::min(std::log10(1.0 + t) / kLogDecades, 1.0));
}

// log_time() writes x = 1 + t as 2^k z, z in [0.6875, 1.375), and splits that range into 128
// intervals by the 7 bits of x's mantissa after those of kFromBits; each holds 1 / c and
// log(c) for its middle c.
constexpr uint64_t kFromBits = 0x3fe6000000000000;  // 0.6875
struct LogInterval {
  double inverse, log;
};
const std::array<LogInterval, 128> kLogIntervals = [] {
  std::array<LogInterval, 128> intervals{};
  for (uint64_t i = 0; i < intervals.size(); ++i) {
    const uint64_t first = kFromBits + (i << 45), last = first + (uint64_t{1} << 45) - 1;
    double a, b;  // the interval's first and last z
    std::memcpy(&a, &first, sizeof a), std::memcpy(&b, &last, sizeof b);
    intervals[i] = {2 / (a + b), std::log((a + b) / 2)};
  }
  return intervals;
}();

// exact_log_time(t), bit for bit, mostly without glibc's log10, which took a tenth of the
// environment's step at submit x 0.5 (issue 17): for 1 + t >= 2, log(c) plus a polynomial in
// r = z / c - 1 (|r| < 0.004) is within 1e-15 of log(1 + t), relative (9e-16 at worst over 20
// million x), and glibc's log10 within 2 ulp of log10, so where a band of 1e-11 around the
// value rounds to one float, that float is exact_log_time()'s; elsewhere (about 1 call in
// 3,000) and for times under 1 s, exact_log_time() decides.
float log_time(double t) {
  const double x = 1.0 + t;
  if (!(x >= 2.0 && x <= std::numeric_limits<double>::max())) return exact_log_time(t);
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint64_t from = bits - kFromBits, z_bits = bits - (from & (uint64_t{0xfff} << 52));
  const LogInterval& in = kLogIntervals[(from >> 45) & 127];
  double z;
  std::memcpy(&z, &z_bits, sizeof z);
  // Products, not quotients: a division's latency would be most of the time here.
  const double r = z * in.inverse - 1, r2 = r * r;
  const double log1p_r = r - r2 * (0.5 - r * (1.0 / 3)) + r2 * r2 * (r * 0.2 - 0.25);
  const int k = static_cast<int>(static_cast<int64_t>(from) >> 52);
  const double v =
      (k * 0.6931471805599453 + in.log + log1p_r) * (1 / (2.302585092994046 * kLogDecades));
  const float low = static_cast<float>(std::min(v * (1 - 1e-11), 1.0));
  const float high = static_cast<float>(std::min(v * (1 + 1e-11), 1.0));
  return low == high ? low : exact_log_time(t);
}
}  // namespace

Reward parse_reward(const std::string& name) {
  if (name == "bsld") return Reward::kBsld;
  if (name == "wait") return Reward::kWait;
  if (name == "utilization") return Reward::kUtilization;
  if (name == "fairshare") return Reward::kFairshare;
  throw std::invalid_argument("unknown reward '" + name + "' (bsld, wait, utilization, fairshare)");
}

BatchEnv::BatchEnv(const Workload& w, Accounts accounts, EnvConfig config,
                   const std::vector<uint64_t>& seeds)
    : w_(w), accounts_(accounts), config_(config) {
  backfills_ = config_.order_actions && !config_.action_backfills.empty()
                   ? config_.action_backfills
                   : std::vector<Backfill>{config_.backfill};
  if (std::find(backfills_.begin(), backfills_.end(), config_.backfill) == backfills_.end())
    throw std::invalid_argument("the action backfills must hold the environment's backfill");
  for (size_t k = 1; k < backfills_.size(); ++k)
    if (std::find(backfills_.begin(), backfills_.begin() + k, backfills_[k]) !=
        backfills_.begin() + k)
      throw std::invalid_argument("an action backfill is listed twice");
  if (config_.window_jobs == 0 || config_.window_jobs > w_.size)
    throw std::invalid_argument("episodes of " + std::to_string(config_.window_jobs) +
                                " jobs do not fit a trace of " + std::to_string(w_.size));
  if (config_.max_queue == 0) throw std::invalid_argument("the observation needs a job slot");
  if (seeds.empty()) throw std::invalid_argument("a batch needs at least one environment");
  if (config_.dense && config_.reward != Reward::kBsld && config_.reward != Reward::kWait)
    throw std::invalid_argument("a dense reward is a sum over jobs: bsld or wait only");
  if (config_.baseline && config_.baseline_best)
    throw std::invalid_argument("one reward baseline: a heuristic or the best");
  if (config_.order_actions && (config_.agent_backfill || config_.teacher == Teacher::kRollout))
    throw std::invalid_argument(
        "order actions choose the backfill scans' order: not with agent "
        "backfilling or the rollout teacher");
  envs_.resize(seeds.size());
  for (size_t i = 0; i < seeds.size(); ++i) {
    envs_[i].seed = seeds[i];
    envs_[i].running_procs.assign(accounts_.users, 0);
    envs_[i].queued_work.assign(accounts_.users, 0);
    if (config_.order_actions) envs_[i].rows.resize(config_.max_queue * job_features());
  }
}

void BatchEnv::start_episode(Env& e) {
  uint64_t draw = splitmix64(e.seed ^ splitmix64(e.episode));
  start_window(e, draw % (w_.size - config_.window_jobs + 1));
}

void BatchEnv::start_window(Env& e, size_t begin) {
  e.begin = begin;
  e.paid = 0;
  e.sim.emplace(w_, begin, begin + config_.window_jobs, config_.machine_procs, config_.policy,
                config_.backfill, config_.estimate,
                AgentChoices{config_.agent_backfill, config_.order_actions});
  if (tracks_history()) start_history(e);
  reset_window_jobs(e);
  e.teacher = config_.policy;
  e.teacher_rule =
      (std::find(backfills_.begin(), backfills_.end(), config_.backfill) - backfills_.begin()) *
          kHeuristics.size() +
      (std::find(kHeuristics.begin(), kHeuristics.end(), config_.policy) - kHeuristics.begin());
  e.best_bsld = std::numeric_limits<double>::quiet_NaN();
  e.baseline_bsld = std::numeric_limits<double>::quiet_NaN();
  if (config_.teacher == Teacher::kBest || config_.baseline_best) run_heuristics(e);
  if (config_.baseline) {
    Simulator heuristic(w_, begin, begin + config_.window_jobs, config_.machine_procs,
                        *config_.baseline, config_.backfill, config_.estimate);
    const Metrics m = compute_metrics(w_, begin, heuristic.run(), config_.machine_procs);
    e.baseline_reward = reward_of(m);
    e.baseline_bsld = m.avg_bsld;
  }
}

void BatchEnv::reset_window_jobs(Env& e) const {
  const double machine = config_.machine_procs, log_machine = std::log2(machine);
  e.window.resize(config_.window_jobs);
  for (size_t k = 0; k < config_.window_jobs; ++k) {
    const size_t j = e.begin + k;
    const double r = w_.requested_time[j];
    e.window[k] = {
        static_cast<float>(std::min(r / kTimeScale, 1.0)),
        static_cast<float>(w_.procs[j] / machine),
        // Log scales resolve what the linear ones squash: requests and waits span seconds to
        // days, sizes 1 to the machine (F1's and WFP3's scores are built on such terms).
        log_time(r),
        static_cast<float>(log_machine > 0 ? std::log2(w_.procs[j]) / log_machine : 0.0),
        score(Policy::kF1, w_, j, 0),
        w_.submit[j],
        w_.procs[j] * r,
        w_.procs[j],
        accounts_.user[j],
        0,
        0,
        0.0f,
        0,
    };
  }
  e.observations = e.instants = 0;
  e.at = std::numeric_limits<double>::quiet_NaN();
  for (std::vector<Ranked>& order : e.ranked) order.clear();
}

// Every rule's run on jobs [begin, end) as the simulator runs it (its order for the picks
// and the scans, its backfill), with the environment's estimate: the one with the lowest avg
// bsld (ties: the first rule). Rule `first` runs first (the last best: likely the best again);
// a later run stops once it is sure to end above the best so far (run_within(), by a margin
// far over the sums' rounding), as it cannot be the best; the result does not depend on the
// order. configs/multi-trace.yaml's environment on LANL-CM5 at submit x 0.5 (12 runs an
// episode, 5 of each 6 bounded): 3 in 4 bounded runs stop, after 0.7 of a whole run's picks on
// average (a bound every 64 picks, which 256-job windows often end before, stopped 6 in 10),
// and its decisions/s rose by a fifth at native load and a third at x 0.5.
std::pair<size_t, Metrics> BatchEnv::best_heuristic(size_t begin, size_t end, size_t first) const {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::pair<size_t, Metrics> best;
  const double jobs = static_cast<double>(end - begin);
  for (size_t n = 0; n < rules(); ++n) {
    const size_t k = n == 0 ? first : n - (n <= first);  // first, then the others in order
    Simulator heuristic(w_, begin, end, config_.machine_procs, rule(k).order, rule(k).backfill,
                        config_.estimate);
    const double bsld = best.second.avg_bsld;
    if (!heuristic.run_within(n == 0 ? kInf : bsld * jobs * (1 + 1e-9))) continue;
    const Metrics m = compute_metrics(w_, begin, heuristic.start_times(), config_.machine_procs);
    if (n == 0 || m.avg_bsld < bsld || (m.avg_bsld == bsld && k < best.first)) best = {k, m};
  }
  return best;
}

// The window's best heuristic is the baseline with `baseline_best` and the teacher with
// `teacher: best`, unless `teacher_jobs` makes that the best on a longer stretch of jobs.
void BatchEnv::run_heuristics(Env& e) {
  const auto [best, m] = best_heuristic(e.begin, e.begin + config_.window_jobs, e.best_rule);
  e.best_rule = best;
  e.best = rule(best).order, e.best_bsld = m.avg_bsld;
  if (config_.baseline_best) e.baseline_reward = reward_of(m), e.baseline_bsld = m.avg_bsld;
  if (config_.teacher != Teacher::kBest) return;
  const size_t end = e.begin + std::min(config_.teacher_jobs, w_.size - e.begin);
  e.teacher_rule =
      end > e.begin + config_.window_jobs ? best_heuristic(e.begin, end, best).first : best;
  e.teacher = rule(e.teacher_rule).order;
}

void BatchEnv::begin_at(size_t i, size_t start) {
  if (start + config_.window_jobs > w_.size)
    throw std::invalid_argument("a window at " + std::to_string(start) + " runs past the trace");
  start_window(envs_.at(i), start);
}

void BatchEnv::reset(Outputs out) {
  for (size_t i = 0; i < envs_.size(); ++i) {
    envs_[i].episode = 0;
    start_episode(envs_[i]);
    out.reward[i] = 0;
    out.done[i] = 0;
    out.episode_start[i] = static_cast<int64_t>(envs_[i].begin);
    observe(envs_[i], i, out);
  }
}

void BatchEnv::step(const int32_t* actions, Outputs out) {
  for (size_t i = 0; i < envs_.size(); ++i) {
    Env& e = envs_[i];
    act(e, actions[i]);
    out.reward[i] = config_.dense ? dense_reward(e) : 0;
    out.done[i] = e.sim->done();
    out.episode_start[i] = static_cast<int64_t>(e.begin);
    if (e.sim->done()) {
      float last = finish_episode(e, out.episode_metrics + 4 * i);
      // Dense: what the jobs earned is paid already; the baseline's share comes last.
      out.reward[i] += config_.dense ? static_cast<float>(-e.baseline_reward) : last;
      e.last_start = e.sim->start_times();  // the row restarts at once: keep the schedule
      e.last_best = e.best, e.last_best_bsld = e.best_bsld;
      e.last_baseline_bsld = e.baseline_bsld;
      ++e.episode;
      start_episode(e);
    }
    observe(e, i, out);
  }
}

void BatchEnv::act(Env& e, int32_t action) const {
  Simulator& s = *e.sim;
  const size_t visible = std::min(config_.max_queue, s.waiting().size());
  const bool job_slot = action >= 0 && static_cast<size_t>(action) < visible;
  int32_t picked = -1;  // the job picked or backfilled (-1: a wait or a stop)
  if (s.backfilling()) {
    if (job_slot && s.backfill_allows(s.waiting()[action])) {
      picked = s.waiting()[action];
      s.backfill_at(action);
    } else {
      s.stop_backfill();  // the stop slot K, or a slot the mask does not allow
    }
  } else if (config_.wait && action == static_cast<int32_t>(choice_slots()) && s.can_wait()) {
    s.wait();
  } else if (config_.order_actions) {
    // Any other action (a masked wait) is rule 0's, as a slot without a job is slot 0.
    const bool named = action >= 0 && static_cast<size_t>(action) < rules();
    const Rule r = rule(named ? action : 0);
    const int32_t position = lowest_position(e, r.order);
    picked = s.waiting()[position];
    s.set_rule(r.order, r.backfill);
    s.pick_at(position);
  } else {
    const size_t position = job_slot ? action : 0;
    picked = s.waiting()[position];
    s.pick_at(position);
  }
  if (config_.agent_backfill) skip_hidden_backfills(s);
  if (tracks_history()) track(e, picked);
}

// A backfill decision is the agent's only when a visible job is allowed: the others stop.
void BatchEnv::skip_hidden_backfills(Simulator& s) const {
  while (s.backfilling()) {
    const std::vector<int32_t>& queue = s.waiting();
    const size_t visible = std::min(config_.max_queue, queue.size());
    for (size_t k = 0; k < visible; ++k)
      if (s.backfill_allows(queue[k])) return;
    s.stop_backfill();
  }
}

void BatchEnv::restore(size_t i, uint64_t episode, const std::vector<int32_t>& actions) {
  Env& e = envs_.at(i);
  replay_episode(
      e, episode, actions, [this](Env& env) { start_episode(env); },
      [this](Env& env, int32_t a) { act(env, a); });
  if (config_.dense) dense_reward(e);  // the replayed steps' rewards are paid
}

void BatchEnv::observe(Outputs out) {
  for (size_t i = 0; i < envs_.size(); ++i) {
    out.episode_start[i] = static_cast<int64_t>(envs_[i].begin);
    observe(envs_[i], i, out);
  }
}

// The sparse reward at the end of an episode, and its metrics.
float BatchEnv::finish_episode(const Env& e, double* metrics) const {
  Metrics m = compute_metrics(w_, e.begin, e.sim->start_times(), config_.machine_procs);
  metrics[0] = m.avg_bsld;
  metrics[1] = m.avg_wait;
  metrics[2] = m.utilization;
  metrics[3] = m.jain_user_bsld;
  return static_cast<float>(reward_of(m) - e.baseline_reward);
}

// The dense reward of a step: minus the per-job terms (bounded slowdown, or wait / T) of the
// jobs started since the last step, over the window's size.
float BatchEnv::dense_reward(Env& e) const {
  const std::vector<double>& start = e.sim->start_times();
  double earned = 0;
  for (size_t k = 0; k < start.size(); ++k) {
    if (std::isnan(start[k])) continue;
    double wait = start[k] - w_.submit[e.begin + k];
    earned -= config_.reward == Reward::kBsld ? bounded_slowdown(wait, w_.runtime[e.begin + k])
                                              : wait / kTimeScale;
  }
  earned /= static_cast<double>(start.size());
  float reward = static_cast<float>(earned - e.paid);
  e.paid = earned;
  return reward;
}

double BatchEnv::reward_of(const Metrics& m) const {
  switch (config_.reward) {
    case Reward::kBsld:
      return -m.avg_bsld;
    case Reward::kWait:
      return -m.avg_wait / kTimeScale;
    case Reward::kUtilization:
      return m.utilization;
    case Reward::kFairshare: {
      // Bounded slowdown plus its spread across users (population standard deviation).
      double mean = 0, square = 0;
      for (double x : m.user_avg_bsld) mean += x, square += x * x;
      mean /= m.user_avg_bsld.size();
      double spread = std::sqrt(std::max(0.0, square / m.user_avg_bsld.size() - mean * mean));
      return -(m.avg_bsld + spread);
    }
  }
  return 0;
}

void BatchEnv::observe(Env& e, size_t i, Outputs out) const {
  const Simulator& s = *e.sim;
  const size_t K = config_.max_queue, S = slots(), F = job_features();
  const double machine = config_.machine_procs, now = s.now();
  float* jobs = out.jobs + i * S * F;
  uint8_t* mask = out.mask + i * S;
  std::memset(mask, 0, S);
  // The visible jobs' rows: the observation's, or with order actions those its slots show.
  float* rows = config_.order_actions ? e.rows.data() : jobs;
  if (config_.order_actions) std::fill(e.rows.begin(), e.rows.end(), 0.0f);
  const std::vector<int32_t>& queue = s.waiting();
  const size_t visible = std::min(K, queue.size());
  clear_rows(e, jobs, config_.order_actions ? 0 : visible);
  ++e.observations;
  if (now != e.at) e.at = now, ++e.instants;
  double remaining = 0;
  for (const auto& r : s.running()) {
    const WindowJob& c = e.window[r.job - e.begin];
    e.running_procs[c.user] += c.size;
    remaining += c.size * std::max(r.estimated_end - now, 0.0);
  }
  for (size_t k = 0; k < visible; ++k) {
    const WindowJob& c = e.window[queue[k] - e.begin];
    e.queued_work[c.user] += c.work;
  }
  for (size_t k = 0; k < visible; ++k) {
    WindowJob& c = e.window[queue[k] - e.begin];
    c.slot = static_cast<int32_t>(k), c.observed = e.observations;
    float* f = rows + k * F;
    f[0] = static_cast<float>(std::min((now - c.submit) / kTimeScale, 1.0));
    f[1] = c.request;
    f[2] = c.procs;
    f[3] = c.size <= s.free_procs() ? 1.0f : 0.0f;
    f[4] = static_cast<float>(e.running_procs[c.user] / machine);
    f[5] = static_cast<float>(std::min(e.queued_work[c.user] / (machine * kTimeScale), 1.0));
    f[6] = 1.0f;
    f[7] = c.log_request;
    if (c.instant != e.instants) c.instant = e.instants, c.log_wait = log_time(now - c.submit);
    f[8] = c.log_wait;
    f[9] = c.log_procs;
  }
  // Every visible job may be picked; at a backfill decision, those the backfill allows.
  if (!config_.order_actions) {
    if (!s.backfilling())
      std::memset(mask, 1, visible);
    else
      for (size_t k = 0; k < visible; ++k) mask[k] = s.backfill_allows(queue[k]);
  }
  // Feature 10: the job's rank under F1 (Carastan-Neto and de Camargo, 2017), a score fitted
  // to Lublin-model workloads and the strongest of the classic heuristics there: a prior
  // the agent can follow, or learn when to leave.
  write_ranks(e, Policy::kF1, rows, 10);
  for (const auto& r : s.running()) e.running_procs[e.window[r.job - e.begin].user] = 0;
  for (size_t k = 0; k < visible; ++k) e.queued_work[e.window[queue[k] - e.begin].user] = 0;
  float* c = out.cluster + i * cluster_features();
  c[0] = static_cast<float>(s.free_procs() / machine);
  c[1] = static_cast<float>(std::min(remaining / (machine * kTimeScale), 1.0));
  c[2] = static_cast<float>(std::min(static_cast<double>(queue.size()) / K, 1.0));
  if (config_.history) observe_history(e, rows, c);
  const size_t ranks = kJobFeatures + (config_.history ? kHistoryJobFeatures : 0);
  if (config_.heuristic_ranks)
    for (size_t p = 0; p < kRankJobFeatures; ++p)
      write_ranks(e, kRankedPolicies[p], rows, ranks + p);
  if (config_.fit_times)
    write_fit_times(e, rows, ranks + (config_.heuristic_ranks ? kRankJobFeatures : 0));
  if (config_.order_actions) observe_orders(e, jobs, mask);
  const size_t C = choice_slots();
  if (S > C) observe_wait(e, jobs + C * F, mask + C);
  if (config_.agent_backfill)
    observe_backfill(s, c + cluster_features() - kBackfillClusterFeatures);
}

// Zeros in `jobs` where this observation writes nothing, when it writes the first
// kJobFeatures columns of its first `filled` rows: the other rows the last observation
// filled, the wait or stop slot's, and the columns past those (some features leave 0 there).
// Only observe() writes the array, so the rows neither filled are 0 still: zeroing every row
// at every step was most of the memory the observations wrote at B = 64.
void BatchEnv::clear_rows(Env& e, float* jobs, size_t filled) const {
  const size_t F = job_features(), C = choice_slots(), S = slots();
  const size_t was = config_.order_actions ? C : std::min(e.filled, C);
  if (was > filled) std::memset(jobs + filled * F, 0, (was - filled) * F * sizeof(float));
  std::memset(jobs + C * F, 0, (S - C) * F * sizeof(float));
  for (size_t k = 0; F > kJobFeatures && k < filled; ++k)
    std::memset(jobs + k * F + kJobFeatures, 0, (F - kJobFeatures) * sizeof(float));
  e.filled = filled;
}

// Slot K, the wait at a pick and the stop at a backfill decision, shows what starting nothing
// until the next event costs (the time to it, which every waiting job waits at least) and
// what it could buy (the procs that free up then).
void BatchEnv::observe_wait(const Env& e, float* f, uint8_t* mask) const {
  const Simulator& s = *e.sim;
  *mask = s.backfilling() || (config_.wait && s.can_wait());
  if (!*mask) return;
  const double next = s.next_event(), gap = next - s.now();
  int32_t freed = 0;
  for (const auto& r : s.running())
    if (s.start_times()[r.job - e.begin] + w_.runtime[r.job] == next) freed += w_.procs[r.job];
  f[0] = static_cast<float>(std::min(gap / kTimeScale, 1.0));
  f[2] = static_cast<float>(freed / static_cast<double>(config_.machine_procs));
  f[6] = -1.0f;
  f[8] = log_time(gap);
}

// Slot k shows rule k's pick among the visible jobs: that job's row, with 1 in its order's
// column (the first of the last rule_features()) and in its backfill's (after them, with
// several), so that rules picking the same job differ.
void BatchEnv::observe_orders(Env& e, float* jobs, uint8_t* mask) const {
  if (e.sim->waiting().empty()) return;
  const size_t F = job_features(), own = F - rule_features(), orders = kHeuristics.size();
  std::array<int32_t, kHeuristics.size()> picks;
  for (size_t p = 0; p < orders; ++p) picks[p] = lowest_position(e, kHeuristics[p]);
  for (size_t k = 0; k < rules(); ++k) {
    const float* row = e.rows.data() + picks[k % orders] * F;
    std::copy(row, row + F, jobs + k * F);
    jobs[k * F + own + k % orders] = 1.0f;
    if (backfills_.size() > 1) jobs[k * F + own + orders + k / orders] = 1.0f;
    mask[k] = 1;
  }
}

// The committed job's shadow time, EASY's extra procs and the committed job's size at a
// backfill decision; zeros at a pick.
void BatchEnv::observe_backfill(const Simulator& s, float* c) const {
  std::fill(c, c + kBackfillClusterFeatures, 0.0f);
  if (!s.backfilling()) return;
  const double machine = config_.machine_procs;
  c[0] = 1.0f;
  c[1] = static_cast<float>(std::min((s.shadow_time() - s.now()) / kTimeScale, 1.0));
  if (config_.backfill == Backfill::kEasy) c[2] = static_cast<float>(s.extra_procs() / machine);
  c[3] = static_cast<float>(w_.procs[s.committed()] / machine);
}

void BatchEnv::start_history(Env& e) {
  History& h = e.history;
  const size_t end = e.begin + config_.window_jobs;
  h.predictions.emplace(w_, e.begin, end, false);
  h.arrived = e.begin;
  h.seen = 0;
  h.committed = -1;
  h.running.assign(accounts_.users, 0);
  e.user_features.assign(accounts_.users, {});
  h.waiting.assign(accounts_.users, 0);
  h.ends = {};
  h.work = 0;
  h.sizes = {};
  track(e, -1);
}

size_t BatchEnv::size_class(int32_t job) const {
  const int64_t n = w_.procs[job], machine = config_.machine_procs;
  return n * 8 <= machine ? 0 : n * 4 <= machine ? 1 : n * 2 <= machine ? 2 : 3;
}

// Job `job` joins (sign 1) or leaves (sign -1) the waiting jobs' sums.
void BatchEnv::queue_job(History& h, int32_t job, int32_t sign) const {
  h.waiting[accounts_.user[job]] += sign;
  h.work += sign * w_.procs[job] * w_.requested_time[job];
  h.sizes[size_class(job)] += sign;
}

// With the runtime the simulator gives the job (Simulator::runtime()).
void BatchEnv::record_start(History& h, int32_t job, double start, double runtime) const {
  h.predictions->start(job, start, runtime);
  if (runtime == 0) return;  // it ended as it started: never running
  ++h.running[accounts_.user[job]];
  h.ends.emplace(start + runtime, job);
}

// Brings the history up to the simulator's decision after a step that picked or backfilled
// `picked` (-1: a wait, a stop, or the window's start): the arrivals, starts and ends since
// the last call, whatever the queue's length. The waiting jobs' sums change in the order of
// the queue (arrivals, the picked job, then the others that started, by job) so that their
// floating-point total does not depend on the order of the starts. At a backfill decision
// the picked job may be committed: it leaves the waiting jobs now and starts at a later step.
void BatchEnv::track(Env& e, int32_t picked) const {
  const Simulator& s = *e.sim;
  if (s.done()) return;
  History& h = e.history;
  const double now = s.now();
  const std::vector<double>& start = s.start_times();
  auto started = [&](int32_t j) { return !std::isnan(start[j - e.begin]); };
  const size_t waited = h.arrived;  // the jobs before it were waiting if they start now
  for (const size_t end = e.begin + config_.window_jobs;
       h.arrived < end && w_.submit[h.arrived] <= now; ++h.arrived) {
    const int32_t j = static_cast<int32_t>(h.arrived);
    if (!started(j)) queue_job(h, j, 1);
  }
  const std::vector<int32_t>& jobs = s.started_jobs();
  h.left.clear();
  for (; h.seen < jobs.size(); ++h.seen) {
    const int32_t j = jobs[h.seen];
    record_start(h, j, start[j - e.begin], s.runtime(j));
    if (j == h.committed)
      h.committed = -1;  // it left the waiting jobs when it was committed
    else if (static_cast<size_t>(j) < waited)
      h.left.push_back(j);
  }
  if (picked >= 0 && picked == s.committed()) {
    queue_job(h, picked, -1);
    h.committed = picked;
  }
  std::sort(h.left.begin(), h.left.end(), [picked](int32_t a, int32_t b) {
    return std::make_pair(a != picked, a) < std::make_pair(b != picked, b);
  });
  for (int32_t j : h.left) queue_job(h, j, -1);
  // Completions: every job that ended by now (a job that ends at now counts), then the
  // runtime-0 ones that started before now.
  while (!h.ends.empty() && h.ends.top().first <= now) {
    const auto [end, j] = h.ends.top();
    h.ends.pop();
    --h.running[accounts_.user[j]];
    h.predictions->end(j, start[j - e.begin], end);
  }
  h.predictions->advance(now);
}

// Features 11 to 17 of the visible jobs and cluster features 3 to 8 (docs/environment.md,
// "History"): EASY++ and the user's history per job, the queue past slot K.
void BatchEnv::observe_history(Env& e, float* jobs, float* cluster) const {
  const History& h = e.history;
  const Simulator& s = *e.sim;
  const size_t K = config_.max_queue, F = job_features();
  const std::vector<int32_t>& queue = s.waiting();
  const size_t visible = std::min(K, queue.size());
  double shown_work = 0;
  std::array<int32_t, kSizeClasses> shown_sizes = {};
  for (size_t k = 0; k < visible; ++k) {
    const int32_t j = queue[k];
    const WindowJob& c = e.window[j - e.begin];
    const double p = h.predictions->predict(j), r = w_.requested_time[j];
    const UserFeatures& user = user_features(e, j, p);
    float* f = jobs + k * F + kJobFeatures;
    // log_time(p): the request's is feature 7's.
    f[0] = p == r ? c.log_request : user.log_prediction;
    f[1] = static_cast<float>(r > 0 ? std::min(p / r, 1.0) : 1.0);
    f[2] = user.ratio;
    f[3] = user.log_mean;
    f[4] = static_cast<float>(user.count / 2.0);
    f[5] = static_cast<float>(std::min(h.running[c.user] / static_cast<double>(K), 1.0));
    f[6] = static_cast<float>(std::min(h.waiting[c.user] / static_cast<double>(K), 1.0));
    shown_work += c.work;
    ++shown_sizes[size_class(j)];
  }
  const size_t hidden = queue.size() - visible;
  const double machine = config_.machine_procs;
  float* c = cluster + kClusterFeatures;
  c[0] = static_cast<float>(hidden / static_cast<double>(config_.window_jobs));
  const double work = std::max(h.work - shown_work, 0.0) / (machine * kTimeScale);
  c[1] = static_cast<float>(std::min(std::log10(1.0 + work) / 2, 1.0));
  for (size_t b = 0; b < kSizeClasses; ++b)
    c[2 + b] = hidden ? static_cast<float>((h.sizes[b] - shown_sizes[b]) / double(hidden)) : 0.0f;
}

// The history features of `job`'s user now, whose EASY++ prediction is p: computed again only
// when its recent jobs (for the log of the prediction: the prediction) changed since.
const BatchEnv::UserFeatures& BatchEnv::user_features(Env& e, int32_t job, double p) const {
  const UserHistory& users = e.history.predictions->history();
  UserFeatures& user = e.user_features[accounts_.user[job]];
  const int n = users.recent_count(job);
  std::array<int32_t, 2> recent = {-1, -1};
  for (int i = 0; i < n; ++i) recent[i] = users.recent(job, i);
  if (n != user.count || recent != user.recent) {
    double ratio = n == 0 ? 1 : 0, mean = 0;
    for (int i = 0; i < n; ++i) {
      const int32_t done = recent[i];
      const double r = w_.requested_time[done];
      ratio += (r > 0 ? std::min(w_.runtime[done] / r, 1.0) : 1.0) / n;
      mean += w_.runtime[done] / n;
    }
    user = {n, recent, static_cast<float>(ratio), log_time(mean)};
  }
  if (p != w_.requested_time[job] && p != user.prediction)
    user.prediction = p, user.log_prediction = log_time(p);
  return user;
}

// Policy p's score of `job` at the decision (docs/simulation.md), SJBF's with the EASY++
// prediction of the history the environment keeps.
double BatchEnv::score_at(const Env& e, Policy p, int32_t job) const {
  if (p == Policy::kSjbf) return at_least_tenth(e.history.predictions->predict(job));
  if (p == Policy::kF1) return e.window[job - e.begin].f1;
  return score(p, w_, job, e.sim->now());
}

// Writes into column `column` of each visible job's row its rank among the visible jobs under
// policy p's score (0 = p's pick), over K. Ties go by queue (submit, id) order, as p's do,
// which is job order. The order of the last observation is kept: its jobs still waiting are
// the first of the queue now (the queue loses jobs anywhere, gains them at its end: a kept
// job still waits iff this observation shows it), the newly visible jobs come after them,
// and the scores that move with time (WFP3, UNICEP, SJBF) seldom cross between decisions, so
// sorting the kept jobs again by insertion is nearly linear; the new ones are sorted apart and
// merged in.
void BatchEnv::write_ranks(Env& e, Policy p, float* jobs, size_t column) const {
  const Simulator& s = *e.sim;
  const std::vector<int32_t>& queue = s.waiting();
  const size_t visible = std::min(config_.max_queue, queue.size()), F = job_features();
  std::vector<Ranked>& order = e.ranked[static_cast<size_t>(p)];
  order.erase(std::remove_if(order.begin(), order.end(),
                             [&](const Ranked& x) {
                               return e.window[x.second - e.begin].observed != e.observations;
                             }),
              order.end());
  const bool moved = p != Policy::kF1 && p != Policy::kSjf;  // keys that move with time
  if (moved)
    for (Ranked& x : order) x.first = score_at(e, p, x.second);
  const size_t kept = order.size();
  for (size_t k = kept; k < visible; ++k) order.emplace_back(score_at(e, p, queue[k]), queue[k]);
  if (moved)
    sort_nearly_sorted(order.begin(), order.begin() + kept, order.end());
  else
    merge_new(order.begin(), order.begin() + kept, order.end());
  for (size_t r = 0; r < visible; ++r)
    jobs[e.window[order[r].second - e.begin].slot * F + column] =
        static_cast<float>(r) / static_cast<float>(config_.max_queue);
}

// Writes into column `column` of each visible job's row how long until it fits (docs/
// environment.md, "Fit times"): the running jobs free their procs at their estimated ends
// (start + requested time), in that order; 0 where it fits now, log scale as feature 8.
void BatchEnv::write_fit_times(Env& e, float* jobs, size_t column) const {
  const Simulator& s = *e.sim;
  const std::vector<Running>& running = s.running();
  e.freed.clear();
  int32_t free = s.free_procs();
  for (const Running& r : running) e.freed.push_back(free += w_.procs[r.job]);
  const std::vector<int32_t>& queue = s.waiting();
  const size_t visible = std::min(config_.max_queue, queue.size()), F = job_features();
  for (size_t k = 0; k < visible; ++k) {
    const int32_t procs = w_.procs[queue[k]];
    if (procs <= s.free_procs()) continue;
    const size_t end = std::lower_bound(e.freed.begin(), e.freed.end(), procs) - e.freed.begin();
    const double t = end < running.size() ? std::max(running[end].estimated_end - s.now(), 0.0)
                                          : std::numeric_limits<double>::infinity();
    jobs[k * F + column] = log_time(t);
  }
}

// Policy p's pick among the visible jobs: its lowest score, ties in queue order; at a
// backfill decision, among the allowed jobs (there always is one: skip_hidden_backfills).
int32_t BatchEnv::lowest_position(const Env& e, Policy p) const {
  const Simulator& s = *e.sim;
  const std::vector<int32_t>& queue = s.waiting();
  const size_t visible = std::min(config_.max_queue, queue.size());
  int32_t best = 0;
  double lowest = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < visible; ++k) {
    if (s.backfilling() && !s.backfill_allows(queue[k])) continue;
    if (const double x = score_at(e, p, queue[k]); x < lowest)
      lowest = x, best = static_cast<int32_t>(k);
  }
  return best;
}

// The rollout teacher (docs/environment.md, "The rollout teacher"): of the visible jobs some
// heuristic order picks now, the one after which some order, followed to the window's end,
// gives the lowest avg bsld (ties: the first pick, then order, of kHeuristics); no rollout
// when every order picks the same job.
int32_t BatchEnv::rollout_action(const Env& e) const {
  std::array<int32_t, kHeuristics.size()> picks{};
  size_t n = 0;
  for (Policy p : kHeuristics)
    if (const int32_t k = lowest_position(e, p);
        std::find(picks.begin(), picks.begin() + n, k) == picks.begin() + n)
      picks[n++] = k;
  int32_t best = picks[0];
  double lowest = std::numeric_limits<double>::infinity();
  for (size_t c = 0; n > 1 && c < n; ++c)
    for (Policy p : kHeuristics)
      if (const double bsld =
              rollout_bsld(e, picks[c], [&](const Env& r) { return lowest_position(r, p); });
          bsld < lowest)
        lowest = bsld, best = picks[c];
  return best;
}

// The window's avg bsld if the environment takes `action` now and next(state)'s action at
// every later decision, on the jobs' true runtimes and the window's later arrivals; with less
// foresight (Simulator::limit_foresight()), foreseen_bsld().
double BatchEnv::rollout_bsld(const Env& e, int32_t action,
                              const std::function<int32_t(const Env&)>& next, Foresight f) const {
  Env rollout = e;
  rollout.sim->limit_foresight(f);
  // The environment's history keeps the predictions the simulator keeps.
  if (!f.runtimes && rollout.history.predictions) rollout.history.predictions->freeze();
  act(rollout, action);
  while (!rollout.sim->done()) act(rollout, next(rollout));
  if (!f.all()) return foreseen_bsld(e, *rollout.sim);
  return compute_metrics(w_, e.begin, rollout.sim->start_times(), config_.machine_procs).avg_bsld;
}

// Whether a rollout that sees only `f` may wait at e's decision (without the arrivals, only
// while a job runs).
bool BatchEnv::can_wait(const Env& e, Foresight f) const {
  if (f.all()) return e.sim->can_wait();
  Simulator seen = *e.sim;
  seen.limit_foresight(f);
  return seen.can_wait();
}

// The avg bsld of the jobs that had not started at e's decision and that the rollout started
// (without the arrivals, those waiting then), each on the runtime the rollout gave it.
double BatchEnv::foreseen_bsld(const Env& e, const Simulator& rollout) const {
  const std::vector<double>& before = e.sim->start_times();
  const std::vector<double>& after = rollout.start_times();
  double sum = 0;
  size_t n = 0;
  for (size_t k = 0; k < before.size(); ++k) {
    if (!std::isnan(before[k]) || std::isnan(after[k])) continue;
    const auto j = static_cast<int32_t>(e.begin + k);
    sum += bounded_slowdown(after[k] - w_.submit[j], rollout.runtime(j)), ++n;
  }
  return n ? sum / static_cast<double>(n) : 0;
}

// Rule costs (docs/environment.md, "Rule costs"): per environment and rule k, the window's
// avg bsld if it follows rule k from now on: the rollout algorithm's scores with every rule as
// a base policy (Bertsekas, "Rollout algorithms for discrete optimization", 2013). With
// `wait`, the wait's cost is the lowest over the rules of waiting now and following rule k
// from then on; a masked wait is rule 0's, as step() takes it.
void BatchEnv::rule_costs(double* costs, Foresight f) const {
  if (!config_.order_actions) throw std::invalid_argument("rule costs need order actions");
  const auto wait = static_cast<int32_t>(rules());
  for (size_t i = 0; i < envs_.size(); ++i) {
    double* c = costs + i * slots();
    for (int32_t k = 0; k < wait; ++k)
      c[k] = rollout_bsld(envs_[i], k, [=](const Env&) { return k; }, f);
    if (!config_.wait) continue;
    if (!can_wait(envs_[i], f)) {
      c[wait] = c[0];
      continue;
    }
    c[wait] = std::numeric_limits<double>::infinity();
    for (int32_t k = 0; k < wait; ++k)
      c[wait] = std::min(c[wait], rollout_bsld(envs_[i], wait, [=](const Env&) { return k; }, f));
  }
}

void BatchEnv::heuristic_actions(int32_t* actions) const {
  for (size_t i = 0; i < envs_.size(); ++i) {
    const Env& e = envs_[i];
    const Simulator& s = *e.sim;
    if (config_.order_actions)
      actions[i] = static_cast<int32_t>(e.teacher_rule);
    else if (config_.teacher == Teacher::kRollout)
      actions[i] = rollout_action(e);
    else if (e.teacher == config_.policy)
      actions[i] = static_cast<int32_t>(
          s.heuristic_position(std::min(config_.max_queue, s.waiting().size())));
    else
      actions[i] = lowest_position(e, e.teacher);
  }
}

}  // namespace ddppo
