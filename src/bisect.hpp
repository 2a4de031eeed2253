// A binary search without a branch on its comparisons, for short sorted ranges searched at
// values in no order, where a mispredicted branch a step costs more than the comparisons (the
// free-procs profile's steps, the requests of an EASY index).
#pragma once

#include <cstddef>

namespace ddppo {

// The first of the n >= 1 elements from `first` for which `before` is false (n if none), where
// `before` holds for a prefix of them.
template <typename T, typename Before>
inline size_t bisect(const T* first, size_t n, Before before) {
  const T* at = first;  // the answer lies in [at, at + n]
  for (size_t half; n > 1; n -= half) {
    half = n / 2;
    at = before(at[half]) ? at + half : at;
  }
  return at - first + before(*at);
}

}  // namespace ddppo
