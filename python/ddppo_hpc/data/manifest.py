"""The manifest of a dataset directory (ARCHITECTURE.md, "HDF5 trace store"): read and
checked once, when a store is opened, so that no reader trusts a count, a file name or a
machine size that a damaged or hand-edited manifest.json got wrong."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ddppo_hpc.args import INT32_MAX
from ddppo_hpc.data.trace import TraceError

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
# The columns the simulator reads; every store has them, whatever its source.
CORE_COLUMNS = {
    "id": np.int64,
    "submit": np.float64,
    "runtime": np.float64,
    "requested_time": np.float64,
    "procs": np.int32,
    "user": np.int64,
    "group": np.int64,
    "queue": np.int64,
}
# Columns a store may have, checked when listed: an SWF store keeps field 3, the recorded
# wait (all 18 fields); a synthetic or GPU store has none, and reads as -1 (unknown).
OPTIONAL_COLUMNS = {"wait_time": np.float64}
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MISSING = object()


def read_manifest(path: Path) -> object:
    """The parsed manifest.json of a dataset directory (not yet checked)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file (not a dataset directory)") from None
    except (OSError, ValueError) as e:
        raise TraceError(f"{path}: unreadable: {e}") from None


def manifest_problems(document: object, where: Path) -> list[str]:
    """Every problem of a parsed manifest, each naming `where` and the key; [] if none."""
    if not isinstance(document, dict):
        return [f"{where}: a JSON {_json_type(document)}, not an object with the dataset's keys"]
    version = document.get("schema_version")
    if version != SCHEMA_VERSION:
        return [f"{where}: schema version {version!r}, this ddppo-hpc reads {SCHEMA_VERSION}"]
    check = _Checker(where)
    jobs = check(document, "jobs", _count(1), "an integer >= 1")
    machine = check(document, "machine", _is(dict), "an object")
    if machine is not None:
        check(machine, "procs", _count(1, INT32_MAX), f"an integer in 1..{INT32_MAX}", "machine")
    columns = check(document, "columns", _is(dict), "an object of column dtypes")
    if columns is not None:
        for name, dtype in CORE_COLUMNS.items():
            wanted = np.dtype(dtype).name
            check(columns, name, lambda v, w=wanted: v == w, repr(wanted), "columns")
        for name, dtype in OPTIONAL_COLUMNS.items():
            wanted = np.dtype(dtype).name
            if name in columns:
                check(columns, name, lambda v, w=wanted: v == w, repr(wanted), "columns")
    check(document, "time_span", _time_span, "[first, last] submit times")
    if "dropped" in document:
        check(document, "dropped", _counts, "an object of counts by reason")
    partitions = check(document, "partitions", _non_empty_list, "a non-empty list")
    if partitions is not None:
        _check_partitions(check, partitions, jobs)
    return check.problems


def _check_partitions(check: _Checker, partitions: list, jobs: int | None) -> None:
    """Each entry's keys, and that they cover jobs 0 .. jobs-1 in order, each once."""
    next_job: int | None = 0  # where the next partition must start; None once unknown
    for k, part in enumerate(partitions):
        label = f"partitions[{k}]"
        if not isinstance(part, dict):
            check.note(label, part, "an object")
            next_job = None
            continue
        check(part, "file", _plain_name, "a file name in the dataset directory", label)
        check(part, "sha256", _sha256, "64 hexadecimal digits", label)
        first = check(part, "first_job", _count(0), "an integer >= 0", label)
        if None not in (first, next_job) and first != next_job:
            after = f"where partitions[{k - 1}] ends" if k else "the first job"
            check.note(f"{label}.first_job", first, f"{next_job}, {after}")
        rows = check(part, "jobs", _count(1), "an integer >= 1", label)
        next_job = None if None in (next_job, rows) else next_job + rows
    if None not in (next_job, jobs) and next_job != jobs:
        check.problems.append(f"{check.where}: partitions hold {next_job} jobs, jobs says {jobs}")


class _Checker:
    """Checks one key at a time, collecting a line per problem."""

    def __init__(self, where: Path):
        self.where = where
        self.problems: list[str] = []

    def __call__(self, parent: dict, key: str, ok: Callable, wanted: str, within: str = ""):
        """`parent[key]` if `ok` accepts it, else None (and the problem noted); `within`
        names the parent (`machine`, `partitions[3]`)."""
        label = f"{within}.{key}" if within else key
        value = parent.get(key, _MISSING)
        if value is _MISSING:
            self.problems.append(f"{self.where}: {label} is missing")
        elif not ok(value):
            self.note(label, value, wanted)
        else:
            return value
        return None

    def note(self, label: str, value: object, wanted: str) -> None:
        text = repr(value)
        text = text if len(text) <= 40 else text[:37] + "..."
        self.problems.append(f"{self.where}: {label} is {text}, expected {wanted}")


def _count(low: int, high: int = 2**63 - 1) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _is(kind: type) -> Callable[[object], bool]:
    return lambda v: isinstance(v, kind)


def _non_empty_list(value: object) -> bool:
    return isinstance(value, list) and len(value) > 0


def _sha256(value: object) -> bool:
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


def _counts(value: object) -> bool:
    return isinstance(value, dict) and all(map(_count(0), value.values()))


def _time_span(value: object) -> bool:
    if not (isinstance(value, list) and len(value) == 2):
        return False
    numbers = all(isinstance(v, (int, float)) and math.isfinite(v) for v in value)
    return numbers and value[0] <= value[1]


def _plain_name(value: object) -> bool:
    """A file inside the dataset directory itself: no separator, not `..`."""
    return isinstance(value, str) and value not in ("", ".", "..") and "/" not in value


def _json_type(value: object) -> str:
    names = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}
    return names.get(type(value), "null")
