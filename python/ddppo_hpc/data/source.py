"""The jobs a run takes from its trace sources (`data.trace`: the embedded workload, an SWF
file or a dataset directory, or a weighted list of them), split by time (`data.split`,
data/split.py)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from ddppo_hpc.data.split import describe, part_range, rank_block
from ddppo_hpc.data.store import TraceStore
from ddppo_hpc.data.swf import read_swf
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.data.trace import Trace, TraceError


def embedded_workload(data) -> Trace:
    """The embedded synthetic workload of a `DataConfig`: the same jobs on every rank and in
    every command that reads the run's config."""
    return generate(data.synthetic_jobs, machine_procs=data.machine_procs, seed=data.synthetic_seed)


def whole_trace(path: str | None, data) -> Trace:
    """Every job of the SWF file or dataset directory at `path`, or of `data`'s embedded
    workload when `path` is None."""
    if path is None:
        return embedded_workload(data)
    return TraceStore(path).trace() if Path(path).is_dir() else read_swf(path)


EMBEDDED = "synthetic"  # the name of the embedded workload among the sources


@dataclass(frozen=True)
class Source:
    """One entry of `data.trace`: a path (None: the embedded workload) and the share of a
    rank's environments that train on it."""

    path: str | None
    weight: float = 1.0

    @property
    def name(self) -> str:
        return self.path or EMBEDDED


def _entries(value: object) -> list[tuple[object, object]]:
    """(path, weight) of each entry of a `data.trace` value (a weight defaults to 1)."""
    entries = value if isinstance(value, list) else [value]
    return [(e.get("path"), e.get("weight", 1)) if isinstance(e, dict) else (e, 1) for e in entries]


def _positive(value: object) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and math.isfinite(value) and value > 0


def source_problem(value: object) -> str | None:
    """What is wrong with `value` as `data.trace` (None when nothing is): a source (a path or
    "synthetic"), or a non-empty list of sources or {path: P, weight: W} entries, W > 0."""
    if value == []:
        return "must name a trace source, not an empty list"
    for entry in value if isinstance(value, list) else [value]:
        if isinstance(entry, dict) and set(entry) - {"path", "weight"}:
            return f"an entry has the keys path and weight only, not {sorted(entry)}"
    for path, weight in _entries(value):
        if not isinstance(path, str) or not path:
            return f"a source is a path or {EMBEDDED!r}, not {path!r}"
        if not _positive(weight):
            return f"the weight of {path} must be a positive number, not {weight!r}"
    return None


def load_scale_problem(value: object) -> str | None:
    """What is wrong with `value` as `data.load_scale`: a non-empty list of positive
    numbers."""
    if not isinstance(value, list) or not value or not all(_positive(f) for f in value):
        return f"must be a list of positive submit-time factors, e.g. [0.7, 1.0], not {value!r}"
    return None


def sources(data) -> list[Source]:
    """`data.trace` as sources (one for a plain path); checked by `source_problem`."""
    return [Source(None if p == EMBEDDED else p, float(w)) for p, w in _entries(data.trace)]


def at_load(trace: Trace, factor: float) -> Trace:
    """`trace` with its submit times x `factor` (below 1: the same jobs arrive faster, a
    higher offered load)."""
    return trace if factor == 1 else dataclasses.replace(trace, submit=trace.submit * factor)


def part_trace(
    source: Source, data, part: str, rank: int = 0, size: int = 1
) -> tuple[Trace, tuple[int, int], int]:
    """Rank `rank`'s contiguous block of `part` of `source` (all of it at size 1), the part's
    [first, stop) and the trace's job count: a store reads only the block's rows."""
    path = source.path
    store = TraceStore(path) if path is not None and Path(path).is_dir() else None
    whole = None if store else whole_trace(path, data)
    total = len(store or whole)
    bounds = part_range(total, data.split, part)
    first, stop = rank_block(*bounds, rank, size)
    if stop == first:
        raise TraceError(
            f"{source.name}: rank {rank} of {size} gets no jobs of the "
            f"{describe(part, *bounds, total, data.split)}"
        )
    return (store.trace(first, stop - first) if store else whole.slice(first, stop)), bounds, total


def rank_train_trace(source: Source, data, rank: int, size: int, window_jobs: int) -> Trace:
    """Rank `rank`'s block of the train part of `source`; TraceError when it holds fewer
    than `window_jobs` jobs."""
    trace, train, total = part_trace(source, data, "train", rank, size)
    if len(trace) < window_jobs:
        raise TraceError(
            f"{source.name}: rank {rank} of {size} gets {len(trace)} jobs of the "
            f"{describe('train', *train, total, data.split)}, fewer than env.window_jobs "
            f"({window_jobs}); use a longer trace (data.synthetic_jobs), a larger train "
            "fraction (data.split), fewer ranks or shorter episodes"
        )
    return trace
