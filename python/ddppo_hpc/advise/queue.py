"""The queue as the policy sees it, and the environment's observation of it
(docs/environment.md, "Observation"; docs/advise.md)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ddppo_hpc.env.vector import JOB_FEATURES

TIME_SCALE = 12 * 3600.0  # T of docs/environment.md (src/env.hpp kTimeScale)
LOG_DECADES = 6.0  # the log features' 10^6 s (src/env.hpp kLogDecades)


@dataclass(frozen=True)
class Pending:
    """A pending job as the policy sees it: times in seconds (Slurm's epoch seconds)."""

    job_id: int
    submit: float
    requested_time: float  # the time limit
    procs: int  # CPUs
    user: int
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


def observation(queue: Queue, max_queue: int, wait: bool = False) -> dict[str, np.ndarray]:
    """The environment's observation (batch of 1) of `queue`: src/env.cpp's observe(), same
    float64 arithmetic in the same order, rounded to float32 as there. With `wait`, the wait slot
    (row K) is masked: advise orders jobs, it never holds them all back."""
    K, machine, now = max_queue, float(queue.machine_procs), queue.now
    jobs = np.zeros((1, K + wait, JOB_FEATURES), dtype=np.float32)
    mask = np.zeros((1, K + wait), dtype=bool)
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
        jobs[0, k, :10] = [
            min(wait_s / TIME_SCALE, 1.0),
            min(j.requested_time / TIME_SCALE, 1.0),
            j.procs / machine,
            1.0 if j.procs <= queue.free_procs else 0.0,
            running_procs[j.user] / machine,
            min(queued_work[j.user] / (machine * TIME_SCALE), 1.0),
            1.0,
            min(math.log10(1.0 + j.requested_time) / LOG_DECADES, 1.0),
            min(math.log10(1.0 + wait_s) / LOG_DECADES, 1.0),
            math.log2(j.procs) / log_machine if log_machine > 0 else 0.0,
        ]
    jobs[0, : len(visible), 10] = np.float32(ranks(visible, f1_score)) / np.float32(K)
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
