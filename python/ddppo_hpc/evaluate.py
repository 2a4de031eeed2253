"""`python -m ddppo_hpc.evaluate`: a trained policy against the heuristics on the same
windows (the RLScheduler protocol: consecutive windows, mean of per-window averages).

    python -m ddppo_hpc.evaluate --run-dir runs/demo
    python -m ddppo_hpc.evaluate --run-dir runs/lublin256 --trace lublin_256.swf.gz

The policy acts greedily (its highest-scoring visible job). Without --trace, a trace the
run never trained on: the embedded workload with another seed, or the run's own trace.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from ddppo_hpc.config import ConfigError, TrainConfig, from_dict
from ddppo_hpc.data import read_swf
from ddppo_hpc.data.store import TraceStore
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.data.trace import Trace, TraceError
from ddppo_hpc.dist.control import CHECKPOINT
from ddppo_hpc.env import EPISODE_METRICS, VecSchedulingEnv
from ddppo_hpc.gpu import training as gpu_training
from ddppo_hpc.gpu.env import GLOBAL_FEATURES, SLOT_FEATURES
from ddppo_hpc.policy import build_policy, decide, initial_memory
from ddppo_hpc.sim import POLICIES, PROTOCOL_JOBS, PROTOCOL_WINDOWS, protocol_windows, simulate

HELD_OUT_SEED = (
    987_654  # the embedded workload's seed for evaluation; training uses seed + 1000 * rank
)


@torch.no_grad()
def evaluate_policy(
    policy: torch.nn.Module, trace: Trace, first: int, jobs: int, config: TrainConfig
) -> dict:
    """The metrics of one greedy episode on jobs first .. first+jobs-1."""
    options = config.env
    env = VecSchedulingEnv(
        trace, 1, jobs, options.max_queue, options.backfill, options.backfill_order
    )
    env.reset()
    obs = env.begin_at([first])
    memory = initial_memory(policy, 1, "cpu")
    while True:
        tensors = tuple(torch.from_numpy(obs[k]) for k in ("jobs", "cluster", "action_mask"))
        actions, _, _, memory = decide(policy, tensors, memory, lambda d: d.probs.argmax(dim=1))
        obs, _, terminated, _, info = env.step(actions.int().numpy())
        if terminated[0]:
            return {name: float(info[name][0]) for name in EPISODE_METRICS}


def evaluation_trace(config: TrainConfig, trace_path: str | None) -> Trace:
    path = trace_path or (None if config.data.trace == "synthetic" else config.data.trace)
    if path is None:
        jobs = max(config.data.synthetic_jobs, PROTOCOL_WINDOWS * PROTOCOL_JOBS)
        return generate(jobs, machine_procs=config.data.machine_procs, seed=HELD_OUT_SEED)
    if Path(path).is_dir():
        return TraceStore(path).trace()
    return read_swf(path)


def compare(run_dir: Path, trace_path: str | None, window_jobs: int, windows: int) -> list[dict]:
    """Rows of mean metrics over the windows: the policy, then every heuristic."""
    checkpoint = torch.load(run_dir / CHECKPOINT, weights_only=False)
    config = from_dict(checkpoint["config"])
    if config.gpu.mode != "off":
        if trace_path is not None:
            raise ConfigError(
                "--trace does not apply in GPU mode: the run's held-out jobs are used"
            )
        policy = build_policy(config.policy, SLOT_FEATURES, GLOBAL_FEATURES)
        policy.load_state_dict(checkpoint["model"])
        return gpu_training.compare(config, policy, windows)
    policy = build_policy(config.policy)
    policy.load_state_dict(checkpoint["model"])
    trace = evaluation_trace(config, trace_path)
    spans = protocol_windows(len(trace), 0, windows, window_jobs)
    backfill = config.env.backfill
    rows = {"policy": [evaluate_policy(policy, trace, f, n, config) for f, n in spans]}
    for heuristic in POLICIES:
        rows[heuristic] = [simulate(trace, heuristic, backfill, f, n).metrics for f, n in spans]
    return [
        {
            "scheduler": name,
            "backfill": backfill,
            "windows": len(spans),
            **{m: float(np.mean([r[m] for r in results])) for m in EPISODE_METRICS},
        }
        for name, results in rows.items()
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m ddppo_hpc.evaluate", description=__doc__.split("\n")[0]
    )
    p.add_argument("--run-dir", required=True, help="a training run directory (its checkpoint)")
    p.add_argument("--trace", help="SWF file or dataset directory (default: held out)")
    p.add_argument("--window", type=int, default=PROTOCOL_JOBS, help="jobs per window (1024)")
    p.add_argument("--windows", type=int, default=PROTOCOL_WINDOWS, help="windows (10)")
    args = p.parse_args(argv)
    try:
        rows = compare(Path(args.run_dir), args.trace, args.window, args.windows)
    except (ConfigError, TraceError, FileNotFoundError, ValueError) as e:
        print(f"python -m ddppo_hpc.evaluate: error: {e}", file=sys.stderr)
        return 2
    # HPC rows: scheduler, backfill, windows, metrics; GPU rows have no backfill
    print("".join(f"{k:>16}" for k in rows[0]))
    for row in rows:
        print("".join(f"{v:>16.3f}" if isinstance(v, float) else f"{v:>16}" for v in row.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
