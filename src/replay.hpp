// Resuming an environment from a checkpoint: its episode is started again and the logged
// actions replayed (the HPC and GPU-cluster environments share this).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace ddppo {

// Puts `e` back in its episode number `episode` after `actions`: `start(e)` begins the
// episode, `act(e, a)` applies one action. The actions must leave the episode running.
template <typename Env, typename Start, typename Act>
void replay_episode(Env& e, uint64_t episode, const std::vector<int32_t>& actions, Start start,
                    Act act) {
  e.episode = episode;
  start(e);
  for (int32_t a : actions) {
    if (e.sim->done()) throw std::invalid_argument("more actions than the episode has decisions");
    act(e, a);
  }
  if (e.sim->done()) throw std::invalid_argument("the actions end the episode");
}

}  // namespace ddppo
