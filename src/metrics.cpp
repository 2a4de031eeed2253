#include "metrics.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace ddppo {

namespace {

// Python's x ** 2 calls the C library's pow(), which can differ from x * x in the last bit
// (glibc: pow(64.8892857142857, 2) is one ulp below); GCC would fold pow(x, 2.0) into
// x * x, so the exponent is hidden from it.
double python_square(double x) {
  volatile double two = 2.0;
  return std::pow(x, two);
}

}  // namespace

Metrics compute_metrics(const Workload& w, size_t begin, const std::vector<double>& start,
                        int32_t machine_procs) {
  Metrics m;
  m.jobs = start.size();
  if (m.jobs == 0) return m;
  std::unordered_map<int64_t, size_t> user_index;
  std::vector<size_t> user_jobs;
  double sum_wait = 0, sum_bsld = 0, work = 0, last_end = w.submit[begin];
  for (size_t i = 0; i < start.size(); ++i) {
    size_t j = begin + i;
    double wait = start[i] - w.submit[j];
    double bsld = bounded_slowdown(wait, w.runtime[j]);
    sum_wait += wait;
    sum_bsld += bsld;
    m.max_wait = std::max(m.max_wait, wait);
    m.max_bsld = std::max(m.max_bsld, bsld);
    work += w.procs[j] * w.runtime[j];
    last_end = std::max(last_end, start[i] + w.runtime[j]);
    auto [it, added] = user_index.try_emplace(w.user[j], m.users.size());
    if (added) {
      m.users.push_back(w.user[j]);
      m.user_avg_wait.push_back(0);
      m.user_avg_bsld.push_back(0);
      user_jobs.push_back(0);
    }
    m.user_avg_wait[it->second] += wait;
    m.user_avg_bsld[it->second] += bsld;
    ++user_jobs[it->second];
  }
  m.avg_wait = sum_wait / m.jobs;
  m.avg_bsld = sum_bsld / m.jobs;
  m.makespan = last_end - w.submit[begin];
  m.utilization = m.makespan > 0 ? work / (machine_procs * m.makespan) : 0;
  double sum_x = 0, sum_x2 = 0;
  for (size_t u = 0; u < m.users.size(); ++u) {
    m.user_avg_wait[u] /= user_jobs[u];
    m.user_avg_bsld[u] /= user_jobs[u];
    sum_x += m.user_avg_bsld[u];
    sum_x2 += m.user_avg_bsld[u] * m.user_avg_bsld[u];
  }
  m.jain_user_bsld = python_square(sum_x) / (m.users.size() * sum_x2);
  return m;
}

}  // namespace ddppo
