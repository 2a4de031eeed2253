"""Python facade over the C++ simulator: heuristics, windows and the RLScheduler protocol."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddppo_hpc import _core
from ddppo_hpc.data.trace import Trace

# sjbf orders by the EASY++ runtime prediction; with backfill "easy" and estimate "predicted"
# it is EASY++ (Tsafrir, Etsion and Feitelson, IEEE TPDS 2007; docs/simulation.md).
POLICIES = ("fcfs", "sjf", "wfp3", "unicep", "f1", "sjbf")
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
    if start < 0 or start >= len(trace):
        raise ValueError(f"--start {start} is outside the trace's {len(trace)} jobs")
    if jobs is not None and jobs <= 0:
        raise ValueError(f"--jobs must be positive, not {jobs}")
    end = len(trace) if jobs is None else min(len(trace), start + jobs)
    start_time, metrics = _core.simulate(
        *trace.core_columns(), trace.machine_procs, policy, backfill, start, end, estimate
    )
    return SimResult(start, end, start_time, metrics)


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
    trace: Trace,
    policy: str,
    backfill: str,
    start: int = 0,
    windows: int = PROTOCOL_WINDOWS,
    window_jobs: int = PROTOCOL_JOBS,
    estimate: str = "request",
) -> dict:
    """RLScheduler's evaluation (SC'20): consecutive windows of 1024 jobs from `start`.

    Returns the summary over windows (averages are means over windows, maxima are maxima,
    `jobs` is the total), each window's `avg_bsld` under `windows`, and `mean_avg_bsld`.
    """
    results = [
        simulate(trace, policy, backfill, first, jobs, estimate)
        for first, jobs in protocol_windows(len(trace), start, windows, window_jobs)
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
    "SimResult",
    "job_records",
    "protocol_windows",
    "rlscheduler_protocol",
    "simulate",
]
