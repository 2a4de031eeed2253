// Sorting a range that was sorted a moment ago and has changed a little: a kept order whose
// keys moved, with new elements after it (the simulator's conservative ranks, the RL
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

// Sorts [first, last), whose [first, middle) is sorted and whose [middle, last) is new: the
// new part by std::sort, then one merge (inserting them one by one moved half the kept order
// for each).
template <typename It>
void merge_new(It first, It middle, It last) {
  std::sort(middle, last);
  std::inplace_merge(first, middle, last);
}

// merge_new() where [first, middle) was sorted a moment ago and has changed a little (a kept
// order whose keys moved): that part is sorted again first, by insertion while that stays
// nearly linear, else by std::sort.
template <typename It>
void sort_nearly_sorted(It first, It middle, It last) {
  if (!insertion_sort(first, middle, 4 * static_cast<size_t>(middle - first) + 64))
    std::sort(first, middle);
  merge_new(first, middle, last);
}

}  // namespace ddppo
