"""Per-update training metrics: a line on rank 0's console and a row in an HDF5 file."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import h5py
import numpy as np

from ddppo_hpc.rl.ppo import PPOStats


class MetricsLog:
    """Rows of `metrics.h5` in the run directory, one per update, appended and flushed as
    they come (a killed run keeps what it logged); resumed runs append to it."""

    def __init__(self, path: Path, updates: int):
        self.path, self.updates = path, updates
        self.start = self.last = time.perf_counter()

    def record(
        self,
        update: int,
        losses: dict,
        rollout_seconds: list[float],
        rollout_steps: list[int],
        steps: int,
        episode_bsld: list[float],
        num_envs: int,
    ) -> None:
        samples = sum(rollout_steps) * num_envs
        now = time.perf_counter()
        row = {
            "update": update,
            "update_seconds": now - self.last,  # wall time of the whole update
            "samples": samples,
            "steps_per_s": samples / max(rollout_seconds),
            "episode_bsld": float(np.mean(episode_bsld)) if episode_bsld else np.nan,
            "episodes": len(episode_bsld),
            "preempted_ranks": sum(s < steps for s in rollout_steps),
            **{name: losses[name] for name in PPOStats.__dataclass_fields__},
        }
        with h5py.File(self.path, "a") as f:
            for name, value in row.items():
                if name not in f:
                    f.create_dataset(name, shape=(0,), maxshape=(None,), dtype="f8")
                f[name].resize((len(f[name]) + 1,))
                f[name][-1] = value
            times = f.require_dataset(
                "rollout_seconds",
                shape=(0, len(rollout_seconds)),
                maxshape=(None, len(rollout_seconds)),
                dtype="f8",
            )
            times.resize((len(times) + 1, len(rollout_seconds)))
            times[-1] = rollout_seconds
        print(
            f"update {update}/{self.updates}  {row['steps_per_s']:8.0f} steps/s  "
            f"bsld {row['episode_bsld']:9.2f} ({row['episodes']} episodes)  "
            f"policy {losses['policy_loss']:+.4f} value {losses['value_loss']:.4f} "
            f"entropy {losses['entropy']:.3f} kl {losses['approx_kl']:.4f} "
            f"clip {losses['clip_fraction']:.3f}  preempted {row['preempted_ranks']}  "
            f"{time.perf_counter() - self.start:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        self.last = now
