// GPU-cluster simulator: racks of machines of GPUs, jobs placed GPU by GPU, runtimes
// scaled by the slowest machine and the spread of the GPUs, non-preemptive, with the
// "pick and wait" decision model. Exact semantics: docs/gpu.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "splitmix.hpp"

namespace ddppo {

// Jobs of a cleaned GPU trace, as column views over caller-owned arrays, in (submit, id)
// order. `user` holds dense ids 0 .. users-1.
struct GpuJobs {
  const int64_t* id = nullptr;
  const double* submit = nullptr;
  const double* runtime = nullptr;
  const int32_t* gpus = nullptr;
  const double* cpu = nullptr;
  const double* mem = nullptr;
  const int32_t* user = nullptr;
  int32_t users = 1;
  size_t size = 0;
};

struct Topology {
  std::vector<int32_t> rack, gpus;  // per machine
  std::vector<double> cpu, mem, nominal, speed;
  double link_machine = 1, link_rack = 4, link_cross = 16, comm_penalty = 0.05;

  // Derived by validate(): per GPU its machine, per machine its first GPU.
  std::vector<int32_t> machine_of, first_gpu;
  int32_t racks = 0;
  void validate();
  size_t total_gpus() const { return machine_of.size(); }
  size_t machines() const { return gpus.size(); }
  double link(int32_t a, int32_t b) const;  // link cost between two GPUs
};

enum class GpuOrder { kFifo, kSrtf, kLas };
enum class GpuPlacement { kFirstFit, kBestFit, kRandom, kSpeedFit };
GpuOrder parse_gpu_order(const std::string& name);
GpuPlacement parse_gpu_placement(const std::string& name);

class GpuCluster {
 public:
  enum class Phase { kOrder, kPlace, kDone };
  // `non_blocking` (docs/gpu.md, "Decision model"): only a job that fits now is committed
  // (none fitting: time advances), and waiting is possible only in a placement step
  // while no other waiting job fits now, so no decision delays a job that could start.
  GpuCluster(const GpuJobs& jobs, const Topology& topo, size_t begin, size_t end, uint64_t seed = 0,
             bool non_blocking = false);

  Phase phase() const { return phase_; }
  bool done() const { return phase_ == Phase::kDone; }
  double now() const { return now_; }
  const std::vector<int32_t>& waiting() const { return queue_; }  // (submit, id) order
  int32_t head() const { return head_; }                          // committed job, or -1
  const std::vector<int32_t>& chosen() const { return chosen_; }  // the head's GPUs so far
  bool available(int32_t gpu) const;
  size_t available_count() const;

  // Ordering decision: commits waiting()[position]; then stands at the next decision.
  void commit(size_t position);
  // Placement decision: takes an available GPU for the head; after the last one the job
  // starts and the simulator stands at the next decision.
  void choose(int32_t gpu);
  // The agents' third decision (docs/gpu.md, "Environments"): start nothing now and stand
  // at the next decision after the next arrival or completion (the head, if any, stays
  // committed). Possible before the head's first GPU when such an event is to come.
  bool can_wait() const;
  void wait();
  // The set-aside hold (docs/gpu.md, "The set-aside hold"): when non-blocking, before the
  // head's first GPU and while holding it is worth it (worth_holding), the head goes back
  // to the queue, set aside until time advances: the other jobs that fit may start now.
  bool can_set_aside() const;
  void set_aside();
  // Whether a job that fits now would end sooner, at the nominal speeds, by starting at
  // the time g GPUs of a faster nominal speed than the fastest it can get now are free,
  // counting only the running jobs' ends (docs/gpu.md, "The set-aside hold").
  bool worth_holding(int32_t job) const;
  double next_event() const;  // the next arrival's or completion's time; infinity if none
  // Per job, the earliest time, counting only the running jobs' completions, at which it
  // could be placed compactly: its GPUs free on one machine, else in one rack, else
  // anywhere.
  std::vector<double> compact_times(const std::vector<int32_t>& jobs) const;

  // The heuristics' decisions in the current state.
  size_t order_position(GpuOrder order) const;
  // Every waiting job's queue position, in the ordering's order (ties by position): the
  // first is order_position(order).
  std::vector<size_t> order_ranking(GpuOrder order) const;
  int32_t placement_gpu(GpuPlacement placement);  // random draws advance the counter
  // The ordering's decision: its pick (order_position), or when non-blocking the first
  // waiting job in its order that fits now.
  size_t pick(GpuOrder order) const;
  // Runs the window with heuristics to the end (non-blocking: the wait rule, docs/gpu.md,
  // "Heuristics"; with `hold` too, the head is set aside whenever that is possible).
  void run(GpuOrder order, GpuPlacement placement, bool hold = false);
  bool non_blocking() const { return non_blocking_; }
  // Every waiting job's queue position in the ordering's order, the ones that fit now
  // only when non-blocking: what an ordering step may commit.
  std::vector<size_t> candidates(GpuOrder order) const;

  // Placement cost of a set of GPUs (docs/gpu.md, "Communication cost").
  double comm_cost(const std::vector<int32_t>& gpus) const;
  // Mean link cost from `gpu` to the head's chosen GPUs (0 when none is chosen).
  double link_to_chosen(int32_t gpu) const;
  // best_fit's (or speed_fit's) placement of the head (chosen GPUs first) as last planned
  // by placement_gpu(kBestFit or kSpeedFit); empty before that.
  const std::vector<int32_t>& planned(GpuPlacement packing) const {
    return plans_[packing == GpuPlacement::kSpeedFit];
  }
  // The communication cost of best_fit's placement of waiting job `job` if it started now
  // (0 when it does not fit now).
  double best_fit_cost(int32_t job) const;

  // State for observations.
  const Topology& topology() const { return topo_; }
  const GpuJobs& jobs() const { return jobs_; }
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  int32_t gpu_job(int32_t gpu) const { return gpu_job_[gpu]; }  // -1 when free
  int32_t free_gpus(int32_t machine) const { return free_gpus_[machine]; }
  int32_t chosen_on(int32_t machine) const { return chosen_on_[machine]; }
  int32_t slots(int32_t machine, int32_t job) const;
  bool fits(int32_t job) const;
  int32_t free_total() const { return free_total_; }
  // Per window job (index i is job begin + i): start, end, comm cost, GPUs in choice order.
  const std::vector<double>& start_times() const { return start_; }
  const std::vector<double>& end_times() const { return end_time_; }
  const std::vector<double>& comm_costs() const { return comm_; }
  const std::vector<std::vector<int32_t>>& placements() const { return placement_; }

 private:
  using Completion = std::pair<double, int32_t>;  // (end, job), min-heap
  void advance();
  void apply_events();
  void start_head();
  void release(int32_t job);
  bool any_fits() const;  // some waiting job that is not set aside fits now
  bool ready(int32_t job) const { return !aside_[job - begin_] && fits(job); }
  void take(int32_t gpu, int32_t job);
  double share_cpu(int32_t job) const { return jobs_.cpu[job] / jobs_.gpus[job]; }
  double share_mem(int32_t job) const { return jobs_.mem[job] / jobs_.gpus[job]; }
  std::vector<double> attained_service() const;
  std::vector<double> order_keys(GpuOrder order) const;  // per waiting job
  // best_fit's (by_speed false) or speed_fit's GPUs for g more GPUs of `job`.
  std::vector<int32_t> packed_plan(int32_t job, int32_t g, bool by_speed) const;

  GpuJobs jobs_;
  Topology topo_;
  size_t begin_, end_, next_arrival_;
  uint64_t seed_, draws_ = 0;
  bool non_blocking_;
  double now_;
  Phase phase_ = Phase::kOrder;
  int32_t head_ = -1;
  size_t started_ = 0;
  std::vector<int32_t> queue_, chosen_, chosen_on_, gpu_job_, free_gpus_;
  std::vector<char> aside_;  // per window job: set aside until time advances
  std::vector<double> free_cpu_, free_mem_;
  int32_t free_total_ = 0;
  std::vector<int32_t> plans_[2];  // best_fit's and speed_fit's plans for the head
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions_;
  std::vector<double> start_, end_time_, comm_;
  std::vector<std::vector<int32_t>> placement_;
};

struct GpuMetrics {
  size_t jobs = 0, multi_gpu_jobs = 0;
  double avg_jct = 0, avg_queue_delay = 0, makespan = 0, avg_comm_cost = 0, gpu_utilization = 0;
};
GpuMetrics compute_gpu_metrics(const GpuCluster& c);

}  // namespace ddppo
