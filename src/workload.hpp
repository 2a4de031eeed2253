// Jobs of a cleaned trace, as column views over arrays owned by the caller (NumPy on the
// Python side). Jobs are ordered by (submit, id), so a job's index is its FCFS rank.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ddppo {

struct Workload {
  const int64_t* id = nullptr;
  const double* submit = nullptr;
  const double* runtime = nullptr;
  const double* requested_time = nullptr;
  const int32_t* procs = nullptr;
  const int64_t* user = nullptr;
  size_t size = 0;
};

}  // namespace ddppo
