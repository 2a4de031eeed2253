"""Per-update training metrics: a line on rank 0's console and a row in an HDF5 file."""

from __future__ import annotations

import time
from pathlib import Path

import h5py
import numpy as np

from ddppo_hpc.io import atomic_hdf5, reason
from ddppo_hpc.log import logger
from ddppo_hpc.rl.ppo import PPOStats


def baseline_bslds(env, terminated: np.ndarray, config) -> list[float]:
    """For each episode that `terminated` ends, the avg bsld of the run's env.reward_baseline
    on the same window (env.backfill with env.estimate): the heuristic the environment
    compares the policy with, on the same jobs, as the environment ran it at the window's
    start. NaN without a baseline (and in GPU mode, whose score is JCT)."""
    e = config.env
    if config.gpu.mode != "off" or e.reward_baseline == "none":
        return [np.nan] * int(terminated.sum())
    return [env.last_baseline_bsld(i) for i in np.flatnonzero(terminated)]


def score_name(config) -> str:
    """The per-episode score that training logs: avg bsld on the HPC queue, avg JCT in GPU
    mode (columns episode_<name> and baseline_<name>)."""
    return "bsld" if config.gpu.mode == "off" else "jct"


class MetricsLog:
    """Rows of `metrics.h5` in the run directory, one per update. Every row rewrites the
    (small) file through a temp file and a rename: a killed run keeps what it logged, and a
    write that fails (a full disk) leaves the previous file whole. A run resumed from the
    checkpoint of update `resumed` keeps the rows up to that update and logs the rest anew
    (a run killed between checkpoints logged some of them already). `score`: score_name()."""

    def __init__(self, path: Path, updates: int, resumed: int | None = None, score: str = "bsld"):
        self.path, self.updates, self.score = path, updates, score
        self.columns = {} if resumed is None or not path.exists() else read(path, resumed)
        self.start = self.last = time.perf_counter()

    def record(
        self,
        update: int,
        losses: dict,
        rollout_seconds: list[float],
        rollout_steps: list[int],
        steps: int,
        episode_scores: list[tuple[float, float]],
        num_envs: int,
    ) -> None:
        """One row; `episode_scores` holds each ended episode's (policy's score, the reward
        baseline's on the same window, NaN without one)."""
        policy, baseline = np.array(episode_scores, dtype="f8").reshape(-1, 2).T
        score = self.score
        samples = sum(rollout_steps) * num_envs
        now = time.perf_counter()
        row = {
            "update": update,
            "update_seconds": now - self.last,  # wall time of the whole update
            "samples": samples,
            "steps_per_s": samples / max(rollout_seconds),
            f"episode_{score}": float(np.mean(policy)) if len(policy) else np.nan,
            f"baseline_{score}": float(np.mean(baseline)) if len(baseline) else np.nan,
            "episodes": len(policy),
            "preempted_ranks": sum(s < steps for s in rollout_steps),
            **{name: losses[name] for name in PPOStats.__dataclass_fields__},
            "rollout_seconds": rollout_seconds,  # one column per rank
        }
        logged = len(self.columns.get("update", []))
        for name, value in row.items():  # a column new to a resumed file: NaN before
            column = self.columns.setdefault(name, [np.full(np.shape(value), np.nan)] * logged)
            column.append(value)
        self.write()
        logger.info(
            f"update {update}/{self.updates}  {row['steps_per_s']:8.0f} steps/s  "
            f"{score} {row[f'episode_{score}']:9.2f} (baseline {row[f'baseline_{score}']:.2f}, "
            f"{row['episodes']} episodes)  "
            f"policy {losses['policy_loss']:+.4f} value {losses['value_loss']:.4f} "
            f"entropy {losses['entropy']:.3f} kl {losses['approx_kl']:.4f} "
            f"clip {losses['clip_fraction']:.3f}  preempted {row['preempted_ranks']}  "
            f"{time.perf_counter() - self.start:.0f} s"
        )
        self.last = now

    def write(self) -> None:
        with atomic_hdf5(self.path) as f:
            for name, values in self.columns.items():
                f.create_dataset(name, data=np.asarray(values, dtype="f8"))


def read(path: Path, last_update: int) -> dict[str, list]:
    """The columns of a metrics file, rows up to `last_update`."""
    try:
        with h5py.File(path, "r") as f:
            columns = {name: f[name][...] for name in f}
        keep = columns["update"] <= last_update
    except (OSError, KeyError) as e:
        raise ValueError(
            f"{path}: unreadable metrics file ({reason(e)}); move it away to "
            "resume without its rows"
        ) from None
    return {name: list(values[keep]) for name, values in columns.items()}
