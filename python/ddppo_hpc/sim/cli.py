"""Command line of the simulator; see `python -m ddppo_hpc.sim --help`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from ddppo_hpc.args import SEED_MAX, bounded_int
from ddppo_hpc.data import Trace, TraceError, read_swf
from ddppo_hpc.data.store import TraceStore
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.io import atomic_write, check_output, not_an_input
from ddppo_hpc.sim import (
    BACKFILLS,
    ESTIMATES,
    POLICIES,
    PROTOCOL_JOBS,
    PROTOCOL_WINDOWS,
    RECORDED,
    RECORDED_NOTE,
    SUMMARY_KEYS,
    SimResult,
    job_records,
    recorded,
    rlscheduler_protocol,
    simulate,
)

EPILOG = """\
Without --trace the embedded synthetic workload (Lublin-Feitelson model) is used.
Times are seconds; bsld is the bounded slowdown max(1, (wait+runtime)/max(runtime,10)).
Exact semantics: docs/simulation.md. Exit codes: 0 ok, 2 bad input.

examples (from the repository root, with the shared traces beside it):
  python -m ddppo_hpc.sim --trace ../shared/traces/LANL-CM5-1994-4.1-cln.swf.gz \\
      --policy fcfs --backfill easy
  python -m ddppo_hpc.sim --trace ../shared/traces/lublin_256.swf.gz --policy all \\
      --backfill all --protocol rlscheduler
  python -m ddppo_hpc.sim --trace ../shared/traces/KTH-SP2-1996-2.1-cln.swf.gz --start 1000 \\
      --jobs 5000 --json --per-job jobs.csv
  python -m ddppo_hpc.sim --trace ../shared/traces/KTH-SP2-1996-2.1-cln.swf.gz --policy sjbf \\
      --backfill easy --estimate predicted   # EASY++ (Tsafrir, Etsion and Feitelson, 2007)
  python -m ddppo_hpc.sim --trace ../shared/traces/KTH-SP2-1996-2.1-cln.swf.gz \\
      --policy recorded --jobs 1024   # what KTH's own scheduler did (SWF field 3)

--policy recorded simulates nothing: each job starts at submit + its recorded wait (SWF
field 3), so --backfill and --estimate do not apply to it, and `all` does not include it.
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m ddppo_hpc.sim",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Simulate heuristic batch schedulers (pick-and-wait, with backfilling) "
        "on an SWF workload and print the schedule metrics.",
    )
    p.add_argument("--trace", metavar="FILE", help="SWF log (plain or .gz) or dataset directory")
    p.add_argument(
        "--synthetic-jobs",
        type=bounded_int(1),
        default=10_000,
        metavar="N",
        help="jobs of the embedded synthetic workload when no --trace (default 10000)",
    )
    p.add_argument(
        "--seed", type=bounded_int(0, SEED_MAX), default=0, help="seed of the synthetic workload"
    )
    p.add_argument(
        "--procs",
        type=bounded_int(1),
        metavar="N",
        help="machine size (default: header MaxProcs, MaxNodes, else largest job)",
    )
    p.add_argument(
        "--policy",
        default="fcfs",
        choices=(*POLICIES, "all", RECORDED),
        help="job ordering heuristic, all of them, or recorded: the schedule the site's "
        "scheduler produced, from SWF field 3 (default fcfs)",
    )
    p.add_argument(
        "--backfill",
        choices=(*BACKFILLS, "all"),
        help="backfilling while the picked job waits, or all (default easy)",
    )
    p.add_argument(
        "--estimate",
        choices=(*ESTIMATES, "all"),
        help="runtime backfilling assumes: the user's request, the EASY++ prediction (mean of "
        "the user's last two runtimes, capped by the request), or all (default request)",
    )
    p.add_argument(
        "--start",
        type=bounded_int(0),
        default=0,
        metavar="K",
        help="first job (0-based, cleaned trace order) of the window",
    )
    p.add_argument(
        "--jobs", type=bounded_int(1), metavar="N", help="jobs in the window (default: all)"
    )
    p.add_argument(
        "--protocol",
        choices=("rlscheduler",),
        help="10 consecutive windows of 1024 jobs from --start; mean of averages",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (a list for all)")
    p.add_argument("--per-job", metavar="OUT.csv", help="write each job's schedule as CSV")
    args = p.parse_args(argv)
    if args.policy == RECORDED and (args.backfill or args.estimate):
        p.error("--backfill and --estimate do not apply to --policy recorded (nothing is "
                "simulated: the site's scheduler chose the start times)")  # fmt: skip
    args.backfill, args.estimate = args.backfill or "easy", args.estimate or "request"
    if args.protocol and args.jobs is not None:
        p.error("--jobs and --protocol exclude each other")
    if args.per_job and (args.protocol or "all" in (args.policy, args.backfill, args.estimate)):
        p.error("--per-job needs a single window and a single policy, backfill and estimate")
    return args


def load(args: argparse.Namespace) -> Trace:
    if args.trace and Path(args.trace).is_dir():
        return load_dataset(args)
    if args.trace:
        return read_swf(args.trace, machine_procs=args.procs)
    return generate(args.synthetic_jobs, machine_procs=args.procs or 256, seed=args.seed)


def load_dataset(args: argparse.Namespace) -> Trace:
    """Only the jobs the run needs, read from a dataset directory; the window then starts
    at the first of them."""
    store = TraceStore(args.trace)
    if args.procs is not None:
        raise TraceError(f"--procs does not apply to a dataset ({args.trace} has its machine)")
    count = PROTOCOL_WINDOWS * PROTOCOL_JOBS if args.protocol else args.jobs
    trace = store.trace(args.start, count)
    args.start = 0
    return trace


def rows(trace: Trace, args: argparse.Namespace) -> list[dict]:
    """One row per scheduler asked for: each policy x backfill x estimate, or the recorded
    schedule (no backfill, no estimate, and a note on what it is)."""
    if args.policy == RECORDED:
        row = {"policy": RECORDED, "backfill": None, "estimate": None, "note": RECORDED_NOTE}
        return [run_one(trace, row, lambda first, jobs: recorded(trace, first, jobs), args)]
    policies = POLICIES if args.policy == "all" else (args.policy,)
    backfills = BACKFILLS if args.backfill == "all" else (args.backfill,)
    estimates = ESTIMATES if args.estimate == "all" else (args.estimate,)
    return [
        run_one(
            trace,
            {"policy": p, "backfill": b, "estimate": e},
            lambda first, jobs, p=p, b=b, e=e: simulate(trace, p, b, first, jobs, e),
            args,
        )
        for p in policies
        for b in backfills
        for e in estimates
    ]


def run_one(
    trace: Trace,
    row: dict,
    schedule: Callable[[int, int | None], SimResult],
    args: argparse.Namespace,
) -> dict:
    """`row` with the metrics of `schedule(first job, jobs)` on the window, or the summary
    of the protocol's windows."""
    row["dropped"] = trace.dropped
    if args.protocol:
        row.update(rlscheduler_protocol(schedule, len(trace), args.start))
        return row
    result = schedule(args.start, args.jobs)
    row.update({k: v for k, v in result.metrics.items() if not k.startswith("user")})
    if args.per_job:
        write_per_job(args.per_job, trace, result)
    return row


def write_per_job(path: str, trace: Trace, result) -> None:
    columns = job_records(trace, result.begin, result.start_time)
    with atomic_write(path) as f:
        f.write(",".join(columns) + "\n")
        for row in zip(*(c.tolist() for c in columns.values())):
            f.write(",".join(map(str, row)) + "\n")


def print_table(trace: Trace, rows: list[dict], protocol: bool) -> None:
    dropped = ", ".join(f"{k} {v}" for k, v in trace.dropped.items())
    print(
        f"trace {trace.source}: {len(trace)} jobs on {trace.machine_procs} procs "
        f"(dropped: {dropped})"
    )
    head = ["policy", "backfill", "estimate", "jobs", *SUMMARY_KEYS]
    print("  ".join(f"{h:>14}" for h in head))
    for row in rows:
        cells = [row["policy"], row["backfill"] or "-", row["estimate"] or "-", str(row["jobs"])]
        cells += [
            f"{row[k]:.4f}" if k in ("utilization", "jain_user_bsld") else f"{row[k]:.2f}"
            for k in SUMMARY_KEYS
        ]
        print("  ".join(f"{c:>14}" for c in cells))
    if protocol:
        print("RLScheduler protocol: 10 windows of 1024 jobs; averages are means over windows")
    for row in rows:
        if "note" in row:
            print(f"{row['policy']}: {row['note']}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.per_job:  # found before the simulation, not after it
            check_output(args.per_job)
            not_an_input(args.per_job, [args.trace] if args.trace else [])
        trace = load(args)
        results = rows(trace, args)
    except (TraceError, ValueError, OSError) as e:
        print(f"python -m ddppo_hpc.sim: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(results[0] if len(results) == 1 else results, sys.stdout)
        print()
    else:
        print_table(trace, results, bool(args.protocol))
    return 0
