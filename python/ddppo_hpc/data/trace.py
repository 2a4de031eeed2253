"""A cleaned job trace: the SWF cleaning rules of docs/simulation.md over NumPy columns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DROP_REASONS = ("negative_runtime", "no_procs", "too_large")


class TraceError(ValueError):
    """A trace that cannot be used; the message names the file, line and field."""


@dataclass(frozen=True)
class Trace:
    """Jobs ordered by (submit, id), every one fitting the machine.

    Columns follow the Standard Workload Format: `submit` (field 2), `runtime` (4),
    `procs` = max(allocated (5), requested (8)), `requested_time` (9, or runtime when
    not > 0), `user` (12), `group` (13), `queue` (15); -1 means unknown.
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

    def __len__(self) -> int:
        return len(self.id)


def clean(
    columns: dict[str, np.ndarray],
    machine_procs: int | None = None,
    header_max_procs: int = -1,
    header_max_nodes: int = -1,
    source: str = "<memory>",
) -> Trace:
    """Applies the drop rules and the (submit, id) order to raw SWF columns.

    `columns` holds `id`, `submit`, `runtime`, `allocated_procs`, `requested_procs`,
    `requested_time` (the raw field 9) and optionally `user`, `group`, `queue`.
    The machine size is `machine_procs`, else `header_max_procs`, else `header_max_nodes`,
    else the largest job.
    """
    n = len(columns["id"])
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
    if machine <= 0:
        if not valid.any():
            raise TraceError(f"{source}: no job has a valid runtime and procs")
        machine = int(procs[valid].max())
    too_large = valid & (procs > machine)
    keep = valid & ~too_large
    if n and not keep.any():
        smallest = int(procs[valid].min()) if valid.any() else 0
        raise TraceError(
            f"{source}: the machine ({machine} procs) is smaller than every job"
            + (f" (the smallest needs {smallest})" if smallest else "")
        )
    if not keep.any():
        raise TraceError(f"{source}: the trace has no jobs")

    order = np.flatnonzero(keep)
    order = order[np.lexsort((ids[order], submit[order]))]

    def column(name: str) -> np.ndarray:
        values = columns.get(name)
        if values is None:
            return np.full(len(order), -1, dtype=np.int64)
        return np.asarray(values, dtype=np.int64)[order]

    return Trace(
        id=ids[order],
        submit=submit[order],
        runtime=runtime[order],
        requested_time=requested[order],
        procs=procs[order].astype(np.int32),
        user=column("user"),
        group=column("group"),
        queue=column("queue"),
        machine_procs=int(machine),
        dropped={
            "negative_runtime": int(negative_runtime.sum()),
            "no_procs": int(no_procs.sum()),
            "too_large": int(too_large.sum()),
        },
        source=source,
    )
