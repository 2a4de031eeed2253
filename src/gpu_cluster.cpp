#include "gpu_cluster.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace ddppo {

namespace {
constexpr double kTolerance = 1e-6;  // CPU and memory shares: docs/gpu.md, "Jobs"

int32_t share_limit(double free, double share) {
  if (share <= 0) return std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(std::floor((free + kTolerance) / share));
}
}  // namespace

GpuOrder parse_gpu_order(const std::string& name) {
  if (name == "fifo") return GpuOrder::kFifo;
  if (name == "srtf") return GpuOrder::kSrtf;
  if (name == "las") return GpuOrder::kLas;
  throw std::invalid_argument("unknown ordering '" + name + "' (fifo, srtf, las)");
}

GpuPlacement parse_gpu_placement(const std::string& name) {
  if (name == "first_fit") return GpuPlacement::kFirstFit;
  if (name == "best_fit") return GpuPlacement::kBestFit;
  if (name == "random") return GpuPlacement::kRandom;
  if (name == "speed_fit") return GpuPlacement::kSpeedFit;
  throw std::invalid_argument("unknown placement '" + name +
                              "' (first_fit, best_fit, random, speed_fit)");
}

void Topology::validate() {
  size_t n = gpus.size();
  if (n == 0) throw std::invalid_argument("a cluster needs at least one machine");
  if (rack.size() != n || cpu.size() != n || mem.size() != n || nominal.size() != n ||
      speed.size() != n)
    throw std::invalid_argument("machine columns differ in length");
  if (!(0 <= link_machine && link_machine <= link_rack && link_rack <= link_cross))
    throw std::invalid_argument("link costs must satisfy 0 <= machine <= rack <= cross");
  if (!(comm_penalty >= 0)) throw std::invalid_argument("comm_penalty must be >= 0");
  machine_of.clear();
  first_gpu.clear();
  racks = 0;
  for (size_t m = 0; m < n; ++m) {
    if (gpus[m] < 1 || rack[m] < 0 || !(speed[m] > 0) || !(nominal[m] > 0) || cpu[m] < 0 ||
        mem[m] < 0)
      throw std::invalid_argument("machine " + std::to_string(m) +
                                  ": needs >= 1 GPU, a rack >= 0, speeds > 0, CPU and memory >= 0");
    first_gpu.push_back(static_cast<int32_t>(machine_of.size()));
    machine_of.insert(machine_of.end(), gpus[m], static_cast<int32_t>(m));
    racks = std::max(racks, rack[m] + 1);
  }
}

double Topology::link(int32_t a, int32_t b) const {
  int32_t ma = machine_of[a], mb = machine_of[b];
  if (ma == mb) return link_machine;
  return rack[ma] == rack[mb] ? link_rack : link_cross;
}

GpuCluster::GpuCluster(const GpuJobs& jobs, const Topology& topo, size_t begin, size_t end,
                       uint64_t seed, bool non_blocking)
    : jobs_(jobs),
      topo_(topo),
      begin_(begin),
      end_(end),
      next_arrival_(begin),
      seed_(seed),
      non_blocking_(non_blocking) {
  topo_.validate();
  if (begin >= end || end > jobs.size) throw std::invalid_argument("empty or invalid window");
  size_t m = topo_.machines();
  free_gpus_ = topo_.gpus;
  free_cpu_ = topo_.cpu;
  free_mem_ = topo_.mem;
  free_total_ = static_cast<int32_t>(topo_.total_gpus());
  chosen_on_.assign(m, 0);
  gpu_job_.assign(topo_.total_gpus(), -1);
  for (size_t j = begin; j < end; ++j)
    if (jobs.gpus[j] < 1 || !fits(static_cast<int32_t>(j)))
      throw std::invalid_argument("job " + std::to_string(jobs.id[j]) +
                                  " does not fit the empty cluster");
  size_t n = end - begin;
  start_.assign(n, -1);
  end_time_.assign(n, -1);
  comm_.assign(n, 0);
  placement_.assign(n, {});
  aside_.assign(n, 0);
  now_ = jobs.submit[begin];
  advance();
}

int32_t GpuCluster::slots(int32_t machine, int32_t job) const {
  int32_t s = free_gpus_[machine];
  s = std::min(s, share_limit(free_cpu_[machine], share_cpu(job)));
  return std::min(s, share_limit(free_mem_[machine], share_mem(job)));
}

bool GpuCluster::fits(int32_t job) const {
  int32_t total = 0;
  for (size_t m = 0; m < topo_.machines() && total < jobs_.gpus[job]; ++m)
    total += slots(static_cast<int32_t>(m), job);
  return total >= jobs_.gpus[job];
}

bool GpuCluster::available(int32_t gpu) const {
  if (phase_ != Phase::kPlace || gpu < 0 || static_cast<size_t>(gpu) >= gpu_job_.size() ||
      gpu_job_[gpu] >= 0)
    return false;
  return slots(topo_.machine_of[gpu], head_) > 0;
}

size_t GpuCluster::available_count() const {
  size_t n = 0;
  for (size_t i = 0; i < gpu_job_.size(); ++i) n += available(static_cast<int32_t>(i));
  return n;
}

void GpuCluster::apply_events() {
  while (!completions_.empty() && completions_.top().first <= now_) {
    release(completions_.top().second);
    completions_.pop();
  }
  while (next_arrival_ < end_ && jobs_.submit[next_arrival_] <= now_)
    queue_.push_back(static_cast<int32_t>(next_arrival_++));
}

void GpuCluster::advance() {
  for (;;) {
    apply_events();
    if (head_ >= 0 && fits(head_)) {
      phase_ = Phase::kPlace;
      return;
    }
    if (head_ < 0 && !queue_.empty() && (!non_blocking_ || any_fits())) {
      phase_ = Phase::kOrder;
      return;
    }
    if (started_ == end_ - begin_) {
      phase_ = Phase::kDone;
      return;
    }
    double next = next_event();
    if (std::isinf(next)) throw std::logic_error("the committed job can never start");
    now_ = std::max(now_, next);
    std::fill(aside_.begin(), aside_.end(), 0);
  }
}

double GpuCluster::next_event() const {
  double next = std::numeric_limits<double>::infinity();
  if (next_arrival_ < end_) next = jobs_.submit[next_arrival_];
  if (!completions_.empty()) next = std::min(next, completions_.top().first);
  return next;
}

bool GpuCluster::any_fits() const {
  for (int32_t job : queue_)
    if (ready(job)) return true;
  return false;
}

bool GpuCluster::can_set_aside() const {
  return non_blocking_ && phase_ == Phase::kPlace && chosen_.empty() && worth_holding(head_);
}

void GpuCluster::set_aside() {
  if (!can_set_aside()) throw std::invalid_argument("nothing to set aside");
  aside_[head_ - begin_] = 1;
  queue_.insert(std::lower_bound(queue_.begin(), queue_.end(), head_), head_);
  head_ = -1;
  for (auto& plan : plans_) plan.clear();
  advance();
}

bool GpuCluster::worth_holding(int32_t job) const {
  const int32_t g = jobs_.gpus[job];
  std::vector<int32_t> machines(topo_.machines());
  std::iota(machines.begin(), machines.end(), 0);
  std::stable_sort(machines.begin(), machines.end(),
                   [&](int32_t a, int32_t b) { return topo_.nominal[a] > topo_.nominal[b]; });
  // Down the nominal speeds: the job's slots now and the running jobs' ends on the machines
  // at or above each speed; the first speed whose slots hold g GPUs is the pace it gets now.
  double sooner = std::numeric_limits<double>::infinity();  // the earliest end by holding
  std::vector<double> ends;
  int32_t held = 0;
  for (size_t k = 0; k < machines.size(); ++k) {
    int32_t m = machines[k];
    held += slots(m, job);
    for (int32_t gpu = topo_.first_gpu[m]; gpu < topo_.first_gpu[m] + topo_.gpus[m]; ++gpu)
      if (gpu_job_[gpu] >= 0 && gpu_job_[gpu] != head_)
        ends.push_back(end_time_[gpu_job_[gpu] - begin_]);
    double v = topo_.nominal[m];
    if (k + 1 < machines.size() && topo_.nominal[machines[k + 1]] == v) continue;
    if (held >= g) return sooner < now_ + jobs_.runtime[job] / v;
    if (static_cast<size_t>(g - held) > ends.size()) continue;
    std::nth_element(ends.begin(), ends.begin() + (g - held - 1), ends.end());
    sooner = std::min(sooner, ends[g - held - 1] + jobs_.runtime[job] / v);
  }
  return false;  // it does not fit now
}

bool GpuCluster::can_wait() const {
  if (non_blocking_ && (phase_ != Phase::kPlace || any_fits())) return false;
  return phase_ != Phase::kDone && chosen_.empty() && !std::isinf(next_event());
}

void GpuCluster::wait() {
  if (!can_wait()) throw std::invalid_argument("nothing to wait for");
  now_ = std::max(now_, next_event());
  for (auto& plan : plans_) plan.clear();
  advance();
}

std::vector<double> GpuCluster::compact_times(const std::vector<int32_t>& jobs) const {
  // The running jobs' ends per machine, per rack and in the cluster, sorted once.
  std::vector<std::vector<double>> machine_ends(topo_.machines()), rack_ends(topo_.racks);
  std::vector<double> all_ends;
  std::vector<int32_t> rack_free(topo_.racks, 0), rack_gpus(topo_.racks, 0);
  for (size_t gpu = 0; gpu < gpu_job_.size(); ++gpu) {
    int32_t m = topo_.machine_of[gpu], r = topo_.rack[m], holder = gpu_job_[gpu];
    ++rack_gpus[r];
    if (holder < 0) {
      ++rack_free[r];
    } else if (holder != head_) {
      double end = end_time_[holder - begin_];
      machine_ends[m].push_back(end);
      rack_ends[r].push_back(end);
      all_ends.push_back(end);
    }
  }
  for (auto& ends : machine_ends) std::sort(ends.begin(), ends.end());
  for (auto& ends : rack_ends) std::sort(ends.begin(), ends.end());
  std::sort(all_ends.begin(), all_ends.end());
  // When k more GPUs of a group are free: now for k <= 0, else its k-th end.
  auto when = [&](const std::vector<double>& ends, int32_t k) {
    if (k <= 0) return now_;
    if (static_cast<size_t>(k) > ends.size()) return std::numeric_limits<double>::infinity();
    return ends[k - 1];
  };
  std::vector<double> times;
  for (int32_t job : jobs) {
    const int32_t g = jobs_.gpus[job];
    double best = std::numeric_limits<double>::infinity();
    for (size_t m = 0; m < topo_.machines(); ++m)
      if (topo_.gpus[m] >= g) best = std::min(best, when(machine_ends[m], g - free_gpus_[m]));
    for (int32_t r = 0; r < topo_.racks && std::isinf(best); ++r)
      if (rack_gpus[r] >= g) best = std::min(best, when(rack_ends[r], g - rack_free[r]));
    times.push_back(std::isinf(best) ? when(all_ends, g - free_total_) : best);
  }
  return times;
}

void GpuCluster::commit(size_t position) {
  if (phase_ != Phase::kOrder || position >= queue_.size())
    throw std::invalid_argument("no waiting job at that position");
  if (non_blocking_ && !ready(queue_[position]))
    throw std::invalid_argument("non-blocking: the job does not fit now or is set aside");
  head_ = queue_[position];
  queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(position));
  for (auto& plan : plans_) plan.clear();
  advance();
}

void GpuCluster::take(int32_t gpu, int32_t job) {
  int32_t m = topo_.machine_of[gpu];
  gpu_job_[gpu] = job;
  --free_gpus_[m];
  --free_total_;
  free_cpu_[m] -= share_cpu(job);
  free_mem_[m] -= share_mem(job);
}

void GpuCluster::release(int32_t job) {
  for (int32_t gpu : placement_[job - begin_]) {
    int32_t m = topo_.machine_of[gpu];
    gpu_job_[gpu] = -1;
    ++free_gpus_[m];
    ++free_total_;
    free_cpu_[m] += share_cpu(job);
    free_mem_[m] += share_mem(job);
  }
}

void GpuCluster::choose(int32_t gpu) {
  if (!available(gpu)) throw std::invalid_argument("GPU " + std::to_string(gpu) + " is taken");
  take(gpu, head_);
  chosen_.push_back(gpu);
  ++chosen_on_[topo_.machine_of[gpu]];
  if (static_cast<int32_t>(chosen_.size()) == jobs_.gpus[head_]) start_head();
}

void GpuCluster::start_head() {
  int32_t j = head_;
  size_t i = j - begin_;
  double slowest = std::numeric_limits<double>::infinity();
  for (int32_t gpu : chosen_) {
    slowest = std::min(slowest, topo_.speed[topo_.machine_of[gpu]]);
    chosen_on_[topo_.machine_of[gpu]] = 0;
  }
  double cost = comm_cost(chosen_);
  double factor =
      chosen_.size() < 2 ? 1.0 : 1 + topo_.comm_penalty * std::max(0.0, cost - topo_.link_machine);
  start_[i] = now_;
  end_time_[i] = now_ + jobs_.runtime[j] * factor / slowest;
  comm_[i] = cost;
  placement_[i] = std::move(chosen_);
  chosen_.clear();
  head_ = -1;
  ++started_;
  if (end_time_[i] <= now_)
    release(j);
  else
    completions_.push({end_time_[i], j});
  advance();
}

double GpuCluster::comm_cost(const std::vector<int32_t>& gpus) const {
  double g = static_cast<double>(gpus.size());
  if (gpus.size() < 2) return 0;
  std::vector<double> on_machine(topo_.machines(), 0), on_rack(topo_.racks, 0);
  for (int32_t gpu : gpus) {
    ++on_machine[topo_.machine_of[gpu]];
    ++on_rack[topo_.rack[topo_.machine_of[gpu]]];
  }
  double machine_pairs = 0, rack_pairs = 0, pairs = g * (g - 1) / 2;
  for (double c : on_machine) machine_pairs += c * (c - 1) / 2;
  for (double r : on_rack) rack_pairs += r * (r - 1) / 2;
  rack_pairs -= machine_pairs;
  double cross_pairs = pairs - machine_pairs - rack_pairs;
  return (topo_.link_machine * machine_pairs + topo_.link_rack * rack_pairs +
          topo_.link_cross * cross_pairs) /
         pairs;
}

double GpuCluster::link_to_chosen(int32_t gpu) const {
  if (chosen_.empty()) return 0;
  double sum = 0;
  for (int32_t c : chosen_) sum += c == gpu ? 0 : topo_.link(gpu, c);
  return sum / static_cast<double>(chosen_.size());
}

std::vector<double> GpuCluster::attained_service() const {
  std::vector<double> service(jobs_.users, 0);
  for (size_t i = 0; i < start_.size(); ++i)
    if (start_[i] >= 0)
      service[jobs_.user[begin_ + i]] +=
          jobs_.gpus[begin_ + i] * (std::min(now_, end_time_[i]) - start_[i]);
  return service;
}

std::vector<double> GpuCluster::order_keys(GpuOrder order) const {
  std::vector<double> key(queue_.size(), 0);
  if (order == GpuOrder::kSrtf) {
    for (size_t k = 0; k < queue_.size(); ++k) key[k] = jobs_.runtime[queue_[k]];
  } else if (order == GpuOrder::kLas) {
    std::vector<double> service = attained_service();
    for (size_t k = 0; k < queue_.size(); ++k) key[k] = service[jobs_.user[queue_[k]]];
  }
  return key;  // fifo: all equal, so the queue order decides
}

size_t GpuCluster::order_position(GpuOrder order) const {
  if (queue_.empty()) throw std::invalid_argument("no waiting job");
  if (order == GpuOrder::kFifo) return 0;
  std::vector<double> key = order_keys(order);
  return static_cast<size_t>(std::min_element(key.begin(), key.end()) - key.begin());
}

std::vector<size_t> GpuCluster::order_ranking(GpuOrder order) const {
  std::vector<double> key = order_keys(order);
  std::vector<size_t> rank(queue_.size());
  std::iota(rank.begin(), rank.end(), size_t{0});
  std::stable_sort(rank.begin(), rank.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
  return rank;
}

// best_fit and speed_fit (docs/gpu.md, "Heuristics"): the most compact level that holds
// g slots (one machine, else one rack, else the cluster); among that level's groups the
// highest pace (speed_fit only; best_fit's pace is always 0), then the fewest slots, then
// the lowest index; in the group, the machines at or above the pace by slots descending.
std::vector<int32_t> GpuCluster::packed_plan(int32_t job, int32_t g, bool by_speed) const {
  const int32_t m_count = static_cast<int32_t>(topo_.machines());
  std::vector<int32_t> slot(m_count), rack_slots(topo_.racks, 0);
  for (int32_t m = 0; m < m_count; ++m) {
    slot[m] = slots(m, job);
    rack_slots[topo_.rack[m]] += slot[m];
  }
  // The groups of the level, each as its machines in index order.
  std::vector<std::vector<int32_t>> groups;
  for (int32_t m = 0; m < m_count; ++m)
    if (slot[m] >= g) groups.push_back({m});
  const bool one_machine = !groups.empty();
  for (int32_t r = 0; r < topo_.racks && !one_machine; ++r) {
    if (rack_slots[r] < g) continue;
    groups.emplace_back();
    for (int32_t m = 0; m < m_count; ++m)
      if (topo_.rack[m] == r) groups.back().push_back(m);
  }
  if (groups.empty()) {
    groups.emplace_back(m_count);
    std::iota(groups.back().begin(), groups.back().end(), 0);
  }
  // A group's pace: the highest nominal speed v whose machines at or above v hold g slots.
  auto pace = [&](std::vector<int32_t> members) {
    if (!by_speed) return 0.0;
    std::stable_sort(members.begin(), members.end(),
                     [&](int32_t a, int32_t b) { return topo_.nominal[a] > topo_.nominal[b]; });
    int32_t held = 0;
    for (int32_t m : members)
      if ((held += slot[m]) >= g) return topo_.nominal[m];
    return 0.0;
  };
  auto group_slots = [&](const std::vector<int32_t>& members) {
    int32_t n = 0;
    for (int32_t m : members) n += slot[m];
    return n;
  };
  size_t best = 0;
  double best_pace = pace(groups[0]);
  for (size_t k = 1; k < groups.size(); ++k) {
    double p = pace(groups[k]);
    if (p > best_pace || (p == best_pace && group_slots(groups[k]) < group_slots(groups[best])))
      best = k, best_pace = p;
  }
  std::vector<int32_t> machines;
  for (int32_t m : groups[best])
    if (topo_.nominal[m] >= best_pace) machines.push_back(m);
  std::stable_sort(machines.begin(), machines.end(),
                   [&](int32_t a, int32_t b) { return slot[a] > slot[b]; });
  std::vector<int32_t> plan;
  for (int32_t m : machines) {
    int32_t take = slot[m];
    for (int32_t gpu = topo_.first_gpu[m]; take > 0 && static_cast<int32_t>(plan.size()) < g; ++gpu)
      if (gpu_job_[gpu] < 0) plan.push_back(gpu), --take;
  }
  return plan;
}

double GpuCluster::best_fit_cost(int32_t job) const {
  return fits(job) ? comm_cost(packed_plan(job, jobs_.gpus[job], false)) : 0;
}

int32_t GpuCluster::placement_gpu(GpuPlacement placement) {
  if (phase_ != Phase::kPlace) throw std::invalid_argument("no job to place");
  if (placement == GpuPlacement::kBestFit || placement == GpuPlacement::kSpeedFit) {
    bool by_speed = placement == GpuPlacement::kSpeedFit;
    std::vector<int32_t>& plan = plans_[by_speed];
    if (plan.size() <= chosen_.size() ||
        !std::equal(chosen_.begin(), chosen_.end(), plan.begin())) {
      plan = chosen_;  // a partial placement by someone else: plan the rest
      std::vector<int32_t> rest =
          packed_plan(head_, jobs_.gpus[head_] - static_cast<int32_t>(chosen_.size()), by_speed);
      plan.insert(plan.end(), rest.begin(), rest.end());
    }
    return plan[chosen_.size()];
  }
  size_t pick = 0, n = available_count();
  if (placement == GpuPlacement::kRandom) pick = splitmix64(seed_ ^ splitmix64(draws_++)) % n;
  for (size_t i = 0; i < gpu_job_.size(); ++i)
    if (available(static_cast<int32_t>(i)) && pick-- == 0) return static_cast<int32_t>(i);
  throw std::logic_error("no available GPU for a job that fits");
}

std::vector<size_t> GpuCluster::candidates(GpuOrder order) const {
  std::vector<size_t> ranking = order_ranking(order);
  if (non_blocking_)
    ranking.erase(std::remove_if(ranking.begin(), ranking.end(),
                                 [&](size_t position) { return !ready(queue_[position]); }),
                  ranking.end());
  return ranking;
}

size_t GpuCluster::pick(GpuOrder order) const {
  return non_blocking_ ? candidates(order).at(0) : order_position(order);
}

void GpuCluster::run(GpuOrder order, GpuPlacement placement, bool hold) {
  while (!done()) {
    if (phase_ != Phase::kPlace)
      commit(pick(order));
    else if (hold && can_set_aside())
      set_aside();
    else
      choose(placement_gpu(placement));
  }
}

GpuMetrics compute_gpu_metrics(const GpuCluster& c) {
  GpuMetrics m;
  const GpuJobs& w = c.jobs();
  m.jobs = c.end() - c.begin();
  double first = w.submit[c.begin()], last = first, held = 0, comm = 0;
  for (size_t i = 0; i < m.jobs; ++i) {
    size_t j = c.begin() + i;
    double start = c.start_times()[i], end = c.end_times()[i];
    m.avg_jct += end - w.submit[j];
    m.avg_queue_delay += start - w.submit[j];
    last = std::max(last, end);
    held += w.gpus[j] * (end - start);
    if (w.gpus[j] >= 2) ++m.multi_gpu_jobs, comm += c.comm_costs()[i];
  }
  m.avg_jct /= m.jobs;
  m.avg_queue_delay /= m.jobs;
  m.makespan = last - first;
  m.avg_comm_cost = m.multi_gpu_jobs ? comm / m.multi_gpu_jobs : 0;
  m.gpu_utilization = m.makespan > 0 ? held / (c.topology().total_gpus() * m.makespan) : 0;
  return m;
}

}  // namespace ddppo
