"""The policies side by side: parameters, greedy decisions/s at batch 64 on one CPU thread,
and, with a training budget, the RLScheduler-protocol mean bounded slowdown after training
each policy with the same budget.

    python bench/policies.py                          # parameters and decisions/s only
    python bench/policies.py --train-minutes 20       # + 20 minutes of training each
    python bench/policies.py --updates 300            # + 300 updates each

Training runs `mpirun -n 2 --oversubscribe python -m ddppo_hpc.train` on --config (default
configs/lublin256.yaml) with only the policy changed; a time budget stops each run with
SIGUSR1 (it checkpoints at the next update). Each trained policy is then evaluated greedily
on --trace with the RLScheduler protocol in its test part (consecutive windows of 1024 jobs
from the first job of the last 20%, which training never sees; the run's backfilling: EASY
in lublin256.yaml). Prints one table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

from ddppo_hpc.config import from_dict, load_config
from ddppo_hpc.data import read_swf
from ddppo_hpc.data.split import DEFAULT_SPLIT, part_range
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.evaluate import load_checkpoint, run_policy
from ddppo_hpc.policy import build_policy, decide, initial_memory
from ddppo_hpc.sim import POLICIES, protocol_windows, simulate

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {
    "mlp": ["policy.name=mlp"],
    "attention": ["policy.name=attention"],
    "gtrxl": ["policy.name=gtrxl", "policy.sect=true"],
    "gtrxl (no SECT)": ["policy.name=gtrxl", "policy.sect=false"],
}
BATCH = 64


def decisions_per_second(config_path: str, options: list[str], trace, repeat: int) -> tuple:
    """(parameters, greedy decisions/s at batch 64: the best of `repeat` timings of 20
    decisions on real observations of `trace`)."""
    config = load_config(config_path, options)
    torch.manual_seed(0)
    policy = build_policy(config.policy).eval()
    env = VecSchedulingEnv(trace, BATCH, config.env.window_jobs, config.env.max_queue, seed=0)
    obs, _ = env.reset()
    tensors = tuple(torch.from_numpy(obs[k]) for k in ("jobs", "cluster", "action_mask"))
    memory = initial_memory(policy, BATCH, "cpu")
    best = float("inf")
    with torch.no_grad():
        for _ in range(repeat):
            began = time.perf_counter()
            for _ in range(20):  # the memory fills as it would over an episode
                _, _, _, memory = decide(policy, tensors, memory, lambda d: d.probs.argmax(1))
            best = min(best, time.perf_counter() - began)
    return sum(p.numel() for p in policy.parameters()), 20 * BATCH / best


def train(config_path: str, options: list[str], run_dir: Path, minutes, updates) -> float:
    """Trains at 2 ranks; returns the minutes it took. A time budget counts from the launch,
    but the stop signal waits for the first update (the signal handler is set by then)."""
    budget = [f"ppo.updates={updates}"] if updates else ["ppo.updates=1000000"]
    cmd = ["mpirun", "-n", "2", "--oversubscribe", sys.executable, "-m", "ddppo_hpc.train",
           "--config", config_path, "--run-dir", str(run_dir), *options, *budget,
           "run.checkpoint_every=50"]  # fmt: skip
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    began = time.perf_counter()
    run = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines, training = [], threading.Event()

    def read():
        for line in run.stderr:
            lines.append(line)
            if line.startswith("update "):
                training.set()
        training.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if minutes:
        training.wait()
        try:
            run.wait(timeout=max(0.0, began + minutes * 60 - time.perf_counter()))
        except subprocess.TimeoutExpired:
            run.send_signal(signal.SIGUSR1)  # mpirun forwards it: checkpoint, then exit 0
    run.wait()
    reader.join()
    if run.returncode != 0:
        raise SystemExit(f"training {options} failed:\n{''.join(lines)[-2000:]}")
    return (time.perf_counter() - began) / 60


def test_windows(trace) -> list[tuple[int, int]]:
    """The RLScheduler protocol's windows in the trace's test part (the default split)."""
    first, stop = part_range(len(trace), DEFAULT_SPLIT, "test")
    return protocol_windows(stop, first)


def protocol_bsld(run_dir: Path, trace) -> tuple[float, int, str]:
    """(mean over the protocol's windows of the greedy policy's average bsld, the update it
    reached, its backfilling)."""
    checkpoint, _ = load_checkpoint(str(run_dir))
    config = from_dict(checkpoint["config"])
    policy = build_policy(config.policy)
    policy.load_state_dict(checkpoint["model"])
    spans = dict(enumerate(test_windows(trace)))
    runs = run_policy(policy, trace, spans, config.env, config.env.backfill)
    return (
        float(np.mean([m["avg_bsld"] for _, _, m in runs])),
        checkpoint["update"],
        config.env.backfill,
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(ROOT / "configs" / "lublin256.yaml"))
    p.add_argument("--trace", default=str(ROOT.parent / "shared/traces/lublin_256.swf.gz"))
    p.add_argument("--repeat", type=int, default=5, help="timings of decisions/s, best kept")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--train-minutes", type=float, help="wall-clock budget per policy")
    budget.add_argument("--updates", type=int, help="PPO updates per policy")
    args = p.parse_args()
    torch.set_num_threads(1)
    trace = read_swf(args.trace)
    trains = bool(args.train_minutes or args.updates)
    header = f"{'policy':<18}{'parameters':>12}{'decisions/s':>13}"
    if trains:
        header += f"{'updates':>9}{'minutes':>9}{'mean bsld':>11}"
    print(header)
    backfill = None
    for name, options in VARIANTS.items():
        params, speed = decisions_per_second(args.config, options, trace, args.repeat)
        line = f"{name:<18}{params:>12,}{speed:>13,.0f}"
        if trains:
            with tempfile.TemporaryDirectory() as run_dir:
                minutes = train(args.config, options, Path(run_dir), args.train_minutes,
                                args.updates)  # fmt: skip
                bsld, done, backfill = protocol_bsld(Path(run_dir), trace)
            line += f"{done:>9}{minutes:>9.1f}{bsld:>11.2f}"
        print(line, flush=True)
    if backfill:
        spans = test_windows(trace)
        means = {
            h: np.mean([simulate(trace, h, backfill, f, n).metrics["avg_bsld"] for f, n in spans])
            for h in POLICIES
        }
        print("heuristics, same windows: " + ", ".join(f"{h} {v:.2f}" for h, v in means.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
