"""Python facade over the C++ simulator: heuristics, windows and the RLScheduler protocol."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ddppo_hpc import _core
from ddppo_hpc.data.trace import Trace, TraceError

# sjbf orders by the EASY++ runtime prediction; with backfill "easy" and estimate "predicted"
# it is EASY++ (Tsafrir, Etsion and Feitelson, IEEE TPDS 2007; docs/simulation.md).
POLICIES = ("fcfs", "sjf", "wfp3", "unicep", "f1", "sjbf")
# Not simulated: the schedule the site's own scheduler produced, start = submit + SWF field 3.
RECORDED = "recorded"
RECORDED_NOTE = (
    "what the site's scheduler did, not a like-for-like run: its machine was not empty when "
    "the window began, and it may have had reservations or down nodes"
)
BACKFILLS = ("none", "easy", "conservative")
ESTIMATES = ("request", "predicted")  # what backfilling takes as a job's runtime
PROTOCOL_WINDOWS, PROTOCOL_JOBS = 10, 1024  # RLScheduler's evaluation (SC'20)
SUMMARY_KEYS = (
    "avg_wait",
    "max_wait",
    "avg_bsld",
    "max_bsld",
    "utilization",
    "makespan",
    "jain_user_bsld",
)


@dataclass(frozen=True)
class SimResult:
    """A simulated window: jobs `begin .. end-1` of the trace and their start times."""

    begin: int
    end: int
    start_time: np.ndarray
    metrics: dict


def simulate(
    trace: Trace,
    policy: str = "fcfs",
    backfill: str = "easy",
    start: int = 0,
    jobs: int | None = None,
    estimate: str = "request",
) -> SimResult:
    """Simulates jobs `start .. start+jobs-1` (clipped at the end) on an empty machine;
    backfilling estimates runtimes by the users' requests or by EASY++ predictions."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy '{policy}' (choose from {', '.join(POLICIES)})")
    if backfill not in BACKFILLS:
        raise ValueError(f"unknown backfill '{backfill}' (choose from {', '.join(BACKFILLS)})")
    if estimate not in ESTIMATES:
        raise ValueError(f"unknown estimate '{estimate}' (choose from {', '.join(ESTIMATES)})")
    end = window_end(trace, start, jobs)
    start_time, metrics = _core.simulate(
        *trace.core_columns(), trace.machine_procs, policy, backfill, start, end, estimate
    )
    return SimResult(start, end, start_time, metrics)


def window_end(trace: Trace, start: int, jobs: int | None) -> int:
    """The end of the window of `jobs` jobs from `start` (all by default), clipped at the
    end of the trace; a start outside the trace or a count below 1 is refused."""
    if start < 0 or start >= len(trace):
        raise ValueError(f"--start {start} is outside the trace's {len(trace)} jobs")
    if jobs is not None and jobs <= 0:
        raise ValueError(f"--jobs must be positive, not {jobs}")
    return len(trace) if jobs is None else min(len(trace), start + jobs)


def has_recorded(trace: Trace, start: int = 0, end: int | None = None) -> bool:
    """Whether jobs start .. end-1 all have their recorded wait (SWF field 3 >= 0)."""
    return bool(np.all(trace.wait_time[start:end] >= 0))


def recorded(trace: Trace, start: int = 0, jobs: int | None = None) -> SimResult:
    """The schedule the site's scheduler produced for the window of `simulate`: each job
    starts at submit + its recorded wait (SWF field 3). Nothing is simulated, and the site's
    machine was not empty when the window began (docs/simulation.md, "The recorded
    schedule"). A job of the window without a recorded wait is refused, by its id."""
    end = window_end(trace, start, jobs)
    wait = trace.wait_time[start:end]
    missing = np.flatnonzero(~(wait >= 0))  # -1 (unknown), and NaN
    if missing.size:
        job = start + missing[0]
        raise TraceError(
            f"{trace.source}: no recorded schedule (SWF field 3) for job {trace.id[job]} "
            f"(job {job} of the cleaned trace, wait {wait[missing[0]]:g}); "
            f"the recorded schedule of jobs {start}..{end - 1} is not in this log"
        )
    start_time = trace.submit[start:end] + wait
    return SimResult(start, end, start_time, schedule_metrics(trace, start, start_time))


def schedule_metrics(trace: Trace, begin: int, start_time: np.ndarray) -> dict:
    """The metrics of docs/simulation.md ("Metrics") of jobs begin .. begin+len-1 started at
    `start_time`: the keys of `simulate(...).metrics`, computed as the C++ core computes
    them (src/metrics.cpp: sums in job order, users in order of first appearance), so that
    both agree to the last bit."""
    jobs = job_records(trace, begin, start_time)
    wait, bsld = jobs["wait"], jobs["bsld"]
    first_submit = float(jobs["submit"][0])
    makespan = max(first_submit, float(np.max(jobs["end"]))) - first_submit
    work = _sum_in_order(jobs["procs"] * jobs["runtime"])
    users, user_avg_wait, user_avg_bsld = _per_user(jobs["user"], wait, bsld)
    sum_x, sum_x2 = _sum_in_order(user_avg_bsld), _sum_in_order(user_avg_bsld * user_avg_bsld)
    return {
        "jobs": len(wait),
        "avg_wait": _sum_in_order(wait) / len(wait),
        "max_wait": float(np.max(wait, initial=0.0)),
        "avg_bsld": _sum_in_order(bsld) / len(bsld),
        "max_bsld": float(np.max(bsld, initial=0.0)),
        "utilization": work / (trace.machine_procs * makespan) if makespan > 0 else 0.0,
        "makespan": makespan,
        "jain_user_bsld": sum_x**2 / (len(users) * sum_x2),  # float pow, as the core's
        "users": users,
        "user_avg_wait": user_avg_wait,
        "user_avg_bsld": user_avg_bsld,
    }


def _sum_in_order(values: np.ndarray) -> float:
    """The sum of `values` added one after the other, as the C++ core adds them: np.sum
    adds pairwise, which differs in the last bits."""
    return float(np.cumsum(values, dtype=np.float64)[-1])


def _per_user(
    user: np.ndarray, wait: np.ndarray, bsld: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Users in order of first appearance, with their average wait and bsld (bincount adds
    each user's jobs in job order)."""
    ids, first, index = np.unique(user, return_index=True, return_inverse=True)
    by_appearance = np.argsort(first)
    number = np.empty(len(ids), dtype=np.int64)
    number[by_appearance] = np.arange(len(ids))
    index = number[index.reshape(-1)]
    count = np.bincount(index)
    average = [np.bincount(index, weights=v) / count for v in (wait, bsld)]
    return ids[by_appearance], average[0], average[1]


def job_records(trace: Trace, begin: int, start_time: np.ndarray) -> dict[str, np.ndarray]:
    """Each job's schedule, for jobs begin .. begin+len(start_time)-1 started at
    `start_time`: wait = start - submit, bsld = max(1, (wait + runtime) / max(runtime, 10))."""
    window = slice(begin, begin + len(start_time))
    runtime = trace.runtime[window]
    wait = start_time - trace.submit[window]
    return {
        "id": trace.id[window],
        "submit": trace.submit[window],
        "start": start_time,
        "end": start_time + runtime,
        "wait": wait,
        "runtime": runtime,
        "requested_time": trace.requested_time[window],
        "procs": trace.procs[window],
        "user": trace.user[window],
        "bsld": np.maximum(1.0, (wait + runtime) / np.maximum(runtime, 10.0)),
    }


def protocol_windows(
    trace_jobs: int,
    start: int = 0,
    windows: int = PROTOCOL_WINDOWS,
    window_jobs: int = PROTOCOL_JOBS,
) -> list[tuple[int, int]]:
    """(first job, jobs) of the protocol's windows: consecutive from `start`, the last one
    clipped at the end of the trace, those that would start past it left out."""
    firsts = [
        start + k * window_jobs for k in range(windows) if start + k * window_jobs < trace_jobs
    ]
    if not firsts or start < 0:
        raise ValueError(f"--start {start} is outside the trace's {trace_jobs} jobs")
    return [(first, min(window_jobs, trace_jobs - first)) for first in firsts]


def rlscheduler_protocol(
    schedule: Callable[[int, int], SimResult],
    trace_jobs: int,
    start: int = 0,
    windows: int = PROTOCOL_WINDOWS,
    window_jobs: int = PROTOCOL_JOBS,
) -> dict:
    """RLScheduler's evaluation (SC'20): consecutive windows of 1024 jobs from `start` of a
    trace of `trace_jobs` jobs, each scheduled by `schedule(first job, jobs)` (a heuristic's
    `simulate`, or `recorded`).

    Returns the summary over windows (averages are means over windows, maxima are maxima,
    `jobs` is the total), each window's `avg_bsld` under `windows`, and `mean_avg_bsld`.
    """
    results = [
        schedule(first, jobs)
        for first, jobs in protocol_windows(trace_jobs, start, windows, window_jobs)
    ]
    summary = {"jobs": sum(r.metrics["jobs"] for r in results)}
    for key in SUMMARY_KEYS:
        values = [r.metrics[key] for r in results]
        summary[key] = max(values) if key.startswith("max_") else sum(values) / len(values)
    summary["windows"] = [r.metrics["avg_bsld"] for r in results]
    summary["mean_avg_bsld"] = summary["avg_bsld"]
    return summary


__all__ = [
    "BACKFILLS",
    "ESTIMATES",
    "POLICIES",
    "PROTOCOL_JOBS",
    "PROTOCOL_WINDOWS",
    "RECORDED",
    "RECORDED_NOTE",
    "SimResult",
    "has_recorded",
    "job_records",
    "protocol_windows",
    "recorded",
    "rlscheduler_protocol",
    "schedule_metrics",
    "simulate",
    "window_end",
]
