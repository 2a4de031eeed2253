"""Trace store at supercomputer scale: generate 11.5M jobs into 64 partitions, then stream
them back with one reader and with 2 MPI ranks, and convert LANL-CM5 from SWF.

    python bench/data_scale.py [--jobs 11500000] [--partitions 64] [--dir /tmp/ddppo-scale]

Prints a table; asserts nothing. Each measurement runs in its own process so that its peak
RSS (ru_maxrss) is its own; the 2-rank read runs under mpirun.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_generate(args: argparse.Namespace) -> dict:
    from ddppo_hpc.data import convert

    start = time.perf_counter()
    convert.generate(
        Path(args.dir), args.jobs, args.procs, args.users, args.partitions, seed=0, force=True
    )
    seconds = time.perf_counter() - start
    size = sum(f.stat().st_size for f in Path(args.dir).iterdir())
    return {"seconds": seconds, "bytes": size, "rss_mb": peak_rss_mb()}


def worker_read(args: argparse.Namespace) -> dict:
    from ddppo_hpc.data.store import TraceStore

    rank, world = 0, 1
    if "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ:
        from mpi4py import MPI

        rank, world = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    store = TraceStore(args.dir)
    start = time.perf_counter()
    jobs = sum(len(chunk["id"]) for chunk in store.stream(store.partitions_for(rank, world)))
    seconds = time.perf_counter() - start
    return {"rank": rank, "jobs": jobs, "seconds": seconds, "rss_mb": peak_rss_mb()}


def worker_convert(args: argparse.Namespace) -> dict:
    from ddppo_hpc.data import convert

    out = Path(args.dir).with_name("lanl-bench")
    source = Path(args.traces) / "LANL-CM5-1994-4.1-cln.swf.gz"
    times = []
    for _ in range(3):
        start = time.perf_counter()
        manifest = convert.convert([source], out, partitions=4, force=True)
        times.append(time.perf_counter() - start)
    shutil.rmtree(out)
    return {
        "jobs": manifest["jobs"],
        "first": times[0],
        "best": min(times),
        "rss_mb": peak_rss_mb(),
    }


def run_worker(kind: str, args: argparse.Namespace, mpi: int = 0) -> list[dict]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        kind,
        "--dir",
        args.dir,
        "--jobs",
        str(args.jobs),
        "--partitions",
        str(args.partitions),
        "--procs",
        str(args.procs),
        "--users",
        str(args.users),
        "--traces",
        str(args.traces),
    ]
    if mpi:
        cmd = ["mpirun", "-n", str(mpi), "--oversubscribe", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=11_500_000)
    p.add_argument("--partitions", type=int, default=64)
    p.add_argument("--procs", type=int, default=16384, help="machine size of the generator")
    p.add_argument("--users", type=int, default=2000)
    p.add_argument("--dir", default="/tmp/ddppo-scale", help="where the dataset goes (removed)")
    default_traces = os.environ.get("DDPPO_TRACES", ROOT.parent / "shared" / "traces")
    p.add_argument("--traces", default=default_traces, help="folder of the shared traces")
    p.add_argument("--worker", choices=("generate", "read", "convert"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        work = {"generate": worker_generate, "read": worker_read, "convert": worker_convert}
        print(json.dumps(work[args.worker](args)), flush=True)
        return 0
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    print(f"{'step':<34}{'jobs':>12}{'seconds':>9}{'jobs/s':>13}{'peak RSS MB':>13}")
    (g,) = run_worker("generate", args)
    print(
        f"{'generate + write':<34}{args.jobs:>12,}{g['seconds']:>9.1f}"
        f"{args.jobs / g['seconds']:>13,.0f}{g['rss_mb']:>13.0f}"
    )
    print(f"{'  on disk':<34}{g['bytes'] / 1e6:>12,.0f} MB ({g['bytes'] / args.jobs:.1f} B/job)")
    (r,) = run_worker("read", args)
    print(
        f"{'stream back, 1 reader':<34}{r['jobs']:>12,}{r['seconds']:>9.1f}"
        f"{r['jobs'] / r['seconds']:>13,.0f}{r['rss_mb']:>13.0f}"
    )
    for r in sorted(run_worker("read", args, mpi=2), key=lambda r: r["rank"]):
        label = f"stream back, mpirun -n 2, rank {r['rank']}"
        print(
            f"{label:<34}{r['jobs']:>12,}{r['seconds']:>9.1f}"
            f"{r['jobs'] / r['seconds']:>13,.0f}{r['rss_mb']:>13.0f}"
        )
    shutil.rmtree(args.dir)
    (c,) = run_worker("convert", args)
    print(
        f"{'convert LANL-CM5 SWF (best of 3)':<34}{c['jobs']:>12,}{c['best']:>9.2f}"
        f"{c['jobs'] / c['best']:>13,.0f}{c['rss_mb']:>13.0f}"
    )
    print(f"{'  first run':<34}{'':>12}{c['first']:>9.2f}{c['jobs'] / c['first']:>13,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
