"""RL environment throughput: decisions/s of VecSchedulingEnv with random valid actions for
B in {1, 16, 64, 256}, on lublin_256 and on a synthetic trace store, beside the pure-Python
reference simulator (tests/reference_sim.py) making random picks on the same windows.

    python bench/env_throughput.py [--traces ../shared/traces] [--seconds 3]

Prints a table and asserts nothing. One core; episodes of 1024 jobs, K = 128 visible jobs,
EASY backfilling. The Python reference builds no observations, so the ratio understates
what the C++ environment saves.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from reference_sim import Job  # noqa: E402
from reference_sim import simulate as simulate_py  # noqa: E402
from simhelpers import jobs_of  # noqa: E402

from ddppo_hpc.data import convert, read_swf  # noqa: E402
from ddppo_hpc.data.store import TraceStore  # noqa: E402
from ddppo_hpc.data.trace import Trace  # noqa: E402
from ddppo_hpc.env import VecSchedulingEnv  # noqa: E402

WINDOW = 1024


def env_rate(trace: Trace, batch: int, seconds: float) -> float:
    env = VecSchedulingEnv(trace, batch, window_jobs=WINDOW, max_queue=128, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    decisions, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(max(1, 1024 // batch)):
            env.step(env.random_actions(rng))
        decisions += batch * max(1, 1024 // batch)
    return decisions / (time.perf_counter() - start)


def reference_rate(trace: Trace, seconds: float) -> float:
    """Random picks in the Python reference simulator, over windows like the env's."""
    rng = random.Random(0)
    decisions = 0

    def choose(ordered: list[Job]) -> Job:
        nonlocal decisions
        decisions += 1
        return ordered[rng.randrange(len(ordered))]

    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        first = rng.randrange(len(trace) - WINDOW + 1)
        jobs = jobs_of(trace, first, first + WINDOW)
        simulate_py(jobs, trace.machine_procs, "fcfs", "easy", choose=choose)
    return decisions / (time.perf_counter() - start)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_traces = os.environ.get("DDPPO_TRACES", ROOT.parent / "shared" / "traces")
    p.add_argument("--traces", default=default_traces, help="folder of the shared traces")
    p.add_argument("--seconds", type=float, default=3, help="time per measurement")
    args = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    with tempfile.TemporaryDirectory() as tmp:
        convert.generate(Path(tmp) / "ds", 200_000, machine_procs=1024, users=200, partitions=4)
        sources = {
            "lublin_256": read_swf(Path(args.traces) / "lublin_256.swf.gz"),
            "synthetic store": TraceStore(Path(tmp) / "ds").trace(),
        }
        print(f"{'trace':<18}{'B':>5}{'decisions/s':>14}{'Python ref':>13}{'ratio':>8}")
        for name, trace in sources.items():
            reference = reference_rate(trace, args.seconds)
            for batch in (1, 16, 64, 256):
                rate = env_rate(trace, batch, args.seconds)
                print(
                    f"{name:<18}{batch:>5}{rate:>14,.0f}{reference:>13,.0f}"
                    f"{rate / reference:>7,.0f}x",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
