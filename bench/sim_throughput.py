"""Simulator throughput: jobs/s of the C++ core for every policy x backfill on real traces,
beside the pure-Python reference (tests/reference_sim.py) on the same jobs, in one run; then
under heavy load, where the queue grows long.

    python bench/sim_throughput.py [--traces ../shared/traces] [--window 2000] [--repeat 3]
        [--scales 0.5,0.25] [--limit 60] [--store-jobs 11500000]
        [--tables native,heavy,store] [--policies fcfs,...] [--backfills none,easy,...]
        [--estimate request|predicted]

Prints tables and asserts nothing about time. "C++ jobs/s" is the best of --repeat runs
over the whole cleaned trace (parsing excluded), on one core, in the CPU time of the thread
that runs it (time.thread_time): other load on a shared machine does not count, nor do the
BLAS threads that spin for a moment after a numpy dot product (the store's load: in the
process's CPU time, the row after it read 183k jobs/s instead of 290k). The speed-up
compares both implementations on the same jobs: the whole trace for none and EASY; for
conservative, whose reference rebuilds the free-procs profile for every job, only the first
--window jobs.

Heavy load: LANL-CM5 with its submit times multiplied by each of --scales (x 0.5 doubles the
offered load; its FCFS queue reaches 40,000 jobs), the C++ core on the whole trace (best of
--repeat runs, as above), the reference on the first --window jobs, or "> limit" where it
takes over --limit seconds. Then a synthetic store of --store-jobs jobs (`data generate`,
1,024 procs; the time it took is printed) with its submit times scaled to offered load 1.2, so
that the queue keeps growing: the same rows (one whole run each: 5-80 s), conservative on the
first --store-conservative jobs only (300,000: its queue holds 12,000 jobs on average over
them under FCFS; over the whole store some orders would take hours). --tables, --policies
and --backfills select tables and rows (default: all). --estimate predicted: backfilling on
EASY++ runtime predictions instead of the users' requests, in both implementations.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from reference_sim import Job  # noqa: E402
from reference_sim import simulate as simulate_py  # noqa: E402
from simhelpers import jobs_of, traces_dir  # noqa: E402

from ddppo_hpc.args import names  # noqa: E402
from ddppo_hpc.data import Trace, convert, read_swf  # noqa: E402
from ddppo_hpc.data.store import TraceStore  # noqa: E402
from ddppo_hpc.sim import BACKFILLS, ESTIMATES, POLICIES, simulate  # noqa: E402

TRACES = ("lublin_256.swf.gz", "LANL-CM5-1994-4.1-cln.swf.gz")
HEAVY = "LANL-CM5-1994-4.1-cln.swf.gz"
STORE_LOAD = 1.2
TABLES = ("native", "heavy", "store")


class OverLimit(Exception):
    """The reference ran past --limit seconds."""


def best_of(repeat: int, fn, *args) -> float:
    times = []
    for _ in range(repeat):
        start = time.thread_time()
        fn(*args)
        times.append(time.thread_time() - start)
    return min(times)


def bench_row(trace: Trace, jobs: list[Job], policy: str, backfill: str, args) -> str:
    run = functools.partial(simulate, estimate=args.estimate)
    full = best_of(args.repeat, run, trace, policy, backfill)
    n = len(jobs)
    cpp = full if n == len(trace) else best_of(args.repeat, run, trace, policy, backfill, 0, n)
    run_reference = functools.partial(simulate_py, estimate=args.estimate)
    py = best_of(1, run_reference, jobs, trace.machine_procs, policy, backfill)
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
    """fn(*args)'s CPU time, None once it runs past `limit` seconds of wall time (it is then
    interrupted)."""

    def interrupt(signum, frame):
        raise OverLimit

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.thread_time()
    try:
        fn(*args)
        return time.thread_time() - start
    except OverLimit:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def heavy_row(
    trace: Trace, label: str, policy: str, backfill: str, args, whole: int, first: int = 0
) -> str:
    """The C++ core on the whole trace, or its `first` jobs (the best of `whole` runs), and on
    its first --window jobs, beside the reference on those."""
    run = functools.partial(simulate, estimate=args.estimate)
    jobs = min(first, len(trace)) if first else len(trace)
    full = jobs / best_of(whole, run, trace, policy, backfill, 0, jobs)
    n = min(args.window, len(trace))
    cpp = best_of(args.repeat, run, trace, policy, backfill, 0, n)
    run_reference = functools.partial(simulate_py, estimate=args.estimate)
    py = seconds_within(args.limit, run_reference, jobs_of(trace, 0, n), trace.machine_procs,
                        policy, backfill)  # fmt: skip
    reference = (
        f"{n / py:>12,.0f}{py / cpp:>9,.0f}x" if py else f"{'> ' + str(args.limit) + ' s':>12}"
    )
    return (
        f"{label:<12}{policy:<8}{backfill:<14}{f'{full:,.0f}':>14}"
        f"{n:>10,}{n / cpp:>14,.0f}{reference}"
    )


def store_trace(jobs: int, folder: Path) -> tuple[Trace, float]:
    """`data generate`'s store of `jobs` jobs on 1,024 procs, as a Trace with its submit times
    scaled to offered load STORE_LOAD, and the seconds the generation took."""
    start = time.perf_counter()
    convert.generate(folder / "store", jobs, machine_procs=1024, users=200, partitions=4)
    took = time.perf_counter() - start
    trace = TraceStore(folder / "store").trace()
    span = trace.submit[-1] - trace.submit[0]
    load = np.dot(trace.procs, trace.runtime) / (trace.machine_procs * span)
    return dataclasses.replace(trace, submit=trace.submit * (load / STORE_LOAD)), took


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", default=traces_dir(), help="folder of the shared traces")
    p.add_argument("--window", type=int, default=2000, help="jobs for conservative's ratio")
    p.add_argument("--repeat", type=int, default=3, help="C++ runs, best kept (default 3)")
    p.add_argument("--scales", type=scales, default="0.5,0.25", help="heavy-load submit scales")
    p.add_argument("--limit", type=float, default=60, help="seconds the reference may take")
    p.add_argument("--store-jobs", type=int, default=11_500_000, help="jobs of the store (0: none)")
    p.add_argument("--store-conservative", type=int, default=300_000,
                   help="the store's first jobs for conservative (300,000; 0: all)")  # fmt: skip
    p.add_argument("--tables", type=names(TABLES), default=list(TABLES), help="tables to print")
    p.add_argument("--policies", type=names(POLICIES), default=list(POLICIES), help="rows")
    p.add_argument("--backfills", type=names(BACKFILLS), default=list(BACKFILLS), help="rows")
    p.add_argument("--estimate", choices=ESTIMATES, default="request",
                   help="what backfilling takes as runtimes (default: request)")  # fmt: skip
    args = p.parse_args()
    rows = [(policy, backfill) for policy in args.policies for backfill in args.backfills]
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    header = (
        f"{'trace':<12}{'policy':<8}{'backfill':<14}{'C++ jobs/s':>14}"
        f"{'same jobs':>10}{'C++ jobs/s':>14}{'Py jobs/s':>12}{'speed-up':>10}"
    )
    if "native" in args.tables:
        print(header)
        for name in TRACES:
            trace = read_swf(Path(args.traces) / name)
            everything = jobs_of(trace)
            for policy, backfill in rows:
                jobs = everything[: args.window] if backfill == "conservative" else everything
                print(bench_row(trace, jobs, policy, backfill, args), flush=True)
    if "heavy" in args.tables:
        print(f"\nheavy load: {HEAVY}, submit times scaled\n{header}")
        native = read_swf(Path(args.traces) / HEAVY)
        for scale in args.scales:
            trace = dataclasses.replace(native, submit=native.submit * scale)
            for policy, backfill in rows:
                row = heavy_row(trace, f"LANL x{scale}", policy, backfill, args, args.repeat)
                print(row, flush=True)
    if "store" in args.tables and args.store_jobs > 0:
        with tempfile.TemporaryDirectory() as tmp:
            trace, took = store_trace(args.store_jobs, Path(tmp))
            print(
                f"\nstore: {len(trace):,} synthetic jobs (generated in {took:.0f} s), submit times"
                f" scaled to offered load {STORE_LOAD}; conservative on the first"
                f" {args.store_conservative:,} jobs\n{header}"
            )
            for policy, backfill in rows:
                first = args.store_conservative if backfill == "conservative" else 0
                print(heavy_row(trace, "store", policy, backfill, args, 1, first), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
