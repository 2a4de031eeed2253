// Heuristic scores (lower runs first) and backfill modes, as in docs/simulation.md.
#pragma once

#include <cmath>
#include <string>

#include "workload.hpp"

namespace ddppo {

// kSjbf orders by the EASY++ runtime prediction, which depends on the user's completed jobs:
// the Simulator computes its score (docs/simulation.md, "Runtime predictions").
enum class Policy { kFcfs, kSjf, kWfp3, kUnicep, kF1, kSjbf };
enum class Backfill { kNone, kEasy, kConservative };
// What backfilling takes as a job's runtime: the user's request, or the EASY++ prediction.
enum class Estimate { kRequest, kPredicted };

Policy parse_policy(const std::string& name);
Backfill parse_backfill(const std::string& name);
Estimate parse_estimate(const std::string& name);

// In every score, requested time and submit time below 1 are taken as 0.1 (RLScheduler,
// SC'20): a job with runtime 0 and no request has r = 0.
inline double at_least_tenth(double x) { return x < 1 ? 0.1 : x; }

// UNICEP's divisor log2(n) * r, with log2(1) taken as 1e-15.
inline double unicep_divisor(const Workload& w, size_t j) {
  double log_n = w.procs[j] == 1 ? 1e-15 : std::log2(static_cast<double>(w.procs[j]));
  return log_n * at_least_tenth(w.requested_time[j]);
}

// The score of job j at time t. WFP3 and UNICEP use the real wait, not RLScheduler's
// negative one. pow(x, 3.0) and the order of operations match Python's float arithmetic,
// so the reference agrees bit for bit.
inline double score(Policy p, const Workload& w, size_t j, double t) {
  double r = at_least_tenth(w.requested_time[j]);
  double s = at_least_tenth(w.submit[j]);
  double n = w.procs[j];
  double wait = t - w.submit[j];
  switch (p) {
    case Policy::kFcfs:
      return s;
    case Policy::kSjf:
      return r;
    case Policy::kWfp3:
      return -std::pow(wait / r, 3.0) * n;
    case Policy::kUnicep:
      return -wait / unicep_divisor(w, j);
    case Policy::kF1:
      return std::log10(r) * n + 870 * std::log10(s);
    case Policy::kSjbf:  // the prediction needs the users' history: Simulator::sjbf_score()
      break;
  }
  return 0;
}

}  // namespace ddppo
