"""`python -m ddppo_hpc.data`: build, inspect and validate HDF5 trace stores."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ddppo_hpc.args import SEED_MAX, bounded_int
from ddppo_hpc.data import convert
from ddppo_hpc.data.store import TraceStore, validate
from ddppo_hpc.data.trace import TraceError
from ddppo_hpc.progress import Progress

PROG = "python -m ddppo_hpc.data"
EPILOG = f"""\
examples:
  {PROG} convert LANL-CM5-1994-4.1-cln.swf.gz lanl/ --partitions 8
  {PROG} convert KTH-SP2-1996-2.1-cln.swf.gz KTH-part2.swf kth/      (one long history)
  {PROG} convert philly-2017-jobs.csv.gz philly/
  {PROG} convert alibaba-gpu-v2023-pods.csv.gz alibaba-gpu-v2023-gpu-nodes.csv.gz alibaba/
  {PROG} generate --jobs 11500000 --procs 4096 --users 2000 --partitions 64 big/
  {PROG} inspect lanl/
  {PROG} validate lanl/

Exit codes: 0 ok, 1 validate found problems, 2 bad input.
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Partitioned HDF5 job-trace datasets.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    c = sub.add_parser("convert", help="SWF logs (or a GPU trace) into a dataset directory")
    c.add_argument(
        "paths",
        nargs="+",
        metavar="IN... OUT_DIR",
        help="input files (SWF, plain or .gz; Philly CSV; Alibaba pods + nodes "
        "CSV), then the dataset directory to create",
    )
    c.add_argument("--procs", type=bounded_int(1), help="machine size (default: from the logs)")
    c.add_argument(
        "--skip-bad", action="store_true", help="skip and count malformed lines instead of stopping"
    )
    g = sub.add_parser("generate", help="the synthetic multi-user workload into a dataset")
    g.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    g.add_argument("--jobs", type=bounded_int(1), required=True)
    g.add_argument("--procs", type=bounded_int(1), default=256, help="machine size (default 256)")
    g.add_argument("--users", type=bounded_int(1), default=64, help="users (default 64)")
    g.add_argument("--seed", type=bounded_int(0, SEED_MAX), default=0)
    for command in (c, g):
        command.add_argument(
            "--partitions",
            type=bounded_int(1),
            default=1,
            help="partition files, contiguous in time (default 1)",
        )
        command.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists")
    i = sub.add_parser("inspect", help="summary table of a dataset")
    i.add_argument("dataset", type=Path, metavar="DIR")
    i.add_argument("--json", action="store_true", help="print the summary as JSON")
    v = sub.add_parser("validate", help="check checksums, schema and submit order")
    v.add_argument("dataset", type=Path, metavar="DIR")
    args = p.parse_args(argv)
    if args.command == "convert" and len(args.paths) < 2:
        p.error("convert needs at least one input and the output directory")
    return args


def summarize(store: TraceStore) -> dict:
    """Jobs, users, machine, time span, offered load, size and runtime distributions."""
    users: set[int] = set()
    work = 0.0
    sizes, runtimes = [], []
    progress = Progress(f"reading {store.path}", len(store), "jobs")
    for done, chunk in enumerate(store.stream(columns=("procs", "runtime", "user"))):
        users.update(np.unique(chunk["user"]).tolist())
        work += float(np.dot(chunk["procs"], chunk["runtime"]))
        sizes.append(np.bincount(np.log2(chunk["procs"]).astype(np.int64), minlength=32))
        runtimes.append(np.histogram(chunk["runtime"], bins=RUNTIME_BINS)[0])
        progress.update((done + 1) * len(chunk["procs"]))
    progress.done()
    first, last = store.manifest["time_span"]
    span = max(last - first, 1.0)
    size_counts = np.sum(sizes, axis=0)
    return {
        "dataset": str(store.path),
        "kind": store.manifest.get("kind"),
        "jobs": len(store),
        "users": len(users),
        "machine_procs": store.machine_procs,
        "partitions": len(store.partitions),
        "time_span_days": span / 86400,
        "offered_load": work / (store.machine_procs * span),
        "dropped": store.manifest.get("dropped", {}),
        "procs": {f"{2**k}-{2 ** (k + 1) - 1}": int(n) for k, n in enumerate(size_counts) if n},
        "runtime": {label: int(n) for label, n in zip(RUNTIME_LABELS, np.sum(runtimes, axis=0))},
    }


RUNTIME_BINS = [0, 60, 600, 3600, 4 * 3600, 24 * 3600, np.inf]
RUNTIME_LABELS = ["<1min", "1-10min", "10min-1h", "1-4h", "4-24h", ">=24h"]


def print_summary(s: dict) -> None:
    print(f"dataset         {s['dataset']} ({s['kind']}, {s['partitions']} partitions)")
    print(f"jobs            {s['jobs']:,}")
    print(f"users           {s['users']:,}")
    print(f"machine         {s['machine_procs']:,} procs")
    print(f"time span       {s['time_span_days']:.1f} days")
    print(f"offered load    {s['offered_load']:.3f}")
    print("dropped         " + ", ".join(f"{k} {v}" for k, v in s["dropped"].items()))
    for title, table in (("procs", s["procs"]), ("runtime", s["runtime"])):
        print(f"{title:<16}" + "  ".join(f"{k}: {v / s['jobs']:.1%}" for k, v in table.items()))


def run(args: argparse.Namespace) -> int:
    if args.command == "convert":
        *inputs, out_dir = map(Path, args.paths)
        start = time.monotonic()
        manifest = convert.convert(
            inputs,
            out_dir,
            partitions=args.partitions,
            machine_procs=args.procs,
            skip_bad=args.skip_bad,
            force=args.force,
        )
        report(manifest, out_dir, time.monotonic() - start)
    elif args.command == "generate":
        start = time.monotonic()
        manifest = convert.generate(
            args.out_dir, args.jobs, args.procs, args.users, args.partitions, args.seed, args.force
        )
        report(manifest, args.out_dir, time.monotonic() - start)
    elif args.command == "inspect":
        summary = summarize(TraceStore(args.dataset))
        if args.json:
            print(json.dumps(summary))
        else:
            print_summary(summary)
    else:
        problems = validate(args.dataset)
        for line in problems:
            print(f"{PROG} validate: {line}", file=sys.stderr)
        if problems:
            return 1
        print(f"{args.dataset}: ok")
    return 0


def report(manifest: dict, out_dir: Path, seconds: float) -> None:
    dropped = ", ".join(f"{k} {v}" for k, v in manifest["dropped"].items())
    print(
        f"wrote {manifest['jobs']:,} jobs in {len(manifest['partitions'])} partitions to "
        f"{out_dir} in {seconds:.1f} s (dropped: {dropped})"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except (TraceError, ValueError, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
