"""Command line of the GPU-cluster simulator; see `python -m ddppo_hpc.gpu --help`."""

from __future__ import annotations

import argparse
import json
import sys

from ddppo_hpc.args import SEED_MAX, bounded_float, bounded_int
from ddppo_hpc.data.dljobs import generate_dl_jobs
from ddppo_hpc.data.trace import TraceError
from ddppo_hpc.gpu import METRICS, ORDERS, PLACEMENTS, GpuResult, simulate_gpu
from ddppo_hpc.gpu.topology import Cluster, uniform
from ddppo_hpc.gpu.workload import GpuWorkload, from_trace, load, node_machines
from ddppo_hpc.io import atomic_write, check_output, not_an_input

MAX_GPUS = 2**20  # racks x machines x GPUs: a million GPUs, beyond any cluster built
MAX_SYNTHETIC_JOBS = 10_000_000  # their columns take about 1.3 GB
LINK_COST = bounded_float(0, 1000)
LOAD_SCALE = bounded_float(1e-6, 1e6)

EPILOG = """\
Without --trace, seeded synthetic DL jobs (ddppo_hpc.data.dljobs) are used.
Times are seconds; JCT = end - submit. Exact semantics: docs/gpu.md.
Exit codes: 0 ok, 2 bad input.

examples:
  python -m ddppo_hpc.gpu --trace philly-2017-jobs.csv.gz --start 70000 --jobs 1024 \\
      --order all --placement all --wait both
  python -m ddppo_hpc.gpu --trace alibaba/ --nodes-topology --order srtf --placement best_fit
  python -m ddppo_hpc.gpu --trace alibaba/ --nodes-topology --nodes-every 100 \\
      --load-scale 0.01 --start 4923 --jobs 256 --order srtf --placement all --wait both
  python -m ddppo_hpc.gpu --racks 2 --machines-per-rack 4 --gpus-per-machine 8 \\
      --models V100M32,P100 --speed-noise 0.2 --json --per-job jobs.csv
"""


def link_costs(text: str) -> tuple[float, ...]:
    """An argparse type: the machine,rack,cross-rack link costs, three numbers in 0..1000."""
    costs = text.split(",")
    if len(costs) != 3:
        raise argparse.ArgumentTypeError(f"three numbers machine,rack,cross, not {text!r}")
    return tuple(LINK_COST(cost) for cost in costs)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m ddppo_hpc.gpu",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Simulate heuristic GPU-cluster schedulers (an ordering and a placement) "
        "on a GPU trace and print JCT, makespan, communication cost and utilization.",
    )
    p.add_argument(
        "--trace",
        nargs="+",
        metavar="FILE",
        help="dataset directory, Philly job CSV, or Alibaba pod CSV and node CSV",
    )
    count = bounded_int(1)
    p.add_argument("--synthetic-jobs", type=bounded_int(1, MAX_SYNTHETIC_JOBS), default=2000)
    p.add_argument(
        "--load", type=bounded_float(0.01, 100), default=0.9, help="synthetic offered load (0.9)"
    )
    p.add_argument("--racks", type=count, default=2)
    p.add_argument("--machines-per-rack", type=count, default=4)
    p.add_argument("--gpus-per-machine", type=count, default=8)
    p.add_argument("--models", default="V100M32,V100M16,P100,T4", help="cycled over machines")
    p.add_argument(
        "--nodes-topology", action="store_true", help="the trace's own node list (Alibaba)"
    )
    p.add_argument(
        "--nodes-every",
        type=count,
        default=1,
        metavar="K",
        help="with --nodes-topology: one in K nodes of each GPU model and count (1: all)",
    )
    p.add_argument(
        "--load-scale",
        type=LOAD_SCALE,
        default=1.0,
        metavar="F",
        help="submit times x F (below 1: the jobs arrive faster, a higher load; 1)",
    )
    p.add_argument(
        "--link-costs", type=link_costs, default="1,4,16", help="machine,rack,cross-rack (1,4,16)"
    )
    p.add_argument("--comm-penalty", type=bounded_float(0, 100), default=0.05)
    p.add_argument(
        "--speed-noise", type=bounded_float(0, 10), default=0.0, help="log-normal sigma (0)"
    )
    seed = bounded_int(0, SEED_MAX)
    p.add_argument("--speed-seed", type=seed, default=0)
    p.add_argument("--order", default="fifo", choices=(*ORDERS, "all"))
    p.add_argument("--placement", default="first_fit", choices=(*PLACEMENTS, "all"))
    p.add_argument(
        "--wait",
        default="no",
        choices=("no", "yes", "both"),
        help="yes: the wait rule orders (the first waiting job in the order that fits now, "
        "else wait for the next arrival or completion); both: each pair both ways (no)",
    )
    p.add_argument("--seed", type=seed, default=0, help="random placement and synthetic jobs")
    p.add_argument(
        "--start", type=bounded_int(0), default=0, metavar="K", help="first job (0-based)"
    )
    p.add_argument("--jobs", type=count, metavar="N", help="jobs in the window (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON (a list for several)")
    p.add_argument("--per-job", metavar="OUT.csv", help="each job's schedule as CSV")
    args = p.parse_args(argv)
    if args.per_job and ("all" in (args.order, args.placement) or args.wait == "both"):
        p.error("--per-job needs a single order, placement and wait")
    return args


def cluster_of(args: argparse.Namespace, workload: GpuWorkload | None) -> Cluster:
    if args.nodes_topology:
        machines = node_machines(workload, args.machines_per_rack, args.nodes_every)
    else:
        if args.nodes_every != 1:
            raise ValueError(
                "--nodes-every samples the trace's node list: it needs --nodes-topology"
            )
        gpus = args.racks * args.machines_per_rack * args.gpus_per_machine
        if gpus > MAX_GPUS:
            raise ValueError(
                f"--racks x --machines-per-rack x --gpus-per-machine: {gpus} GPUs, more than "
                f"the {MAX_GPUS} this command simulates"
            )
        models = tuple(m for m in args.models.split(",") if m)
        machines = uniform(args.racks, args.machines_per_rack, args.gpus_per_machine, models)
    return Cluster(machines, args.link_costs, args.comm_penalty, args.speed_noise, args.speed_seed)


def load_workload(args: argparse.Namespace) -> tuple[GpuWorkload, Cluster]:
    if args.trace:
        workload = load(args.trace)
        cluster = cluster_of(args, workload)
    else:
        if args.nodes_topology:
            raise ValueError("--nodes-topology needs a trace with a node list")
        cluster = cluster_of(args, None)
        trace = generate_dl_jobs(args.synthetic_jobs, cluster.total_gpus, args.load, seed=args.seed)
        workload = from_trace(trace, "synthetic DL jobs")
    return workload.at_load(args.load_scale).fitted(cluster.machines), cluster


def write_per_job(path: str, workload: GpuWorkload, r: GpuResult) -> None:
    window = slice(r.begin, r.end)
    with atomic_write(path) as f:
        f.write("id,submit,start,end,jct,runtime,gpus,comm_cost,placement\n")
        for k, (job, submit, start, end) in enumerate(
            zip(workload.id[window], workload.submit[window], r.start_time, r.end_time)
        ):
            gpus = " ".join(map(str, r.gpus[k].tolist()))
            runtime, g = workload.runtime[r.begin + k], workload.gpus[r.begin + k]
            cells = (job, submit, start, end, end - submit, runtime, g, r.comm_cost[k], gpus)
            f.write(",".join(map(str, cells)) + "\n")


def print_table(workload: GpuWorkload, cluster: Cluster, rows: list[dict]) -> None:
    dropped = ", ".join(f"{k} {v}" for k, v in workload.dropped.items())
    load, within, scale = (rows[0][k] for k in ("offered_load", "arrival_load", "load_scale"))
    print(
        f"trace {workload.source}: {len(workload)} jobs on {cluster.total_gpus} GPUs in "
        f"{len(cluster.machines)} machines (dropped: {dropped}); offered load of the chosen "
        + (
            "jobs n/a (one arrival time)"
            if load is None
            else f"jobs {load:.2f}, {within:.2f} within their arrivals"
        )
        + ("" if scale == 1 else f" (submit times x {scale:g})")
    )
    head = ["order", "placement", "wait", "jobs", *METRICS]
    print("  ".join(f"{h:>15}" for h in head))
    for row in rows:
        cells = [row["order"], row["placement"], "yes" if row["wait"] else "no", str(row["jobs"])]
        cells += [f"{row[k]:.4f}" if k == "gpu_utilization" else f"{row[k]:.2f}" for k in METRICS]
        print("  ".join(f"{c:>15}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    orders = ORDERS if args.order == "all" else (args.order,)
    placements = PLACEMENTS if args.placement == "all" else (args.placement,)
    waits = {"no": (False,), "yes": (True,), "both": (False, True)}[args.wait]
    try:
        if args.per_job:  # found before the simulation, not after it
            check_output(args.per_job)
            not_an_input(args.per_job, args.trace or [])
        workload, cluster = load_workload(args)
        rows = []
        for order in orders:
            for placement in placements:
                for wait in waits:
                    r = simulate_gpu(
                        workload, cluster, order, placement, args.seed, args.start, args.jobs, wait
                    )
                    rows.append({"order": order, "placement": placement, "wait": wait, **r.metrics})
        load = workload.offered_load(r.begin, r.end, cluster.total_gpus)
        within = workload.arrival_load(r.begin, r.end, cluster.total_gpus)
        for row in rows:
            row.update(offered_load=load, arrival_load=within, load_scale=args.load_scale)
            row.update(dropped=workload.dropped)
        if args.per_job:
            write_per_job(args.per_job, workload, r)
    except (TraceError, ValueError, OSError) as e:
        print(f"python -m ddppo_hpc.gpu: error: {e}", file=sys.stderr)
        return 2
    if within is not None and within > 1:
        print(
            f"python -m ddppo_hpc.gpu: warning: the chosen jobs ask {within:.2f} times what "
            f"{cluster.total_gpus} GPUs can serve while they arrive (offered load {load:.2f}): "
            "some must wait and the queue grows while they arrive (choose a bigger cluster, "
            "fewer jobs or a larger --load-scale)",
            file=sys.stderr,
        )
    if args.json:
        json.dump(rows[0] if len(rows) == 1 else rows, sys.stdout)
        print()
    else:
        print_table(workload, cluster, rows)
    return 0
