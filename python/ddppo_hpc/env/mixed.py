"""Environments on several traces and loads in one batch (`data.trace` as a list,
`data.load_scale`): one VecSchedulingEnv per (source, load factor), their rows side by side,
so that the trainer sees one batch as from a single VecSchedulingEnv."""

from __future__ import annotations

import numpy as np

from ddppo_hpc.data.trace import Trace
from ddppo_hpc.env.vector import EPISODE_METRICS, VecSchedulingEnv


def shares(weights: list[float], total: int) -> list[int]:
    """`total` environments shared out in proportion to `weights` (largest remainders, ties
    to the earlier entry), then at least one each, taken from the largest share; ValueError
    when there are more weights than environments."""
    if len(weights) > total:
        raise ValueError(f"{len(weights)} sources need as many environments, not {total}")
    exact = [total * w / sum(weights) for w in weights]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda k: (int(exact[k]) - exact[k], k))
    for k in by_remainder[: total - sum(counts)]:
        counts[k] += 1
    for k in [k for k, n in enumerate(counts) if n == 0]:
        counts[counts.index(max(counts))] -= 1
        counts[k] = 1
    return counts


def dealt(count: int, factors: list[float]) -> list[tuple[float, int]]:
    """(factor, environments) of `count` environments dealt round-robin among `factors`
    (those that get none left out)."""
    dealt = [(f, count // len(factors) + (k < count % len(factors))) for k, f in enumerate(factors)]
    return [(f, n) for f, n in dealt if n]


class MixedVecEnv:
    """The batch of `groups`, each a VecSchedulingEnv with its own trace (and machine), in
    order: environment i of the batch is row i of the concatenated observation. The same
    observation widths, K and episode length everywhere; state() and load_state() have the
    format of a single VecSchedulingEnv's."""

    METRICS = EPISODE_METRICS
    SCORE = VecSchedulingEnv.SCORE

    def __init__(self, groups: list[VecSchedulingEnv]):
        first = groups[0]
        self.groups = groups
        self.bounds = np.cumsum([0] + [g.num_envs for g in groups])
        self.num_envs = int(self.bounds[-1])
        self.max_queue, self.window_jobs = first.max_queue, first.window_jobs
        self.job_features, self.cluster_features = first.job_features, first.cluster_features
        self.teacher_slots = first.teacher_slots
        self.jobs = np.concatenate([g.jobs for g in groups])
        self.cluster = np.concatenate([g.cluster for g in groups])
        self.mask = np.concatenate([g.mask for g in groups])

    def _gather(self) -> dict[str, np.ndarray]:
        for k, g in enumerate(self.groups):
            rows = slice(self.bounds[k], self.bounds[k + 1])
            self.jobs[rows], self.cluster[rows], self.mask[rows] = g.jobs, g.cluster, g.mask
        return {"jobs": self.jobs, "cluster": self.cluster, "action_mask": self.mask.view(bool)}

    def _group(self, i: int) -> tuple[VecSchedulingEnv, int]:
        """Environment i's group and its row there."""
        k = int(np.searchsorted(self.bounds, i, side="right")) - 1
        return self.groups[k], i - int(self.bounds[k])

    def window_trace(self, i: int) -> Trace:
        """The trace that environment i's windows come from."""
        return self._group(i)[0].trace

    def last_best(self, i: int) -> tuple[str, float]:
        """VecSchedulingEnv.last_best of environment i."""
        group, row = self._group(i)
        return group.last_best(row)

    def last_baseline_bsld(self, i: int) -> float:
        """VecSchedulingEnv.last_baseline_bsld of environment i."""
        group, row = self._group(i)
        return group.last_baseline_bsld(row)

    def reset(self) -> tuple[dict[str, np.ndarray], dict]:
        starts = [g.reset()[1]["episode_start"] for g in self.groups]
        return self._gather(), {"episode_start": np.concatenate(starts)}

    def step(self, actions: np.ndarray) -> tuple:
        """(observation, reward, terminated, truncated, info), batched."""
        steps = [
            g.step(actions[self.bounds[k] : self.bounds[k + 1]]) for k, g in enumerate(self.groups)
        ]
        reward, terminated, truncated = (np.concatenate([s[j] for s in steps]) for j in (1, 2, 3))
        info = {key: np.concatenate([s[4][key] for s in steps]) for key in steps[0][4]}
        return self._gather(), reward, terminated, truncated, info

    def heuristic_actions(self) -> np.ndarray:
        return np.concatenate([g.heuristic_actions() for g in self.groups])

    def rule_costs(self, arrivals: bool = True, runtimes: bool = True) -> np.ndarray:
        return np.concatenate([g.rule_costs(arrivals, runtimes) for g in self.groups])

    def state(self) -> dict:
        states = [g.state() for g in self.groups]
        return {key: [x for s in states for x in s[key]] for key in ("episodes", "actions")}

    def load_state(self, state: dict) -> dict[str, np.ndarray]:
        for k, g in enumerate(self.groups):
            rows = slice(self.bounds[k], self.bounds[k + 1])
            g.load_state({key: state[key][rows] for key in ("episodes", "actions")})
        return self._gather()
