"""PPO: rollout storage, GAE and the clipped loss. No communication here (dist/ adds it)."""

from ddppo_hpc.rl.ppo import (
    PPOStats,
    RolloutStorage,
    cost_loss,
    gae,
    imitation_loss,
    ppo_loss,
)

__all__ = ["PPOStats", "RolloutStorage", "cost_loss", "gae", "imitation_loss", "ppo_loss"]
