// A batch of GPU-cluster environments (docs/gpu.md, "Environments"): the placement agent
// picks one GPU per step for the head job, masked; in dual mode an ordering agent first
// picks the head among the first K waiting jobs. Both write into caller-owned arrays of
// slots (jobs in an ordering step, GPUs in a placement step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "gpu_cluster.hpp"

namespace ddppo {

constexpr size_t kGpuSlotFeatures = 11;
constexpr size_t kGpuGlobalFeatures = 7;
constexpr size_t kGpuEpisodeMetrics = 5;  // avg_jct, makespan, avg_comm_cost, util, delay

struct GpuEnvConfig {
  size_t window_jobs;
  size_t max_queue;  // K: waiting jobs shown in an ordering step
  bool dual;         // false: the ordering is the heuristic `order`
  GpuOrder order;
  double w_jct, w_makespan, w_comm;  // reward weights
  // With a placement heuristic: rewards relative to `order` + that placement on the same
  // window (docs/gpu.md, "Environments").
  std::optional<GpuPlacement> baseline;
  // The placement the observation's plan feature shows and imitation clones: speed_fit
  // when it is the baseline, else best_fit.
  GpuPlacement teacher() const {
    return baseline == GpuPlacement::kSpeedFit ? GpuPlacement::kSpeedFit : GpuPlacement::kBestFit;
  }
  // The agents may also wait (docs/gpu.md, "Environments"): the last slot is then the
  // wait action.
  bool wait = false;
  // Only jobs that fit now are committed, and the wait delays no job that could start
  // (GpuCluster's non_blocking; docs/gpu.md, "Environments").
  bool non_blocking = false;
  // The wait action also sets the head aside while the hold rule would (GpuCluster's
  // set_aside; docs/gpu.md, "The set-aside hold"); the baseline and the heuristics'
  // actions are then the hold rule's. Needs `wait` and `non_blocking`.
  bool set_aside = false;
  // With set_aside: whether the baseline and the heuristics' actions are the hold rule's
  // (true) or the wait rule's (false: the agent may set aside, its teacher never does).
  bool teacher_holds = true;
  // Whether the baseline and the heuristics' actions are the hold rule's.
  bool teacher_sets_aside() const { return set_aside && teacher_holds; }
};

struct GpuOutputs {
  float* slots = nullptr;             // [B, S, kGpuSlotFeatures]
  float* global = nullptr;            // [B, kGpuGlobalFeatures]
  uint8_t* mask = nullptr;            // [B, S]
  float* reward = nullptr;            // [B]
  uint8_t* done = nullptr;            // [B]
  int64_t* episode_start = nullptr;   // [B]
  double* episode_metrics = nullptr;  // [B, kGpuEpisodeMetrics]
};

class GpuBatchEnv {
 public:
  GpuBatchEnv(const GpuJobs& jobs, const Topology& topo, GpuEnvConfig config,
              const std::vector<uint64_t>& seeds);
  size_t size() const { return envs_.size(); }
  size_t slots() const;  // S = max(K, GPUs), plus the wait slot
  void reset(GpuOutputs out);
  void step(const int32_t* actions, GpuOutputs out);
  void observe(GpuOutputs out);
  // The heuristics' action in each environment's current step.
  void heuristic_actions(GpuOrder order, GpuPlacement placement, int32_t* actions);
  void begin_at(size_t i, size_t start);
  uint64_t episodes(size_t i) const { return envs_[i].episode + 1; }
  // Environment i's simulator as it stands (for traces of decisions).
  const GpuCluster& cluster(size_t i) const { return *envs_.at(i).sim; }
  void restore(size_t i, uint64_t episode, const std::vector<int32_t>& actions);

 private:
  struct Env {
    uint64_t seed = 0, episode = 0;
    size_t begin = 0;
    std::optional<GpuCluster> sim;
    // The baseline's per-job reward terms on this window and its makespan (empty and 0
    // without a baseline).
    std::vector<double> base_job;
    double base_makespan = 0;
    std::vector<size_t> ranking;  // ordering steps: the waiting jobs shown, by `order`
  };
  void start_episode(Env& e);
  void start_window(Env& e, size_t begin, uint64_t seed);
  void settle(Env& e);  // runs the heuristic ordering in placement mode
  float act(Env& e, int32_t action);
  bool holds(const GpuCluster& s) const { return config_.set_aside && s.can_set_aside(); }
  double job_term(const GpuCluster& s, size_t k) const;  // a started job's reward term
  float finish_episode(const Env& e, double* metrics) const;
  void observe(const Env& e, size_t i, GpuOutputs out) const;
  void observe_jobs(const GpuCluster& s, const std::vector<size_t>& ranking, float* slots,
                    uint8_t* mask) const;
  void observe_gpus(const GpuCluster& s, float* slots, uint8_t* mask) const;
  void observe_wait(const Env& e, float* slot, uint8_t* mask) const;

  GpuJobs jobs_;
  Topology topo_;
  GpuEnvConfig config_;
  std::vector<Env> envs_;
  double max_nominal_ = 1;
};

}  // namespace ddppo
