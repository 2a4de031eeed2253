// SplitMix64 (Steele, Lea and Flood, OOPSLA 2014): a counter-based generator, so that the
// n-th draw (an episode's window, a random placement) can be found without the ones before.
#pragma once

#include <cstdint>

namespace ddppo {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace ddppo
