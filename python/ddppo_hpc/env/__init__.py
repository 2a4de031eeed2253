"""RL scheduling environments: a batched C++ vector env and a Gymnasium facade."""

from ddppo_hpc.env.single import SchedulingEnv
from ddppo_hpc.env.vector import EPISODE_METRICS, REWARDS, VecSchedulingEnv

__all__ = ["EPISODE_METRICS", "REWARDS", "SchedulingEnv", "VecSchedulingEnv"]
