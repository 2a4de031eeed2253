"""`python -m ddppo_hpc.advise`: a trained policy orders a live Slurm queue.

    python -m ddppo_hpc.advise --checkpoint runs/demo                 (print the order)
    python -m ddppo_hpc.advise --checkpoint runs/demo --apply --interval 60
    python -m ddppo_hpc.advise --checkpoint runs/demo --from-json tests/data/advise/busy.json

It reads the queue and the machine (`squeue --json`, `sinfo --json`, Slurm 22.05) and builds
the observation the policy trained on (docs/environment.md, "Observation"): the pending
jobs in submit order with their time limit as the requested time, their CPUs as the size,
their user and wait (now - submit); the running jobs' estimated ends (start + time
limit); the idle CPUs. It prints the pending jobs in the order of the policy's scores at
this one decision (score: the policy's probability of picking the job now), each with its
F1 and SJF rank. The policy sees the first K (the run's env.max_queue) pending jobs, as in
training; the others follow them in submit order, unscored. With --apply (as the Slurm
operator) it runs `scontrol update JobId=N Priority=P`, the largest P for the first job
(the ordered jobs' own priorities, permuted), and logs every change in one line; it never
cancels, holds or releases a job. Left alone, and listed: jobs with no time limit,
heterogeneous jobs, arrays not yet split into tasks, held jobs (priority 0), jobs larger
than the machine. --interval S repeats every S seconds until SIGTERM or SIGINT (exit 0).
--from-json FILE replays a snapshot: {"now": the epoch second it was taken, "squeue": the
output of squeue --json, "sinfo": that of sinfo --json} (docs/advise.md).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import torch

from ddppo_hpc.advise.queue import Pending, Queue, at_least_tenth, f1_score, observation, ranks
from ddppo_hpc.advise.slurm import SnapshotError, live_queue, read_snapshot, set_priority
from ddppo_hpc.args import bounded_float
from ddppo_hpc.config import ConfigError, TrainConfig
from ddppo_hpc.env.vector import CLUSTER_FEATURES, JOB_FEATURES
from ddppo_hpc.evaluate import load_checkpoint, run_config, trained_policy
from ddppo_hpc.policy import decide, initial_memory

PROG = "python -m ddppo_hpc.advise"


@dataclass
class Advice:
    """The proposed order of a queue's pending jobs: `order` (indices into queue.pending,
    first to start first), the policy's score of each visible job, and F1's and SJF's
    ranks (0 first) over all of them."""

    queue: Queue
    order: list[int]
    scores: list[float | None]
    f1_rank: list[int]
    sjf_rank: list[int]


@torch.no_grad()
def policy_scores(policy: torch.nn.Module, obs: dict) -> np.ndarray:
    """The policy's probabilities of picking each slot at this decision (a recurrent
    policy with its initial memory: the live queue has no episode behind it)."""
    tensors = tuple(torch.from_numpy(obs[k]) for k in ("jobs", "cluster", "action_mask"))
    memory = initial_memory(policy, 1, "cpu")
    _, dist, _, _ = decide(policy, tensors, memory, lambda d: d.probs.argmax(dim=1))
    return dist.probs[0].numpy()


def advise(queue: Queue, policy: torch.nn.Module, env) -> Advice:
    """Visible jobs by the policy's score (ties in queue order: the first is its greedy
    pick), then the jobs past slot K in queue order."""
    visible = min(env.max_queue, len(queue.pending))
    obs = observation(queue, env.max_queue, env.wait)
    probs = policy_scores(policy, obs) if visible else []  # nothing to pick: no decision
    scored = sorted(range(visible), key=lambda k: (-probs[k], k))
    return Advice(
        queue,
        scored + list(range(visible, len(queue.pending))),
        [float(probs[k]) for k in range(visible)] + [None] * (len(queue.pending) - visible),
        ranks(queue.pending, f1_score),
        ranks(queue.pending, lambda j: at_least_tenth(j.requested_time)),
    )


def priorities(advice: Advice) -> list[tuple[Pending, int]]:
    """(job, priority) in the proposed order: the ordered jobs' own priorities, largest to
    the first, so that as a group they stand where they stood among the others (jobs left
    alone, other partitions). Equal ones are made distinct downwards; all stay >= 1 (0
    would hold a job)."""
    jobs = [advice.queue.pending[k] for k in advice.order]
    given: list[int] = []
    for value in sorted((j.priority for j in jobs), reverse=True):
        given.append(min(value, given[-1] - 1) if given else value)
    lift = max(0, 1 - given[-1]) if given else 0
    return [(job, p + lift) for job, p in zip(jobs, given)]


def print_advice(advice: Advice, source: str) -> None:
    q = advice.queue
    stamp = datetime.fromtimestamp(q.now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(
        f"{source} at {stamp}: {len(q.pending)} pending to order, {len(q.left_alone)} left"
        f" alone, {len(q.running)} running, {q.free_procs} of {q.machine_procs} CPUs idle"
    )
    print(f"{'order':>5} {'job':>10} {'user':<12}{'cpus':>6}{'limit_min':>10}{'wait_s':>9}"
          f"{'score':>9}{'f1_rank':>8}{'sjf_rank':>9}")  # fmt: skip
    for i, k in enumerate(advice.order):
        j, score = q.pending[k], advice.scores[k]
        shown = "-" if score is None else f"{score:.4f}"
        print(
            f"{i + 1:>5} {j.job_id:>10} {j.user_name or j.user:<12}{j.procs:>6}"
            f"{j.requested_time / 60:>10g}{q.now - j.submit:>9.0f}{shown:>9}"
            f"{advice.f1_rank[k] + 1:>8}{advice.sjf_rank[k] + 1:>9}"
        )
    if q.left_alone:
        print("left alone: " + ", ".join(f"{job} ({why})" for job, why in q.left_alone))


def apply(advice: Advice) -> None:
    """Sets the priorities, one logged line per change; a job that left the queue since
    the snapshot is logged and skipped."""
    for job, priority in priorities(advice):
        if job.priority != priority:
            failed = set_priority(job.job_id, priority)
            change = f"unchanged ({failed})" if failed else f"{job.priority} -> {priority}"
            print(f"job {job.job_id}: priority {change}", flush=True)


def usable_config(config: TrainConfig, file) -> None:
    """ValueError naming the checkpoint when its observation is one advise cannot build."""
    if config.gpu.mode != "off":
        raise ValueError(f"{file}: a GPU-mode run (gpu.mode {config.gpu.mode}); advise orders"
                         " an HPC queue")  # fmt: skip
    if config.env.history:
        raise ValueError(
            f"{file}: env.history: advise cannot build the history features yet (they need"
            " the users' finished jobs, which squeue does not keep)"
        )
    if config.env.heuristic_ranks:
        raise ValueError(
            f"{file}: env.heuristic_ranks: advise cannot build the SJBF rank yet (its EASY++"
            " predictions need the users' finished jobs, which squeue does not keep)"
        )
    if config.env.fit_times:
        raise ValueError(f"{file}: env.fit_times: advise cannot build the fit times yet")
    if config.env.agent_backfill:
        raise ValueError(
            f"{file}: env.agent_backfill: advise orders the queue and has no backfill decision"
            " to show the policy yet"
        )
    if config.env.order_actions:
        raise ValueError(f"{file}: env.order_actions: advise ranks jobs, not orders, yet")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__.split("`: ", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--checkpoint", required=True, help="a training run directory or its checkpoint.pt"
    )
    p.add_argument(
        "--apply",
        action="store_true",
        help="set the Slurm priorities (scontrol update, as the operator) to the proposed order",
    )
    p.add_argument(
        "--interval",
        type=bounded_float(1),
        metavar="S",
        help="repeat every S seconds until SIGTERM or SIGINT (default: once)",
    )
    p.add_argument("--from-json", metavar="FILE", help="a saved snapshot instead of the live queue")
    args = p.parse_args(argv)
    if args.from_json and (args.apply or args.interval):
        p.error("--apply and --interval act on the live queue, not on --from-json")
    return args


def advise_once(args: argparse.Namespace, policy: torch.nn.Module, env) -> None:
    """One pass: read the queue, print the order, apply it with --apply. With --interval a
    live queue that cannot be read is logged, and read again at the next pass."""
    try:
        queue = read_snapshot(args.from_json) if args.from_json else live_queue()
    except SnapshotError as e:
        if args.interval is None:
            raise
        print(f"{PROG}: {e} (again in {args.interval:g} s)", file=sys.stderr, flush=True)
        return
    advice = advise(queue, policy, env)
    print_advice(advice, args.from_json or "queue")
    if args.apply:
        apply(advice)
    sys.stdout.flush()


def every(interval: float, task) -> None:
    """Runs `task` every `interval` seconds until SIGTERM or SIGINT, which end the pass under
    way first (a priority change is never cut in half)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    task()
    while not stop.wait(interval):
        task()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)  # one small batch: OpenMP threads would only spin
    try:
        loaded = load_checkpoint(args.checkpoint)
        config = run_config(loaded)
        usable_config(config, loaded[1])
        policy = trained_policy(loaded, config, JOB_FEATURES, CLUSTER_FEATURES).eval()
        if args.interval is None:
            advise_once(args, policy, config.env)
        else:
            every(args.interval, lambda: advise_once(args, policy, config.env))
    except BrokenPipeError:
        raise
    except (ConfigError, OSError, ValueError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0
