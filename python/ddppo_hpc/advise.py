"""`python -m ddppo_hpc.advise`: a trained policy orders a live Slurm queue.

    python -m ddppo_hpc.advise --checkpoint runs/demo                 (print the order)
    python -m ddppo_hpc.advise --checkpoint runs/demo --apply --interval 60
    python -m ddppo_hpc.advise --checkpoint runs/demo --from-json tests/data/advise/busy.json

It reads the queue and the machine (`squeue --json`, `sinfo --json`, Slurm 22.05) and builds
the observation the policy trained on (docs/environment.md, "Observation"): the pending
jobs in submit order with their time limit as the requested time, their CPUs as the size,
their user, group and wait (now - submit); the running jobs' estimated ends (start + time
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
import json
import math
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import torch

from ddppo_hpc.args import bounded_float, run
from ddppo_hpc.config import ConfigError, TrainConfig
from ddppo_hpc.env.vector import CLUSTER_FEATURES, JOB_FEATURES
from ddppo_hpc.evaluate import load_checkpoint, run_config, trained_policy
from ddppo_hpc.policy import decide, initial_memory

PROG = "python -m ddppo_hpc.advise"
TIME_SCALE = 12 * 3600.0  # T of docs/environment.md (src/env.hpp kTimeScale)
LOG_DECADES = 6.0  # the log features' 10^6 s (src/env.hpp kLogDecades)
NO_LIMIT = (0xFFFFFFFE, 0xFFFFFFFF)  # Slurm's INFINITE and NO_VAL (uint32), as older releases print


class SnapshotError(ValueError):
    """A queue snapshot advise cannot read: the message names the file (or command) and
    the field."""


@dataclass(frozen=True)
class Pending:
    """A pending job as the policy sees it: times in seconds (Slurm's epoch seconds)."""

    job_id: int
    submit: float
    requested_time: float  # the time limit
    procs: int  # CPUs
    user: int
    group: int
    priority: int = 0
    user_name: str = ""


@dataclass(frozen=True)
class Running:
    job_id: int
    procs: int
    user: int
    estimated_end: float  # start + time limit; inf without a limit


@dataclass
class Queue:
    """What a decision sees: pending jobs in FCFS order (submit, job id), running jobs, the
    machine's CPUs and the idle ones; `left_alone`: (job id, why) of the pending jobs the
    policy cannot use."""

    now: float
    machine_procs: int
    free_procs: int
    pending: list[Pending]
    running: list[Running]
    left_alone: list[tuple[int, str]]

    def accounts(self) -> tuple[list[int], list[int]]:
        """The users and groups of the queue's jobs, sorted: the dense indices of features
        3 and 4 (a trace's users in training; a live queue's are the ones it shows)."""
        users = {j.user for j in self.pending} | {r.user for r in self.running}
        return sorted(users), sorted({j.group for j in self.pending})


def at_least_tenth(x: float) -> float:
    return 0.1 if x < 1 else x  # as src/policy.hpp: requests and submits below 1 are 0.1


def f1_score(job: Pending) -> float:
    """F1 (Carastan-Neto and de Camargo, 2017) as src/policy.hpp computes it."""
    r, s = at_least_tenth(job.requested_time), at_least_tenth(job.submit)
    return math.log10(r) * job.procs + 870 * math.log10(s)


def ranks(jobs: list[Pending], score) -> list[int]:
    """Each job's rank (0 first) under a heuristic's score, ties in queue order."""
    order = sorted(range(len(jobs)), key=lambda k: (score(jobs[k]), k))
    rank = [0] * len(jobs)
    for r, k in enumerate(order):
        rank[k] = r
    return rank


def observation(
    queue: Queue, max_queue: int, users: list, groups: list, wait: bool = False
) -> dict[str, np.ndarray]:
    """The environment's observation (batch of 1) of `queue`: src/env.cpp's observe(), same
    float64 arithmetic in the same order, rounded to float32 as there. `users`, `groups`:
    the sorted accounts whose dense index features 3 and 4 show. With `wait`, the wait slot
    (row K) is masked: advise orders jobs, it never holds them all back."""
    K, machine, now = max_queue, float(queue.machine_procs), queue.now
    jobs = np.zeros((1, K + wait, JOB_FEATURES), dtype=np.float32)
    mask = np.zeros((1, K + wait), dtype=bool)
    user_of = {u: i for i, u in enumerate(users)}
    group_of = {g: i for i, g in enumerate(groups)}
    running_procs, queued_work, remaining = defaultdict(int), defaultdict(float), 0.0
    for r in sorted(queue.running, key=lambda r: (r.estimated_end, r.job_id)):
        running_procs[r.user] += r.procs
        remaining += r.procs * max(r.estimated_end - now, 0.0)
    visible = queue.pending[:K]
    for j in visible:
        queued_work[j.user] += j.procs * j.requested_time
    log_machine = math.log2(machine)
    for k, j in enumerate(visible):
        wait_s = now - j.submit
        jobs[0, k, :12] = [
            min(wait_s / TIME_SCALE, 1.0),
            min(j.requested_time / TIME_SCALE, 1.0),
            j.procs / machine,
            (user_of[j.user] + 1.0) / (len(users) + 1.0),
            (group_of[j.group] + 1.0) / (len(groups) + 1.0),
            1.0 if j.procs <= queue.free_procs else 0.0,
            running_procs[j.user] / machine,
            min(queued_work[j.user] / (machine * TIME_SCALE), 1.0),
            1.0,
            min(math.log10(1.0 + j.requested_time) / LOG_DECADES, 1.0),
            min(math.log10(1.0 + wait_s) / LOG_DECADES, 1.0),
            math.log2(j.procs) / log_machine if log_machine > 0 else 0.0,
        ]
    jobs[0, : len(visible), 12] = np.float32(ranks(visible, f1_score)) / np.float32(K)
    mask[0, : len(visible)] = True
    cluster = np.array(
        [
            [
                queue.free_procs / machine,
                min(remaining / (machine * TIME_SCALE), 1.0),
                min(len(queue.pending) / K, 1.0),
            ]
        ],
        dtype=np.float32,
    )
    return {"jobs": jobs, "cluster": cluster, "action_mask": mask}


KINDS = {
    int: "an integer >= 0",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
}


def field(record: object, key: str, where: str, kind: type = int):
    """record[key], checked to be of `kind` (int: >= 0; float: any finite number);
    SnapshotError naming `where`.key otherwise."""
    if not isinstance(record, dict):
        raise SnapshotError(f"{where}: not an object")
    if key not in record:
        raise SnapshotError(f"{where}.{key}: missing")
    value = record[key]
    accepted = (int, float) if kind is float else kind
    fits = isinstance(value, accepted) and not isinstance(value, bool)
    if fits and kind is int:
        fits = value >= 0
    if fits and kind is float:
        fits = math.isfinite(value)
    if not fits:
        raise SnapshotError(f"{where}.{key}: {json.dumps(value)[:40]} is not {KINDS[kind]}")
    return value


def listed(record: object, key: str, where: str) -> list:
    return field(record, key, where, list)


def time_limit(job: dict, where: str) -> float | None:
    """A job's time limit in seconds; None without one (22.05 prints null for INFINITE)."""
    if job.get("time_limit", 0) is None:
        return None
    minutes = field(job, "time_limit", where)
    return None if minutes in NO_LIMIT else minutes * 60.0


def left_alone(job: dict, where: str, machine_procs: int) -> str | None:
    """Why the policy cannot use a pending job, or None when it can."""
    if time_limit(job, where) is None:
        return "no time limit"
    if field(job, "het_job_id", where):
        return "heterogeneous job"
    if field(job, "array_job_id", where) and field(job, "array_task_string", where, str):
        return "array not yet split"
    if field(job, "priority", where) == 0:
        return "held"
    if field(job, "cpus", where) > machine_procs:
        return "larger than the machine"
    return None


def cpus_of(sinfo: object, source: str) -> tuple[int, int]:
    """(CPUs, idle CPUs) of the nodes that are up and not draining."""
    nodes = listed(sinfo, "nodes", f"{source}: sinfo")
    machine = idle = 0
    for i, node in enumerate(nodes):
        where = f"{source}: sinfo.nodes[{i}]"
        down = field(node, "state", where, str) == "down"
        if not down and "DRAIN" not in field(node, "state_flags", where, list):
            machine += field(node, "cpus", where)
            idle += field(node, "idle_cpus", where)
    if machine == 0:
        raise SnapshotError(f"{source}: sinfo.nodes: no node up ({len(nodes)} listed)")
    return machine, idle


def pending_job(job: dict, where: str) -> Pending:
    return Pending(
        field(job, "job_id", where),
        float(field(job, "submit_time", where)),
        time_limit(job, where),
        field(job, "cpus", where),
        field(job, "user_id", where),
        field(job, "group_id", where),
        field(job, "priority", where),
        field(job, "user_name", where, str),
    )


def running_job(job: dict, where: str) -> Running:
    limit = time_limit(job, where)
    end = math.inf if limit is None else field(job, "start_time", where) + limit
    cpus, user = field(job, "cpus", where), field(job, "user_id", where)
    return Running(field(job, "job_id", where), cpus, user, end)


def queue_of(squeue: object, sinfo: object, now: float, source: str) -> Queue:
    """The Queue of `squeue --json` and `sinfo --json` (Slurm 22.05) at epoch second `now`;
    SnapshotError naming `source` and the field. Only pending and running jobs count
    (squeue lists finished ones for a while); a submit after `now` (clocks apart) moves
    `now` to it."""
    machine, idle = cpus_of(sinfo, source)
    pending, running, alone = [], [], []
    for i, job in enumerate(listed(squeue, "jobs", f"{source}: squeue")):
        where = f"{source}: squeue.jobs[{i}]"
        state = field(job, "job_state", where, str)
        if state == "RUNNING":
            running.append(running_job(job, where))
        elif state == "PENDING":
            why = left_alone(job, where, machine)
            if why:
                alone.append((field(job, "job_id", where), why))
            else:
                pending.append(pending_job(job, where))
    pending.sort(key=lambda j: (j.submit, j.job_id))
    now = max([float(now), *(j.submit for j in pending)])
    return Queue(now, machine, idle, pending, running, sorted(alone))


def read_snapshot(path: str) -> Queue:
    """The Queue of a snapshot file ({"now", "squeue", "sinfo"})."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise SnapshotError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    if not text.strip():
        raise SnapshotError(f'{path}: empty (a snapshot is {{"now", "squeue", "sinfo"}})')
    try:
        snapshot = json.loads(text)
    except json.JSONDecodeError as e:
        raise SnapshotError(f"{path}: not JSON: {e}") from None
    now = field(snapshot, "now", f"{path}: snapshot", float)
    squeue, sinfo = (field(snapshot, key, f"{path}: snapshot", dict) for key in ("squeue", "sinfo"))
    return queue_of(squeue, sinfo, now, path)


def slurm_json(command: str) -> dict:
    """The JSON a Slurm command prints with --json; SnapshotError naming it otherwise."""
    name = f"{command} --json"
    try:
        done = subprocess.run([command, "--json"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise SnapshotError(f"{command}: not found (is Slurm's client installed?)") from None
    except subprocess.TimeoutExpired:
        raise SnapshotError(f"{name}: no answer in 60 s") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        raise SnapshotError(f"{name}: {lines[-1]}")
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise SnapshotError(f"{name}: not JSON: {e}") from None


def live_queue() -> Queue:
    now = time.time()
    return queue_of(slurm_json("squeue"), slurm_json("sinfo"), now, "squeue/sinfo --json")


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
    probs = policy_scores(policy, observation(queue, env.max_queue, *queue.accounts(), env.wait))
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
        if job.priority == priority:
            continue
        command = ["scontrol", "update", f"JobId={job.job_id}", f"Priority={priority}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if done.returncode == 0:
            print(f"job {job.job_id}: priority {job.priority} -> {priority}", flush=True)
        else:
            why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            print(f"job {job.job_id}: priority unchanged ({why})", flush=True)


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
    except (ConfigError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    run(main)
