#include "env.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "replay.hpp"
#include "splitmix.hpp"

namespace ddppo {

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
  if (config_.window_jobs == 0 || config_.window_jobs > w_.size)
    throw std::invalid_argument("episodes of " + std::to_string(config_.window_jobs) +
                                " jobs do not fit a trace of " + std::to_string(w_.size));
  if (config_.max_queue == 0) throw std::invalid_argument("the observation needs a job slot");
  if (seeds.empty()) throw std::invalid_argument("a batch needs at least one environment");
  if (config_.dense && config_.reward != Reward::kBsld && config_.reward != Reward::kWait)
    throw std::invalid_argument("a dense reward is a sum over jobs: bsld or wait only");
  envs_.resize(seeds.size());
  for (size_t i = 0; i < seeds.size(); ++i) {
    envs_[i].seed = seeds[i];
    envs_[i].running_procs.assign(accounts_.users, 0);
    envs_[i].queued_work.assign(accounts_.users, 0);
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
                config_.backfill);
  if (config_.baseline) {
    Simulator heuristic(w_, begin, begin + config_.window_jobs, config_.machine_procs,
                        *config_.baseline, config_.backfill);
    e.baseline_reward =
        reward_of(compute_metrics(w_, begin, heuristic.run(), config_.machine_procs));
  }
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
      ++e.episode;
      start_episode(e);
    }
    observe(e, i, out);
  }
}

void BatchEnv::act(Env& e, int32_t action) {
  if (config_.wait && action == static_cast<int32_t>(config_.max_queue) && e.sim->can_wait())
    return e.sim->wait();
  size_t visible = std::min(config_.max_queue, e.sim->waiting().size());
  e.sim->pick_at(action >= 0 && static_cast<size_t>(action) < visible ? action : 0);
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
  const size_t K = config_.max_queue, S = slots();
  const double machine = config_.machine_procs, now = s.now();
  float* jobs = out.jobs + i * S * kJobFeatures;
  uint8_t* mask = out.mask + i * S;
  std::memset(jobs, 0, S * kJobFeatures * sizeof(float));
  std::memset(mask, 0, S);
  const std::vector<int32_t>& queue = s.waiting();
  const size_t visible = std::min(K, queue.size());
  const double log_machine = std::log2(machine);
  double remaining = 0;
  for (const auto& r : s.running()) {
    e.running_procs[accounts_.user[r.job]] += w_.procs[r.job];
    remaining += w_.procs[r.job] * std::max(r.estimated_end - now, 0.0);
  }
  for (size_t k = 0; k < visible; ++k)
    e.queued_work[accounts_.user[queue[k]]] += w_.procs[queue[k]] * w_.requested_time[queue[k]];
  for (size_t k = 0; k < visible; ++k) {
    int32_t j = queue[k];
    int32_t u = accounts_.user[j];
    float* f = jobs + k * kJobFeatures;
    f[0] = static_cast<float>(std::min((now - w_.submit[j]) / kTimeScale, 1.0));
    f[1] = static_cast<float>(std::min(w_.requested_time[j] / kTimeScale, 1.0));
    f[2] = static_cast<float>(w_.procs[j] / machine);
    f[3] = static_cast<float>((u + 1.0) / (accounts_.users + 1.0));
    f[4] = static_cast<float>((accounts_.group[j] + 1.0) / (accounts_.groups + 1.0));
    f[5] = w_.procs[j] <= s.free_procs() ? 1.0f : 0.0f;
    f[6] = static_cast<float>(e.running_procs[u] / machine);
    f[7] = static_cast<float>(std::min(e.queued_work[u] / (machine * kTimeScale), 1.0));
    f[8] = 1.0f;
    // Log scales resolve what the linear ones squash: requests and waits span seconds to
    // days, sizes 1 to the machine (F1's and WFP3's scores are built on such terms).
    f[9] = static_cast<float>(std::min(std::log10(1.0 + w_.requested_time[j]) / kLogDecades, 1.0));
    f[10] = static_cast<float>(std::min(std::log10(1.0 + now - w_.submit[j]) / kLogDecades, 1.0));
    f[11] = static_cast<float>(log_machine > 0 ? std::log2(w_.procs[j]) / log_machine : 0.0);
    mask[k] = 1;
  }
  // Feature 12: the job's rank under F1 (Carastan-Neto and de Camargo, 2017), a score fitted
  // to Lublin-model workloads and the strongest of the classic heuristics there: a prior
  // the agent can follow, or learn when to leave. Ties go by queue (submit, id) order.
  e.ranked.clear();
  for (size_t k = 0; k < visible; ++k)
    e.ranked.emplace_back(score(Policy::kF1, w_, queue[k], now), k);
  std::sort(e.ranked.begin(), e.ranked.end());
  for (size_t r = 0; r < visible; ++r)
    jobs[e.ranked[r].second * kJobFeatures + 12] = static_cast<float>(r) / static_cast<float>(K);
  for (const auto& r : s.running()) e.running_procs[accounts_.user[r.job]] = 0;
  for (size_t k = 0; k < visible; ++k) e.queued_work[accounts_.user[queue[k]]] = 0;
  float* c = out.cluster + i * kClusterFeatures;
  c[0] = static_cast<float>(s.free_procs() / machine);
  c[1] = static_cast<float>(std::min(remaining / (machine * kTimeScale), 1.0));
  c[2] = static_cast<float>(std::min(static_cast<double>(queue.size()) / K, 1.0));
  if (config_.wait) observe_wait(e, jobs + K * kJobFeatures, mask + K);
}

// The wait slot shows what waiting costs (the time to the next event, which every waiting
// job waits at least) and what it could buy (the procs that free up then).
void BatchEnv::observe_wait(const Env& e, float* f, uint8_t* mask) const {
  const Simulator& s = *e.sim;
  *mask = s.can_wait();
  if (!*mask) return;
  const double next = s.next_event(), gap = next - s.now();
  int32_t freed = 0;
  for (const auto& r : s.running())
    if (s.start_times()[r.job - e.begin] + w_.runtime[r.job] == next) freed += w_.procs[r.job];
  f[0] = static_cast<float>(std::min(gap / kTimeScale, 1.0));
  f[2] = static_cast<float>(freed / static_cast<double>(config_.machine_procs));
  f[8] = -1.0f;
  f[10] = static_cast<float>(std::min(std::log10(1.0 + gap) / kLogDecades, 1.0));
}

void BatchEnv::heuristic_actions(int32_t* actions) const {
  for (size_t i = 0; i < envs_.size(); ++i) {
    const Simulator& s = *envs_[i].sim;
    actions[i] =
        static_cast<int32_t>(s.heuristic_position(std::min(config_.max_queue, s.waiting().size())));
  }
}

}  // namespace ddppo
