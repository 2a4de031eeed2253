"""Simulator throughput: jobs/s of the C++ core for every policy x backfill on real traces,
beside the pure-Python reference (tests/reference_sim.py) on the same jobs, in one run; then
under heavy load, where the queue grows long.

    python bench/sim_throughput.py [--traces ../shared/traces] [--window 2000] [--repeat 3]
        [--scales 0.5,0.25] [--limit 60]

Prints tables and asserts nothing about time. "C++ jobs/s" is the best of --repeat runs
over the whole cleaned trace (parsing excluded), on one core. The speed-up compares both
implementations on the same jobs: the whole trace for none and EASY; for conservative, whose
reference rebuilds the free-procs profile for every job, only the first --window jobs.

Heavy load: LANL-CM5 with its submit times multiplied by each of --scales (x 0.5 doubles the
offered load; its FCFS queue reaches 40,000 jobs), the C++ core on the whole trace (one run),
the reference on the first --window jobs, or "> limit" where it takes over --limit seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from reference_sim import Job  # noqa: E402
from reference_sim import simulate as simulate_py  # noqa: E402
from simhelpers import jobs_of  # noqa: E402

from ddppo_hpc.data import Trace, read_swf  # noqa: E402
from ddppo_hpc.sim import BACKFILLS, POLICIES, simulate  # noqa: E402

TRACES = ("lublin_256.swf.gz", "LANL-CM5-1994-4.1-cln.swf.gz")
HEAVY = "LANL-CM5-1994-4.1-cln.swf.gz"


class OverLimit(Exception):
    """The reference ran past --limit seconds."""


def best_of(repeat: int, fn, *args) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def bench_row(trace: Trace, jobs: list[Job], policy: str, backfill: str, repeat: int) -> str:
    full = best_of(repeat, simulate, trace, policy, backfill)
    n = len(jobs)
    cpp = full if n == len(trace) else best_of(repeat, simulate, trace, policy, backfill, 0, n)
    py = best_of(1, simulate_py, jobs, trace.machine_procs, policy, backfill)
    name = Path(trace.source).name.split("-")[0].split(".")[0]
    return (
        f"{name:<12}{policy:<8}{backfill:<14}{len(trace) / full:>14,.0f}"
        f"{n:>10,}{n / cpp:>14,.0f}{n / py:>12,.0f}{py / cpp:>9,.0f}x"
    )


def scales(text: str) -> list[float]:
    """An argparse type: comma-separated positive factors for the submit times."""
    try:
        factors = [float(x) for x in text.split(",")]
    except ValueError:
        factors = []
    if not factors or not all(0 < f < float("inf") for f in factors):
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of positive numbers")
    return factors


def seconds_within(limit: float, fn, *args) -> float | None:
    """fn(*args)'s wall time, None once it passes `limit` seconds (it is then interrupted)."""

    def interrupt(signum, frame):
        raise OverLimit

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.perf_counter()
    try:
        fn(*args)
        return time.perf_counter() - start
    except OverLimit:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def heavy_row(trace: Trace, scale: float, policy: str, backfill: str, args) -> str:
    full = best_of(1, simulate, trace, policy, backfill)
    n = min(args.window, len(trace))
    cpp = best_of(args.repeat, simulate, trace, policy, backfill, 0, n)
    py = seconds_within(args.limit, simulate_py, jobs_of(trace, 0, n), trace.machine_procs,
                        policy, backfill)  # fmt: skip
    reference = (
        f"{n / py:>12,.0f}{py / cpp:>9,.0f}x" if py else f"{'> ' + str(args.limit) + ' s':>12}"
    )
    return (
        f"{'LANL x' + str(scale):<12}{policy:<8}{backfill:<14}{len(trace) / full:>14,.0f}"
        f"{n:>10,}{n / cpp:>14,.0f}{reference}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_traces = os.environ.get("DDPPO_TRACES", ROOT.parent / "shared" / "traces")
    p.add_argument("--traces", default=default_traces, help="folder of the shared traces")
    p.add_argument("--window", type=int, default=2000, help="jobs for conservative's ratio")
    p.add_argument("--repeat", type=int, default=3, help="C++ runs, best kept (default 3)")
    p.add_argument("--scales", type=scales, default="0.5,0.25", help="heavy-load submit scales")
    p.add_argument("--limit", type=float, default=60, help="seconds the reference may take")
    args = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    header = (
        f"{'trace':<12}{'policy':<8}{'backfill':<14}{'C++ jobs/s':>14}"
        f"{'same jobs':>10}{'C++ jobs/s':>14}{'Py jobs/s':>12}{'speed-up':>10}"
    )
    print(header)
    for name in TRACES:
        trace = read_swf(Path(args.traces) / name)
        everything = jobs_of(trace)
        for policy in POLICIES:
            for backfill in BACKFILLS:
                jobs = everything[: args.window] if backfill == "conservative" else everything
                print(bench_row(trace, jobs, policy, backfill, args.repeat), flush=True)
    print(f"\nheavy load: {HEAVY}, submit times scaled\n{header}")
    native = read_swf(Path(args.traces) / HEAVY)
    for scale in args.scales:
        trace = dataclasses.replace(native, submit=native.submit * scale)
        for policy in POLICIES:
            for backfill in BACKFILLS:
                print(heavy_row(trace, scale, policy, backfill, args), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
