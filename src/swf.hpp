// Fast reader for the Standard Workload Format (Feitelson's Parallel Workloads Archive):
// one job per line, 18 whitespace-separated numeric fields, `;` header lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ddppo {

// The SWF fields the simulator needs, one entry per job line, in file order.
struct SwfColumns {
  std::vector<int64_t> id, allocated_procs, requested_procs, user, group, queue;
  std::vector<double> submit, runtime, requested_time;
  int64_t max_procs = -1;  // header MaxProcs, -1 when absent
  int64_t max_nodes = -1;  // header MaxNodes, -1 when absent
};

// Parses a whole SWF text. Throws std::invalid_argument("line N: ...") on a malformed line.
SwfColumns parse_swf(std::string_view text);

}  // namespace ddppo
