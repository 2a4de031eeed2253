// Sorting a range that was sorted a moment ago and has changed a little: a kept order whose
// keys moved, with new elements at its end (the simulator's conservative ranks, the RL
// environment's heuristic ranks).
#pragma once

#include <algorithm>
#include <cstddef>

namespace ddppo {

// Sorts [first, last) by insertion, which is linear when it is nearly sorted; false, with the
// range left unsorted, once more than `moves` elements would have moved.
template <typename It>
bool insertion_sort(It first, It last, size_t moves) {
  for (It it = first; it != last; ++it) {
    auto x = *it;
    It hole = it;
    for (; hole != first && x < hole[-1]; --hole, --moves) {
      if (moves == 0) {
        *hole = x;
        return false;
      }
      *hole = hole[-1];
    }
    *hole = x;
  }
  return true;
}

// Sorts [first, last): by insertion while that stays nearly linear, else by std::sort.
template <typename It>
void sort_nearly_sorted(It first, It last) {
  if (!insertion_sort(first, last, 4 * static_cast<size_t>(last - first) + 64))
    std::sort(first, last);
}

}  // namespace ddppo
