"""A single scheduling environment with the Gymnasium API, over the batched C++ one."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ddppo_hpc.data.trace import Trace
from ddppo_hpc.env.vector import EPISODE_METRICS, VecSchedulingEnv


class SchedulingEnv(gym.Env):
    """Pick the next job to schedule among the first `max_queue` waiting ones (with `wait`,
    action `max_queue` starts nothing until the next arrival or completion; with
    `agent_backfill`, the agent also chooses the jobs to backfill, and action `max_queue`
    stops a backfill scan).

    Reward is sparse (at the end of each episode; see docs/environment.md). An action on an
    empty slot picks slot 0, the oldest waiting job. Episodes restart on their own: after
    `terminated`, the observation already shows the next episode, and reset() starts yet
    another.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        trace: Trace,
        window_jobs: int = 1024,
        max_queue: int = 128,
        backfill: str = "easy",
        policy: str = "fcfs",
        reward: str = "bsld",
        seed: int = 0,
        wait: bool = False,
        history: bool = False,
        agent_backfill: bool = False,
    ):
        self._options = dict(
            trace=trace,
            num_envs=1,
            window_jobs=window_jobs,
            max_queue=max_queue,
            backfill=backfill,
            policy=policy,
            reward=reward,
            wait=wait,
            history=history,
            agent_backfill=agent_backfill,
        )
        self._vec = VecSchedulingEnv(**self._options, seed=seed)
        slots, features = self._vec.jobs.shape[1:]
        low = -1 if slots > max_queue else 0  # slot K's feature 6 is -1
        self.observation_space = spaces.Dict(
            {
                "jobs": spaces.Box(low, 1, (slots, features), np.float32),
                "cluster": spaces.Box(0, 1, (self._vec.cluster_features,), np.float32),
                "action_mask": spaces.MultiBinary(slots),
            }
        )
        self.action_space = spaces.Discrete(slots)

    def _observation(self) -> dict[str, np.ndarray]:
        obs = self._vec.observation()
        return {
            "jobs": obs["jobs"][0].copy(),
            "cluster": obs["cluster"][0].copy(),
            "action_mask": obs["action_mask"][0].astype(np.int8),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._vec = VecSchedulingEnv(**self._options, seed=seed)
        _, info = self._vec.reset()
        return self._observation(), {"episode_start": int(info["episode_start"][0])}

    def step(self, action):
        _, reward, terminated, _, info = self._vec.step(np.array([action], dtype=np.int32))
        done = bool(terminated[0])
        details = {"episode_start": int(info["episode_start"][0])}
        if done:
            details.update({name: float(info[name][0]) for name in EPISODE_METRICS})
        return self._observation(), float(reward[0]), done, False, details

    def heuristic_action(self) -> int:
        return int(self._vec.heuristic_actions()[0])
