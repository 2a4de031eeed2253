#include "gpu_env.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "replay.hpp"

namespace ddppo {

namespace {
constexpr double kHour = 3600;

// Durations as log1p(minutes) / 10, capped at 1 (a week is 0.92): DL job runtimes span
// seconds to weeks.
float time_feature(double seconds) {
  return static_cast<float>(std::min(std::log1p(std::max(seconds, 0.0) / 60) / 10, 1.0));
}
}  // namespace

GpuBatchEnv::GpuBatchEnv(const GpuJobs& jobs, const Topology& topo, GpuEnvConfig config,
                         const std::vector<uint64_t>& seeds)
    : jobs_(jobs), topo_(topo), config_(config) {
  topo_.validate();
  if (config_.window_jobs == 0 || config_.window_jobs > jobs_.size)
    throw std::invalid_argument("episodes of " + std::to_string(config_.window_jobs) +
                                " jobs do not fit a workload of " + std::to_string(jobs_.size));
  if (config_.max_queue == 0) throw std::invalid_argument("the observation needs a job slot");
  if (config_.set_aside && !(config_.wait && config_.non_blocking))
    throw std::invalid_argument("the set-aside hold needs wait and non_blocking");
  if (seeds.empty()) throw std::invalid_argument("a batch needs at least one environment");
  envs_.resize(seeds.size());
  for (size_t i = 0; i < seeds.size(); ++i) envs_[i].seed = seeds[i];
  max_nominal_ = *std::max_element(topo_.nominal.begin(), topo_.nominal.end());
}

size_t GpuBatchEnv::slots() const {
  return std::max(config_.max_queue, topo_.total_gpus()) + (config_.wait ? 1 : 0);
}

void GpuBatchEnv::start_episode(Env& e) {
  uint64_t draw = splitmix64(e.seed ^ splitmix64(e.episode));
  start_window(e, draw % (jobs_.size - config_.window_jobs + 1), draw);
}

void GpuBatchEnv::start_window(Env& e, size_t begin, uint64_t seed) {
  e.begin = begin;
  e.sim.emplace(jobs_, topo_, begin, begin + config_.window_jobs, seed, config_.non_blocking);
  e.base_job.clear();
  e.base_makespan = 0;
  if (config_.baseline) {  // the heuristic on the same window, with the same random draws
    GpuCluster h(jobs_, topo_, begin, begin + config_.window_jobs, seed, config_.non_blocking);
    h.run(config_.order, *config_.baseline, config_.teacher_sets_aside());
    for (size_t k = 0; k < config_.window_jobs; ++k) e.base_job.push_back(job_term(h, k));
    e.base_makespan = compute_gpu_metrics(h).makespan;
  }
  settle(e);
}

// Runs the heuristic ordering in placement mode; then prepares what the observation shows:
// best_fit's plan of a placement step, the ranking of an ordering step.
void GpuBatchEnv::settle(Env& e) {
  GpuCluster& s = *e.sim;
  while (!config_.dual && s.phase() == GpuCluster::Phase::kOrder) s.commit(s.pick(config_.order));
  if (s.phase() == GpuCluster::Phase::kPlace) s.placement_gpu(config_.teacher());
  if (s.phase() == GpuCluster::Phase::kOrder) e.ranking = s.candidates(config_.order);
}

double GpuBatchEnv::job_term(const GpuCluster& s, size_t k) const {
  double jct = s.end_times()[k] - jobs_.submit[s.begin() + k];
  return config_.w_jct * jct / kHour + config_.w_comm * s.comm_costs()[k] / topo_.link_cross;
}

void GpuBatchEnv::begin_at(size_t i, size_t start) {
  if (start + config_.window_jobs > jobs_.size)
    throw std::invalid_argument("a window at " + std::to_string(start) + " runs past the trace");
  start_window(envs_.at(i), start, envs_[i].seed);
}

void GpuBatchEnv::reset(GpuOutputs out) {
  for (size_t i = 0; i < envs_.size(); ++i) {
    envs_[i].episode = 0;
    start_episode(envs_[i]);
    out.reward[i] = 0;
    out.done[i] = 0;
    out.episode_start[i] = static_cast<int64_t>(envs_[i].begin);
    observe(envs_[i], i, out);
  }
}

// The reward of one action: a started job brings -(w_jct JCT / 1 h + w_comm cost /
// link_cross) / window_jobs, so an episode's rewards add up to minus the weighted averages;
// with a baseline, minus the same job's term under the baseline.
float GpuBatchEnv::act(Env& e, int32_t action) {
  GpuCluster& s = *e.sim;
  if (config_.wait && static_cast<size_t>(action) == slots() - 1 &&
      (holds(s) || (!config_.set_aside && s.can_wait()))) {
    if (holds(s))
      s.set_aside();
    else
      s.wait();
    settle(e);
    return 0;
  }
  if (s.phase() == GpuCluster::Phase::kOrder) {
    size_t shown = std::min(config_.max_queue, e.ranking.size());
    bool valid = action >= 0 && static_cast<size_t>(action) < shown;
    s.commit(e.ranking[valid ? action : 0]);
    settle(e);
    return 0;
  }
  int32_t job = s.head();
  bool last = static_cast<int32_t>(s.chosen().size()) + 1 == jobs_.gpus[job];
  s.choose(s.available(action) ? action : s.placement_gpu(GpuPlacement::kFirstFit));
  settle(e);
  if (!last) return 0;
  size_t k = job - e.begin;
  double base = e.base_job.empty() ? 0 : e.base_job[k];
  return static_cast<float>(-(job_term(s, k) - base) / config_.window_jobs);
}

void GpuBatchEnv::step(const int32_t* actions, GpuOutputs out) {
  for (size_t i = 0; i < envs_.size(); ++i) {
    Env& e = envs_[i];
    out.reward[i] = act(e, actions[i]);
    out.done[i] = e.sim->done();
    out.episode_start[i] = static_cast<int64_t>(e.begin);
    if (e.sim->done()) {
      out.reward[i] += finish_episode(e, out.episode_metrics + kGpuEpisodeMetrics * i);
      ++e.episode;
      start_episode(e);
    }
    observe(e, i, out);
  }
}

float GpuBatchEnv::finish_episode(const Env& e, double* metrics) const {
  GpuMetrics m = compute_gpu_metrics(*e.sim);
  metrics[0] = m.avg_jct;
  metrics[1] = m.makespan;
  metrics[2] = m.avg_comm_cost;
  metrics[3] = m.gpu_utilization;
  metrics[4] = m.avg_queue_delay;
  return static_cast<float>(-config_.w_makespan * (m.makespan - e.base_makespan) / kHour);
}

void GpuBatchEnv::restore(size_t i, uint64_t episode, const std::vector<int32_t>& actions) {
  Env& e = envs_.at(i);
  replay_episode(
      e, episode, actions, [this](Env& env) { start_episode(env); },
      [this](Env& env, int32_t a) { act(env, a); });
}

void GpuBatchEnv::observe(GpuOutputs out) {
  for (size_t i = 0; i < envs_.size(); ++i) {
    out.episode_start[i] = static_cast<int64_t>(envs_[i].begin);
    observe(envs_[i], i, out);
  }
}

void GpuBatchEnv::heuristic_actions(GpuOrder order, GpuPlacement placement, int32_t* actions) {
  for (size_t i = 0; i < envs_.size(); ++i) {
    GpuCluster& s = *envs_[i].sim;
    if (s.phase() == GpuCluster::Phase::kPlace) {
      bool hold = config_.teacher_sets_aside() && s.can_set_aside();
      actions[i] = hold ? static_cast<int32_t>(slots() - 1) : s.placement_gpu(placement);
      continue;
    }
    // The slot that shows the heuristic's pick; -1 when the slots do not show it.
    const std::vector<size_t>& shown = envs_[i].ranking;
    size_t n = std::min(config_.max_queue, shown.size());
    auto at = std::find(shown.begin(), shown.begin() + n, s.pick(order));
    actions[i] = at == shown.begin() + n ? -1 : static_cast<int32_t>(at - shown.begin());
  }
}

void GpuBatchEnv::observe(const Env& e, size_t i, GpuOutputs out) const {
  const GpuCluster& s = *e.sim;
  const size_t S = slots();
  float* slot = out.slots + i * S * kGpuSlotFeatures;
  uint8_t* mask = out.mask + i * S;
  std::memset(slot, 0, S * kGpuSlotFeatures * sizeof(float));
  std::memset(mask, 0, S);
  const double gpus = static_cast<double>(topo_.total_gpus());
  float* g = out.global + i * kGpuGlobalFeatures;
  bool place = s.phase() == GpuCluster::Phase::kPlace;
  int32_t head = s.head();
  g[0] = place ? 1.0f : 0.0f;
  g[1] = static_cast<float>(s.free_total() / gpus);
  g[2] = head >= 0 ? static_cast<float>(jobs_.gpus[head] / gpus) : 0.0f;
  g[3] = head >= 0 ? static_cast<float>(s.chosen().size()) / jobs_.gpus[head] : 0.0f;
  g[4] = head >= 0 ? time_feature(jobs_.runtime[head]) : 0.0f;
  g[5] = static_cast<float>(
      std::min(static_cast<double>(s.waiting().size()) / config_.max_queue, 1.0));
  g[6] = head >= 0 ? time_feature(s.now() - jobs_.submit[head]) : 0.0f;
  if (s.done()) return;
  if (place)
    observe_gpus(s, slot, mask);
  else
    observe_jobs(s, e.ranking, slot, mask);
  if (config_.wait) observe_wait(e, slot + (S - 1) * kGpuSlotFeatures, mask + S - 1);
}

// The wait slot shows what waiting costs and could buy for the job at stake: the head in a
// placement step, `gpu.order`'s pick in an ordering step.
void GpuBatchEnv::observe_wait(const Env& e, float* f, uint8_t* mask) const {
  const GpuCluster& s = *e.sim;
  *mask = holds(s) || (!config_.set_aside && s.can_wait());
  if (!*mask) return;
  int32_t j = s.phase() == GpuCluster::Phase::kPlace ? s.head() : s.waiting()[e.ranking[0]];
  f[0] = time_feature(s.next_event() - s.now());
  f[1] = time_feature(jobs_.runtime[j]);
  f[2] = static_cast<float>(jobs_.gpus[j] / static_cast<double>(topo_.total_gpus()));
  f[3] = s.fits(j) ? 1.0f : 0.0f;
  f[4] = time_feature(jobs_.runtime[j] * jobs_.gpus[j]);
  f[6] = static_cast<float>(s.best_fit_cost(j) / topo_.link_cross);
  f[7] = -1.0f;
  f[8] = holds(s) ? 1.0f : 0.0f;
  f[10] = time_feature(s.compact_times({j})[0] - s.now());
}

void GpuBatchEnv::observe_jobs(const GpuCluster& s, const std::vector<size_t>& ranking, float* slot,
                               uint8_t* mask) const {
  const std::vector<int32_t>& queue = s.waiting();
  const size_t visible = std::min(config_.max_queue, ranking.size());
  const double gpus = static_cast<double>(topo_.total_gpus());
  std::vector<int32_t> shown(visible);
  for (size_t k = 0; k < visible; ++k) shown[k] = queue[ranking[k]];
  const std::vector<double> compact = s.compact_times(shown);
  for (size_t k = 0; k < visible; ++k) {
    int32_t j = shown[k];
    float* f = slot + k * kGpuSlotFeatures;
    f[0] = time_feature(s.now() - jobs_.submit[j]);
    f[1] = time_feature(jobs_.runtime[j]);
    f[2] = static_cast<float>(jobs_.gpus[j] / gpus);
    f[3] = s.fits(j) ? 1.0f : 0.0f;
    f[4] = time_feature(jobs_.runtime[j] * jobs_.gpus[j]);
    f[5] = static_cast<float>(k) / config_.max_queue;
    f[6] = static_cast<float>(s.best_fit_cost(j) / topo_.link_cross);
    f[7] = 1.0f;
    f[8] = k == 0 ? 1.0f : 0.0f;
    f[9] = static_cast<float>(ranking[k]) / static_cast<float>(queue.size());
    f[10] = time_feature(compact[k] - s.now());
    mask[k] = 1;
  }
}

void GpuBatchEnv::observe_gpus(const GpuCluster& s, float* slot, uint8_t* mask) const {
  const int32_t head = s.head(), g = jobs_.gpus[head];
  const int32_t rest = g - static_cast<int32_t>(s.chosen().size());
  const double machines = static_cast<double>(topo_.machines());
  std::vector<uint8_t> chosen(topo_.total_gpus(), 0), planned(topo_.total_gpus(), 0);
  for (int32_t c : s.chosen()) chosen[c] = 1;
  const std::vector<int32_t>& plan = s.planned(config_.teacher());
  for (size_t k = s.chosen().size(); k < plan.size(); ++k) planned[plan[k]] = 1;
  std::vector<double> rack_free(topo_.racks, 0), rack_gpus(topo_.racks, 0);
  for (size_t m = 0; m < topo_.machines(); ++m) {
    rack_free[topo_.rack[m]] += s.free_gpus(static_cast<int32_t>(m));
    rack_gpus[topo_.rack[m]] += topo_.gpus[m];
  }
  for (size_t i = 0; i < topo_.total_gpus(); ++i) {
    int32_t gpu = static_cast<int32_t>(i), m = topo_.machine_of[i], job = s.gpu_job(gpu);
    float* f = slot + i * kGpuSlotFeatures;
    mask[i] = s.available(gpu);
    f[0] = mask[i];
    f[1] = chosen[i];
    f[2] = static_cast<float>(topo_.nominal[m] / max_nominal_);
    f[3] = static_cast<float>(s.free_gpus(m)) / topo_.gpus[m];
    f[4] = static_cast<float>(s.chosen_on(m)) / g;
    f[5] = static_cast<float>(s.link_to_chosen(gpu) / topo_.link_cross);
    f[6] = job >= 0 && job != head ? time_feature(s.end_times()[job - s.begin()] - s.now()) : 0;
    f[7] = static_cast<float>((m + 0.5) / machines);
    f[8] = planned[i];
    f[9] = static_cast<float>(rack_free[topo_.rack[m]] / rack_gpus[topo_.rack[m]]);
    f[10] = s.slots(m, head) >= rest ? 1.0f : 0.0f;
  }
}

}  // namespace ddppo
