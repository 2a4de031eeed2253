// Fast reader for the Standard Workload Format (Feitelson's Parallel Workloads Archive):
// one job per line, 18 whitespace-separated numeric fields, `;` header lines.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddppo {

constexpr int kSwfFields = 18;

// Every job line's 18 fields, in file order, and the header lines.
struct SwfColumns {
  std::array<std::vector<double>, kSwfFields> fields;
  std::vector<std::string> header;  // the `;` lines, without the `;`
  size_t skipped = 0;               // malformed lines passed over (skip_bad only)
};

// Parses a whole SWF text. A malformed line (fewer than 18 fields, a field that is not a
// number, or not an integer where SWF has integers) throws
// std::invalid_argument("line N: ..."), or is skipped and counted when `skip_bad`.
SwfColumns parse_swf(std::string_view text, bool skip_bad);

}  // namespace ddppo
