"""The evaluation results file (schema: docs/results.md): per-job records, per-window
metrics and per-scheduler summaries with 95% t-intervals over windows, in one HDF5 file."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from ddppo_hpc.data.split import describe
from ddppo_hpc.env import EPISODE_METRICS
from ddppo_hpc.io import atomic_hdf5, reason
from ddppo_hpc.sim import job_records

SCHEMA_VERSION = 2
METRICS = EPISODE_METRICS  # avg_bsld, avg_wait, utilization, jain_user_bsld
LOWER_IS_BETTER = ("avg_bsld", "avg_wait")  # the others: higher is better
NAME = "S16"  # scheduler, backfill and estimate names: fixed-length ASCII
# what tells one scheduler's rows from another's: the order, how it backfills, and what
# backfilling takes as a job's runtime (the requests, or EASY++ predictions)
SCHEDULER = ("policy", "backfill", "estimate")
JOB_COLUMNS = {
    "policy": NAME,
    "backfill": NAME,
    "estimate": NAME,
    "window": "i4",
    "job_id": "i8",
    "user": "i8",
    "submit": "f8",
    "start": "f8",
    "end": "f8",
    "procs": "i4",
    "wait": "f8",
    "bsld": "f8",
}
WINDOW_COLUMNS = {
    "policy": NAME,
    "backfill": NAME,
    "estimate": NAME,
    "window": "i4",
    "first_job": "i8",
    "jobs": "i4",
    **{m: "f8" for m in METRICS},
}
SUMMARY_COLUMNS = {
    "policy": NAME,
    "backfill": NAME,
    "estimate": NAME,
    "windows": "i4",
    **{f"{m}_{part}": "f8" for m in METRICS for part in ("mean", "low", "high")},
}

TABLES = {"jobs": JOB_COLUMNS, "windows": WINDOW_COLUMNS, "summary": SUMMARY_COLUMNS}
ATTRIBUTES = ("schema_version", "config", "checkpoint", "checkpoint_update", "versions")
ATTRIBUTES += ("trace", "trace_sha256", "machine_procs", "command", "window_spec")
ATTRIBUTES += ("policies", "backfills", "estimates", "ranks", "split")
JSON_ATTRIBUTES = ("config", "versions", "window_spec", "split")


@dataclass(frozen=True)
class Outcome:
    """One scheduler on one window: its jobs' start times (trace order) and its metrics."""

    policy: str
    backfill: str
    estimate: str
    window: int
    first_job: int
    start_time: np.ndarray
    metrics: dict


@dataclass(frozen=True)
class Results:
    """A results file read back: root attributes and the three tables (column -> array;
    names decoded to str)."""

    attrs: dict
    jobs: dict[str, np.ndarray]
    windows: dict[str, np.ndarray]
    summary: dict[str, np.ndarray]


@functools.lru_cache
def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided `level` quantile of Student's t with `df` degrees of freedom: where the
    density, integrated from 0 (trapezoids of 1e-4), reaches level / 2."""
    x = np.linspace(0.0, 100.0, 1_000_001)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    density = np.exp(log_norm - (df + 1) / 2 * np.log1p(x * x / df))
    cdf = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * (x[1] - x[0]))])
    return float(np.interp(level / 2, cdf, x))


def interval(values: np.ndarray) -> tuple[float, float, float]:
    """(mean, low, high): the 95% t-interval of the mean over windows (a single window
    gives the mean as both bounds)."""
    n, mean = len(values), float(np.mean(values))
    if n < 2:
        return mean, mean, mean
    half = t_quantile(n - 1) * float(np.std(values, ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half


def scheduler_label(policy: str, estimate: str) -> str:
    """A scheduler's name in tables and plots: the order, marked when backfilling takes
    EASY++ predictions rather than the requests ("-" for the recorded schedule)."""
    return f"{policy}+{estimate}" if estimate == "predicted" else policy


def scored_jobs(split: dict, spec: dict) -> str:
    """The jobs a results file scores, in words, from its `split` and `window_spec`
    attributes: `test part: jobs 8000 .. 9999 of 10000 (split 0.7/0.1/0.2); windows: ...`."""
    bounds = (split["first_job"], split["stop_job"], split["trace_jobs"])
    where = describe(split["part"], *bounds, split["fractions"])
    how = {
        "rlscheduler": "RLScheduler protocol",
        "full": "the whole part",
        "consecutive": f"{spec.get('windows')} consecutive of {spec.get('jobs')} jobs",
        "random": f"{spec.get('windows')} of {spec.get('jobs')} jobs at random starts, seed "
        f"{spec.get('seed')}",
    }[spec["kind"]]
    return f"{where}; windows: {how}"


def rows_of(table: dict[str, np.ndarray], key: tuple) -> np.ndarray:
    """The rows of `table` whose (policy, backfill, estimate) is `key`, as a mask."""
    chosen = np.ones(len(table["policy"]), dtype=bool)
    for name, value in zip(SCHEDULER, key):
        chosen &= table[name] == value
    return chosen


def summarize(windows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One row per (policy, backfill, estimate), in their order of appearance in `windows`."""
    keys = list(dict.fromkeys(zip(*(windows[name] for name in SCHEDULER))))
    rows: dict[str, list] = {name: [] for name in SUMMARY_COLUMNS}
    for key in keys:
        chosen = rows_of(windows, key)
        for name, value in zip(SCHEDULER, key):
            rows[name].append(value)
        rows["windows"].append(int(chosen.sum()))
        for m in METRICS:
            for part, value in zip(("mean", "low", "high"), interval(windows[m][chosen])):
                rows[f"{m}_{part}"].append(value)
    return _columns(rows, SUMMARY_COLUMNS)


def tables(outcomes: list[Outcome], trace) -> tuple[dict, dict]:
    """The per-job and per-window tables of `outcomes` (in their order) on `trace`."""
    jobs: dict[str, list] = {name: [] for name in JOB_COLUMNS}
    windows: dict[str, list] = {name: [] for name in WINDOW_COLUMNS}
    for o in outcomes:
        n = len(o.start_time)
        records = job_records(trace, o.first_job, o.start_time)
        records["job_id"] = records["id"]
        for name in (*SCHEDULER, "window"):
            records[name] = np.full(n, getattr(o, name))
        for name in JOB_COLUMNS:
            jobs[name].append(records[name])
        row = {name: getattr(o, name) for name in (*SCHEDULER, "window")}
        row.update({"first_job": o.first_job, "jobs": n, **{m: o.metrics[m] for m in METRICS}})
        for name, value in row.items():
            windows[name].append(value)
    jobs = {name: np.concatenate(parts) for name, parts in jobs.items()}
    return _columns(jobs, JOB_COLUMNS), _columns(windows, WINDOW_COLUMNS)


def _columns(rows: dict, dtypes: dict) -> dict[str, np.ndarray]:
    return {name: np.asarray(rows[name]).astype(dtypes[name]) for name in dtypes}


def results_of(outcomes: list[Outcome], trace, attrs: dict) -> Results:
    """The results of `outcomes` (in their order) on `trace`, in memory."""
    jobs, windows = tables(outcomes, trace)
    summary = summarize(windows)
    attrs = {"schema_version": SCHEMA_VERSION, **attrs}
    return Results(attrs, *(_decoded(t) for t in (jobs, windows, summary)))


def write_results(path: str | Path, results: Results) -> None:
    """Writes the results file atomically. The HDF5 image is built in memory, so that a
    full disk fails in one plain write (OutputError naming `path`), never inside HDF5."""
    with atomic_hdf5(path) as h5:
        for name, value in results.attrs.items():
            h5.attrs[name] = value
        for group, dtypes in TABLES.items():
            g = h5.create_group(group)
            compress = {"compression": "gzip"} if group == "jobs" else {}
            for name, column in _columns(getattr(results, group), dtypes).items():
                g.create_dataset(name, data=column, **compress)


def _decoded(table: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v.astype(str) if v.dtype.kind == "S" else v for k, v in table.items()}


def read_results(path: str | Path) -> Results:
    """A results file, checked against its schema (docs/results.md): a file that is not
    one, or lacks a table, column or attribute, raises ValueError naming it and the part."""
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(f"{path}: not a ddppo-hpc results file (schema version)")
            problem = _schema_problem(f)
            if problem:
                raise ValueError(f"{path}: not a complete results file: {problem}")
            attrs = {k: _plain(v) for k, v in f.attrs.items()}
            groups = [_decoded({n: f[g][n][...] for n in dtypes}) for g, dtypes in TABLES.items()]
    except OSError as e:  # h5py's message spells out its flags; errno says it shorter
        raise ValueError(f"{path}: cannot read results ({reason(e)})") from None
    return Results(attrs, *groups)


def _schema_problem(f: h5py.File) -> str | None:
    """What `f` lacks of the schema, in words; None when it has every part."""
    for name in ATTRIBUTES:
        if name not in f.attrs:
            return f"no attribute {name}"
    for name in JSON_ATTRIBUTES:
        try:
            json.loads(f.attrs[name])
        except (TypeError, ValueError):
            return f"attribute {name} is not JSON"
    for group, dtypes in TABLES.items():
        if not isinstance(f.get(group), h5py.Group):
            return f"no {group}"
        first = next(iter(dtypes))
        for name, dtype in dtypes.items():
            column = f[group].get(name)
            if not isinstance(column, h5py.Dataset):
                return f"no {group}/{name}"
            if column.dtype.kind != np.dtype(dtype).kind or column.ndim != 1:
                return f"{group}/{name} is not a column of {np.dtype(dtype)}"
            if len(column) != len(f[group][first]):
                return (
                    f"{group}/{name} has {len(column)} rows, {group}/{first} {len(f[group][first])}"
                )
    return None


def _plain(value):
    """h5py attribute values as Python values (numpy scalars and str arrays unwrapped)."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    return value.item() if isinstance(value, np.generic) else value
