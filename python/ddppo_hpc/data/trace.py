"""A cleaned job trace: the SWF cleaning rules of docs/simulation.md over NumPy columns."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

DROP_REASONS = ("negative_runtime", "no_procs", "too_large")


class TraceError(ValueError):
    """A trace that cannot be used; the message names the file, line and field."""


@dataclass(frozen=True)
class Trace:
    """Jobs ordered by (submit, id), every one fitting the machine.

    Columns follow the Standard Workload Format: `submit` (field 2), `wait_time` (3: the
    wait the site's scheduler gave the job, its recorded schedule), `runtime` (4),
    `procs` = max(allocated (5), requested (8)), `requested_time` (9, or runtime when
    not > 0), `user` (12), `group` (13), `queue` (15); -1 means unknown. Without
    `wait_time` every job's is -1 (a source with no recorded schedule: the generator).
    """

    id: np.ndarray
    submit: np.ndarray
    runtime: np.ndarray
    requested_time: np.ndarray
    procs: np.ndarray
    user: np.ndarray
    group: np.ndarray
    queue: np.ndarray
    machine_procs: int
    dropped: dict[str, int] = field(default_factory=dict)
    source: str = "<memory>"
    wait_time: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.wait_time is None:  # frozen: set once, here
            object.__setattr__(self, "wait_time", np.full(len(self.id), -1.0))

    def __len__(self) -> int:
        return len(self.id)

    def slice(self, start: int, stop: int) -> Trace:
        """Jobs start .. stop-1, on the same machine."""
        columns = (
            "id", "submit", "runtime", "requested_time", "procs", "user", "group", "queue",
            "wait_time",
        )  # fmt: skip
        return replace(self, **{name: getattr(self, name)[start:stop] for name in columns})

    def core_columns(self) -> tuple[np.ndarray, ...]:
        """What the C++ core reads, in its argument order."""
        return (self.id, self.submit, self.runtime, self.requested_time, self.procs, self.user)


@dataclass(frozen=True)
class Cleaning:
    """What the drop rules and the ordering make of raw SWF-like columns."""

    order: np.ndarray  # the kept rows, in (submit, id) order
    procs: np.ndarray  # per raw row: max(allocated, requested)
    requested_time: np.ndarray  # per raw row: the request when > 0, else the runtime
    dropped: dict[str, int]
    machine_procs: int


def cleaning(
    columns: dict[str, np.ndarray],
    machine_procs: int | None = None,
    header_max_procs: int = -1,
    header_max_nodes: int = -1,
    source: str = "<memory>",
) -> Cleaning:
    """Applies the drop rules and the (submit, id) order of docs/simulation.md.

    `columns` holds `id`, `submit`, `runtime`, `allocated_procs`, `requested_procs` and
    `requested_time` (the raw field 9). The machine size is `machine_procs`, else
    `header_max_procs`, else `header_max_nodes`, else the largest job.
    """
    ids = np.asarray(columns["id"], dtype=np.int64)
    submit = np.asarray(columns["submit"], dtype=np.float64)
    runtime = np.asarray(columns["runtime"], dtype=np.float64)
    procs = np.maximum(columns["allocated_procs"], columns["requested_procs"]).astype(np.int64)
    raw_request = np.asarray(columns["requested_time"], dtype=np.float64)
    requested = np.where(raw_request > 0, raw_request, runtime)

    negative_runtime = runtime < 0
    no_procs = ~negative_runtime & (procs <= 0)
    valid = ~negative_runtime & ~no_procs
    if machine_procs is not None and machine_procs <= 0:
        raise TraceError(f"machine size must be a positive number of procs, not {machine_procs}")
    machine = machine_procs or (header_max_procs if header_max_procs > 0 else header_max_nodes)
    if machine <= 0:  # the largest job sizes the machine (0 when no job is valid)
        machine = int(procs[valid].max(initial=0))
    too_large = valid & (procs > machine)
    keep = valid & ~too_large
    dropped = {
        "negative_runtime": int(negative_runtime.sum()),
        "no_procs": int(no_procs.sum()),
        "too_large": int(too_large.sum()),
    }
    if not keep.any():
        raise TraceError(_nothing_kept(source, len(ids), dropped, machine, procs[valid]))
    order = np.flatnonzero(keep)
    order = order[np.lexsort((ids[order], submit[order]))]
    return Cleaning(order, procs, requested, dropped, int(machine))


def _nothing_kept(
    source: str, jobs: int, dropped: dict[str, int], machine: int, valid_procs: np.ndarray
) -> str:
    """Why a trace has no job left: how many each drop rule took."""
    if jobs == 0:
        return f"{source}: the trace has no jobs"
    reasons = {"negative_runtime": "with a negative runtime", "no_procs": "with no procs"}
    if dropped["too_large"]:
        reasons["too_large"] = (
            f"larger than the machine ({machine} procs; the smallest needs {valid_procs.min()})"
        )
    counts = ", ".join(f"{n} {reasons[reason]}" for reason, n in dropped.items() if n)
    return f"{source}: every one of the {jobs} jobs was dropped: {counts}"


def clean(
    columns: dict[str, np.ndarray],
    machine_procs: int | None = None,
    header_max_procs: int = -1,
    header_max_nodes: int = -1,
    source: str = "<memory>",
) -> Trace:
    """A Trace of raw SWF-like columns (see `cleaning`); `user`, `group`, `queue` and
    `wait_time` optional."""
    c = cleaning(columns, machine_procs, header_max_procs, header_max_nodes, source)
    return cleaned_trace(columns, c, source)


def cleaned_trace(columns: dict[str, np.ndarray], c: Cleaning, source: str) -> Trace:
    """The Trace that a cleaning of `columns` keeps."""

    def column(name: str) -> np.ndarray:
        values = columns.get(name)
        if values is None:
            return np.full(len(c.order), -1, dtype=np.int64)
        return np.asarray(values, dtype=np.int64)[c.order]

    wait_time = columns.get("wait_time")
    return Trace(
        id=np.asarray(columns["id"], dtype=np.int64)[c.order],
        submit=np.asarray(columns["submit"], dtype=np.float64)[c.order],
        runtime=np.asarray(columns["runtime"], dtype=np.float64)[c.order],
        requested_time=c.requested_time[c.order],
        procs=c.procs[c.order].astype(np.int32),
        user=column("user"),
        group=column("group"),
        queue=column("queue"),
        machine_procs=c.machine_procs,
        dropped=c.dropped,
        source=source,
        wait_time=None if wait_time is None else np.asarray(wait_time, np.float64)[c.order],
    )
