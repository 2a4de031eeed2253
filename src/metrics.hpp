// Schedule metrics of docs/simulation.md, summed in job order so that a sequential
// reference (Python's sum over a list) agrees to the last bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "workload.hpp"

namespace ddppo {

struct Metrics {
  size_t jobs = 0;
  double avg_wait = 0, max_wait = 0, avg_bsld = 0, max_bsld = 0;
  double utilization = 0, makespan = 0, jain_user_bsld = 0;
  std::vector<int64_t> users;  // in order of first appearance
  std::vector<double> user_avg_wait, user_avg_bsld;
};

// Bounded slowdown with the usual 10-second threshold (Feitelson et al., JSSPP 1997).
inline double bounded_slowdown(double wait, double runtime) {
  double v = (wait + runtime) / (runtime > 10 ? runtime : 10);
  return v > 1 ? v : 1;
}

// Metrics of jobs [begin, begin + start.size()) given their start times.
Metrics compute_metrics(const Workload& w, size_t begin, const std::vector<double>& start,
                        int32_t machine_procs);

}  // namespace ddppo
