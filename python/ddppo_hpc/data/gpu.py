"""Readers for GPU-cluster traces: Microsoft Philly (2017) and Alibaba GPU (2023) CSV files.

GPUs are the scheduled resource: `procs` is a job's GPU count, so the simulator runs on the
core columns as on a cleaned SWF trace. The files may be plain or gzip-compressed.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from ddppo_hpc.data.store import CORE_COLUMNS
from ddppo_hpc.data.swf import read_bytes
from ddppo_hpc.data.trace import DROP_REASONS, TraceError

PHILLY_HEADER = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
ALIBABA_PODS_HEADER = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
ALIBABA_NODES_HEADER = ("sn", "cpu_milli", "memory_mib", "gpu", "model")


PHILLY_DTYPES = {**CORE_COLUMNS, "gpu_time": np.float64, "virtual_cluster": np.int64}
ALIBABA_DTYPES = {
    **CORE_COLUMNS,
    "cpu_milli": np.int64,
    "memory_mib": np.int64,
    "num_gpu": np.int32,
    "gpu_milli": np.int32,
    "gpu_spec": np.int64,
    "qos": np.int64,
    "scheduled": np.float64,
    "pod_phase": np.int64,
}


@dataclass(frozen=True)
class GpuTrace:
    """Cleaned jobs of a GPU trace, ordered by (submit, id).

    `columns` holds the core columns of `CORE_COLUMNS` (`id` is the job's 1-based row in the
    file, `submit` is relative to the earliest kept submit, `requested_time` = `runtime` as
    these traces have no user estimate, `procs` = GPUs, -1 = unknown) and the trace's extra
    columns (`PHILLY_DTYPES`, `ALIBABA_DTYPES`); category columns index lists in `meta`.
    `dropped` counts the jobs left out by reason; `machine` and `meta` are JSON-serialisable.
    """

    columns: dict[str, np.ndarray]
    dropped: dict[str, int]
    machine: dict
    meta: dict

    def __len__(self) -> int:
        return len(self.columns["id"])


@dataclass(frozen=True)
class _Table:
    """The rows of a CSV file with the right number of fields, column by column."""

    path: str
    texts: dict[str, tuple[str, ...]]
    row: np.ndarray  # 1-based row number in the file, the header not counted
    line: np.ndarray  # 1-based line number in the file, the header counted
    bad: int  # rows skipped as malformed
    error: str | None  # the first malformed row, raised after earlier bad values

    def select(self, keep: np.ndarray) -> _Table:
        texts = {name: tuple(np.array(col, dtype=object)[keep]) for name, col in self.texts.items()}
        bad = self.bad + int((~keep).sum())
        return _Table(self.path, texts, self.row[keep], self.line[keep], bad, self.error)


def _read_table(path: str | Path, header: tuple[str, ...], skip_bad: bool) -> _Table:
    """Reads a CSV file with exactly `header`; blank lines are ignored."""
    try:
        text = read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text (byte {e.start})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    rows, numbers, lines, bad, error = [], [], [], 0, None
    try:
        found = next(reader, [])
        if tuple(found) != header:
            raise TraceError(
                f"{path}: expected the columns {','.join(header)}, found {','.join(found)!r}"
            )
        for number, row in enumerate(filter(None, reader), start=1):
            if len(row) == len(header):
                rows.append(row)
                numbers.append(number)
                lines.append(reader.line_num)
            elif skip_bad:
                bad += 1
            else:
                error = f"{path}:{reader.line_num}: {_count_error(header, len(row))}"
                break
    except csv.Error as e:
        raise TraceError(f"{path}:{reader.line_num}: {e}") from None
    columns = list(zip(*rows)) or [()] * len(header)
    row, line = np.array(numbers, dtype=np.int64), np.array(lines, dtype=np.int64)
    return _Table(str(path), dict(zip(header, columns)), row, line, bad, error)


def _count_error(header: tuple[str, ...], found: int) -> str:
    expected = f"expected {len(header)} fields ({','.join(header)}), found {found}"
    if found < len(header):
        return f"field '{header[found]}' is missing ({expected})"
    return f"field '{header[-1]}' is followed by {found - len(header)} extra ({expected})"


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"is not a number: {text!r}")
    return value


def _optional_number(text: str) -> float:
    """A number, or NaN for an empty field."""
    return math.nan if text == "" else _number(text)


def _integer(text: str) -> float:
    value = _number(text)
    if value != int(value):
        raise ValueError(f"is not an integer: {text!r}")
    return value


def _count(text: str) -> float:
    value = _integer(text)
    if value < 0:
        raise ValueError(f"is negative: {text!r}")
    return value


_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_EPOCH = datetime(1970, 1, 1)


def _timestamp(text: str) -> float:
    """Seconds since the Unix epoch of a `YYYY-MM-DD HH:MM:SS` UTC time."""
    if _TIMESTAMP.fullmatch(text):
        try:
            return (datetime.fromisoformat(text) - _EPOCH).total_seconds()
        except ValueError:
            pass
    raise ValueError(f"is not a time 'YYYY-MM-DD HH:MM:SS': {text!r}")


def _parse(
    table: _Table, converters: dict[str, Callable[[str], float]], skip_bad: bool
) -> tuple[dict[str, np.ndarray], _Table]:
    """The named columns as floats; the first bad value raises, or all such rows are skipped."""
    values, bad = {}, np.zeros(len(table.row), dtype=bool)
    for name, convert in converters.items():
        parsed = []
        for i, text in enumerate(table.texts[name]):
            try:
                parsed.append(convert(text))
            except ValueError:
                parsed.append(math.nan)
                bad[i] = True
        values[name] = np.array(parsed, dtype=np.float64)
    if bad.any() and not skip_bad:
        first = int(np.argmax(bad))
        for name, convert in converters.items():
            try:
                convert(table.texts[name][first])
            except ValueError as e:
                raise TraceError(f"{table.path}:{table.line[first]}: field '{name}' {e}") from None
    if table.error is not None:
        raise TraceError(table.error)
    if not bad.any():
        return values, table
    return {name: column[~bad] for name, column in values.items()}, table.select(~bad)


def _categories(texts: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """Each text's index among the distinct texts in order of first appearance; empty: -1."""
    index: dict[str, int] = {"": -1}
    codes = [index.setdefault(text, len(index) - 1) for text in texts]
    return np.array(codes, dtype=np.int64), list(index)[1:]


def _drops(path: str, rules: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, int]]:
    """The rows that break no rule; a dropped row is counted under the first rule it breaks."""
    keep = np.ones(len(next(iter(rules.values()))), dtype=bool)
    dropped = {}
    for reason, broken in rules.items():
        dropped[reason] = int((keep & broken).sum())
        keep &= ~broken
    if not keep.any():
        raise TraceError(f"{path}: no job is left after cleaning (dropped: {dropped})")
    return keep, dropped


def _finish(
    table: _Table,
    columns: dict[str, np.ndarray],
    dtypes: dict[str, type],
    keep: np.ndarray,
    dropped: dict[str, int],
    skip_bad: bool,
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The kept rows ordered by (submit, id) in their dtypes, and the drops by reason."""
    order = np.flatnonzero(keep)
    order = order[np.lexsort((columns["id"][order], columns["submit"][order]))]
    if skip_bad:
        dropped = {**dropped, "bad_line": table.bad}
    return {name: columns[name][order].astype(dtype) for name, dtype in dtypes.items()}, dropped


_PHILLY_NUMBERS = {
    "timestamp": _timestamp,
    "duration": _optional_number,
    "num_gpus": _integer,
    "gpu_time": _number,
}
_ALIBABA_NUMBERS = {
    "cpu_milli": _integer,
    "memory_mib": _integer,
    "num_gpu": _integer,
    "gpu_milli": _integer,
    "creation_time": _number,
    "deletion_time": _optional_number,
    "scheduled_time": _optional_number,
}
# category column: the meta key of its strings
_ALIBABA_CATEGORIES = {"gpu_spec": "gpu_specs", "qos": "qos_classes", "pod_phase": "pod_phases"}


def read_philly(
    path: str | Path, skip_bad: bool = False, machine_gpus: int | None = None
) -> GpuTrace:
    """Reads the Philly per-job extract (timestamp,duration,num_gpus,gpu_time,cluster).

    `runtime` = duration (missing or negative: dropped as `negative_runtime`), `procs` =
    num_gpus (<= 0: `no_procs`). The extract has no node list and does not say how many
    GPUs the cluster had, so the machine is a pool of `machine_gpus` GPUs, by default the
    largest job's count; larger jobs are dropped as `too_large`.
    """
    if machine_gpus is not None and machine_gpus <= 0:
        raise TraceError(f"machine size must be a positive number of GPUs, not {machine_gpus}")
    table = _read_table(path, PHILLY_HEADER, skip_bad)
    num, table = _parse(table, _PHILLY_NUMBERS, skip_bad)
    duration, gpus = num["duration"], num["num_gpus"]
    runtime_ok, gpus_ok = duration >= 0, gpus > 0  # a missing duration (NaN) is not >= 0
    machine = machine_gpus or int(gpus[runtime_ok & gpus_ok].max(initial=0))
    rules = (~runtime_ok, ~gpus_ok, gpus > machine)
    keep, dropped = _drops(table.path, dict(zip(DROP_REASONS, rules)))
    start = num["timestamp"][keep].min()
    # The public extract has no user ids: the virtual cluster (a team's share of the
    # cluster) stands in for both the user and the queue.
    cluster, clusters = _categories(table.texts["cluster"])
    columns = {
        "id": table.row,
        "submit": num["timestamp"] - start,
        "runtime": duration,
        "requested_time": duration,
        "procs": gpus,
        "user": cluster,
        "group": np.full(len(cluster), -1),
        "queue": cluster,
        "gpu_time": num["gpu_time"],
        "virtual_cluster": cluster,
    }
    columns, dropped = _finish(table, columns, PHILLY_DTYPES, keep, dropped, skip_bad)
    meta = {"kind": "philly", "unix_start_time": int(start), "virtual_clusters": clusters}
    return GpuTrace(columns, dropped, {"kind": "gpu_pool", "gpus": machine}, meta)


def _read_nodes(path: str | Path) -> dict:
    """The machine of the Alibaba node list; a malformed node line always raises."""
    table = _read_table(path, ALIBABA_NODES_HEADER, skip_bad=False)
    converters = {"cpu_milli": _count, "memory_mib": _count, "gpu": _count}
    num, table = _parse(table, converters, skip_bad=False)
    nodes = [
        {"name": name, "cpu_milli": int(cpu), "memory_mib": int(mem), "gpus": int(gpus), "model": m}
        for name, cpu, mem, gpus, m in zip(
            table.texts["sn"], num["cpu_milli"], num["memory_mib"], num["gpu"], table.texts["model"]
        )
    ]
    gpus = sum(node["gpus"] for node in nodes)
    if gpus == 0:
        raise TraceError(f"{path}: the nodes have no GPU")
    return {"kind": "gpu_nodes", "gpus": gpus, "nodes": nodes}


def read_alibaba(pods_path: str | Path, nodes_path: str | Path, skip_bad: bool = False) -> GpuTrace:
    """Reads the Alibaba GPU 2023 pod list and its node list (the machine).

    `submit` = creation_time, `runtime` = deletion_time - scheduled_time, `procs` = num_gpu.
    Drops, under the first rule that applies: `not_scheduled` (no scheduled_time: a pod
    still pending at the end of the trace never ran), `negative_runtime` (deletion_time
    missing or 0, so the end is unknown, or before scheduled_time), `no_procs` (num_gpu <= 0:
    CPU-only pods, which the GPU scheduler does not place), `too_large` (more GPUs than all
    the nodes together; pods larger than one node are kept). Pods still running at the end
    carry the trace's end as deletion_time, so their runtime is cut there.
    """
    machine = _read_nodes(nodes_path)
    table = _read_table(pods_path, ALIBABA_PODS_HEADER, skip_bad)
    num, table = _parse(table, _ALIBABA_NUMBERS, skip_bad)
    scheduled, deleted, gpus = num["scheduled_time"], num["deletion_time"], num["num_gpu"]
    runtime = deleted - scheduled  # NaN when either is missing
    rules = {
        "not_scheduled": np.isnan(scheduled),
        "negative_runtime": ~(deleted > 0) | ~(runtime >= 0),
        "no_procs": ~(gpus > 0),
        "too_large": gpus > machine["gpus"],
    }
    keep, dropped = _drops(table.path, rules)
    origin = num["creation_time"][keep].min()
    categories = {name: _categories(table.texts[name]) for name in _ALIBABA_CATEGORIES}
    unknown = np.full(len(gpus), -1)
    columns = {
        "id": table.row,
        "submit": num["creation_time"] - origin,
        "runtime": runtime,
        "requested_time": runtime,
        "procs": gpus,
        "user": unknown,
        "group": unknown,
        "queue": unknown,
        **{name: num[name] for name in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli")},
        **{name: codes for name, (codes, _) in categories.items()},
        "scheduled": scheduled - origin,
    }
    columns, dropped = _finish(table, columns, ALIBABA_DTYPES, keep, dropped, skip_bad)
    meta = {"kind": "alibaba", "origin_time": float(origin)}
    meta |= {key: categories[name][1] for name, key in _ALIBABA_CATEGORIES.items()}
    return GpuTrace(columns, dropped, machine, meta)
