// Heuristic scores (lower runs first) and backfill modes, as in docs/simulation.md.
#pragma once

#include <cmath>
#include <string>

#include "workload.hpp"

namespace ddppo {

enum class Policy { kFcfs, kSjf, kWfp3, kUnicep, kF1 };
enum class Backfill { kNone, kEasy, kConservative };

Policy parse_policy(const std::string& name);
Backfill parse_backfill(const std::string& name);

// Whether the score depends on the decision time (then the order must be rebuilt per scan).
inline bool time_dependent(Policy p) { return p == Policy::kWfp3 || p == Policy::kUnicep; }

// The score of job j at time t. r and s below 1 are taken as 0.1 (RLScheduler, SC'20);
// WFP3 and UNICEP use the real wait, not RLScheduler's negative one. pow(x, 3.0) and the
// order of operations match Python's float arithmetic, so the reference agrees bit for bit.
inline double score(Policy p, const Workload& w, size_t j, double t) {
  double r = w.requested_time[j] < 1 ? 0.1 : w.requested_time[j];
  double s = w.submit[j] < 1 ? 0.1 : w.submit[j];
  double n = w.procs[j];
  double wait = t - w.submit[j];
  switch (p) {
    case Policy::kFcfs:
      return s;
    case Policy::kSjf:
      return r;
    case Policy::kWfp3:
      return -std::pow(wait / r, 3.0) * n;
    case Policy::kUnicep: {
      double log_n = w.procs[j] == 1 ? 1e-15 : std::log2(n);
      return -wait / (log_n * r);
    }
    case Policy::kF1:
      return std::log10(r) * n + 870 * std::log10(s);
  }
  return 0;
}

}  // namespace ddppo
