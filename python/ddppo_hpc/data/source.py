"""The jobs a run takes from its trace source (`data.trace`): the embedded workload, an SWF
file or a dataset directory, split by time (`data.split`, data/split.py)."""

from __future__ import annotations

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


def source_path(data) -> str | None:
    """`data.trace` as a path, None for the embedded workload."""
    return None if data.trace == "synthetic" else data.trace


def part_trace(data, part: str, rank: int = 0, size: int = 1) -> tuple[Trace, tuple[int, int], int]:
    """Rank `rank`'s contiguous block of `part` of `data.trace` (all of it at size 1), the
    part's [first, stop) and the trace's job count: a store reads only the block's rows."""
    path = source_path(data)
    store = TraceStore(path) if path is not None and Path(path).is_dir() else None
    whole = None if store else whole_trace(path, data)
    total = len(store or whole)
    bounds = part_range(total, data.split, part)
    first, stop = rank_block(*bounds, rank, size)
    if stop == first:
        raise TraceError(
            f"{data.trace}: rank {rank} of {size} gets no jobs of the "
            f"{describe(part, *bounds, total, data.split)}"
        )
    return (store.trace(first, stop - first) if store else whole.slice(first, stop)), bounds, total


def rank_train_trace(data, rank: int, size: int, window_jobs: int) -> Trace:
    """Rank `rank`'s block of the train part; TraceError when it holds fewer than
    `window_jobs` jobs."""
    trace, train, total = part_trace(data, "train", rank, size)
    if len(trace) < window_jobs:
        raise TraceError(
            f"{data.trace}: rank {rank} of {size} gets {len(trace)} jobs of the "
            f"{describe('train', *train, total, data.split)}, fewer than env.window_jobs "
            f"({window_jobs}); use a longer trace (data.synthetic_jobs), a larger train "
            "fraction (data.split), fewer ranks or shorter episodes"
        )
    return trace
