"""The partitioned HDF5 trace store (ARCHITECTURE.md, "HDF5 trace store").

A dataset directory holds `manifest.json` and partitions `part-00000.h5`, ...: one chunked,
LZF-compressed dataset per job column, jobs in (submit, id) order, each partition a
contiguous range of them. Readers stream a rank's partitions chunk by chunk with bounded
memory, and verify each partition before its first read; the writer is in `writer.py`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np

from ddppo_hpc.data.manifest import (
    CORE_COLUMNS,
    MANIFEST,
    OPTIONAL_COLUMNS,
    manifest_problems,
    read_manifest,
)
from ddppo_hpc.data.trace import Trace, TraceError
from ddppo_hpc.io import reason

CHUNK_ROWS = 1 << 16  # rows per HDF5 chunk, and per streamed chunk
# LZF (shipped with h5py; other HDF5 tools need its filter plugin) writes twice as fast as
# gzip level 1 with shuffle, for files about twice as large: conversion speed matters more.
COMPRESSION = "lzf"


def partition_name(k: int) -> str:
    return f"part-{k:05d}.h5"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class TraceStore:
    """A dataset directory, opened by its manifest (checked whole when opened). Each
    partition is verified (sha256, columns, lengths) before its first read, once per store:
    a damaged file is refused, never read."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        where = self.path / MANIFEST
        self.manifest = read_manifest(where)
        problems = manifest_problems(self.manifest, where)
        if problems:
            raise TraceError(problems[0])
        self.partitions: list[dict] = self.manifest["partitions"]
        self.machine_procs: int = self.manifest["machine"]["procs"]
        self._verified: set[int] = set()

    def __len__(self) -> int:
        return int(self.manifest["jobs"])

    def partitions_for(self, rank: int, world: int) -> list[int]:
        """A rank's own partitions: a contiguous block, so its jobs form one stretch of time;
        with more ranks than partitions, ranks share them."""
        count = len(self.partitions)
        if world <= count:
            return list(range(rank * count // world, (rank + 1) * count // world))
        return [rank % count]

    def _open_file(self, k: int) -> h5py.File:
        path = self.path / self.partitions[k]["file"]
        try:
            return h5py.File(path, "r")
        except FileNotFoundError:
            raise TraceError(f"{path}: missing partition") from None
        except OSError as e:
            raise TraceError(f"{path}: unreadable partition (truncated?): {e}") from None

    def _open(self, k: int) -> h5py.File:
        """Partition k, verified the first time."""
        if k not in self._verified:
            self._verify(k)
            self._verified.add(k)
        return self._open_file(k)

    def _verify(self, k: int) -> None:
        """Raises unless partition k has its manifest checksum and the manifest's columns,
        dtypes and length."""
        part = self.partitions[k]
        path = self.path / part["file"]
        try:
            digest = sha256_of(path)
        except FileNotFoundError:
            raise TraceError(f"{path}: missing partition") from None
        except OSError as e:
            raise TraceError(f"{path}: unreadable partition: {reason(e)}") from None
        if digest != part["sha256"]:
            raise TraceError(f"{path}: checksum mismatch (altered or truncated)")
        with self._open_file(k) as f:
            for name, dtype in self.manifest["columns"].items():
                column = f.get(name)
                if not isinstance(column, h5py.Dataset):
                    raise TraceError(f"{path}: column {name} is missing")
                if column.shape != (part["jobs"],):
                    raise TraceError(
                        f"{path}: {name} has {column.shape[0] if column.shape else 0} rows, "
                        f"the manifest says {part['jobs']}"
                    )
                if column.dtype != np.dtype(dtype):
                    raise TraceError(f"{path}: {name} is {column.dtype}, the manifest says {dtype}")

    def read(
        self, k: int, start: int = 0, stop: int | None = None, columns=tuple(CORE_COLUMNS)
    ) -> dict[str, np.ndarray]:
        """Rows [start, stop) of partition k."""
        path = self.path / self.partitions[k]["file"]
        with self._open(k) as f:
            try:
                return {name: f[name][start:stop] for name in columns}
            except (OSError, KeyError) as e:
                raise TraceError(f"{path}: unreadable column data: {e}") from None

    def stream(
        self,
        partitions: list[int] | None = None,
        columns=tuple(CORE_COLUMNS),
        chunk_rows: int = CHUNK_ROWS,
    ) -> Iterator[dict[str, np.ndarray]]:
        """Column chunks of the given partitions (all by default), in order."""
        for k in range(len(self.partitions)) if partitions is None else partitions:
            rows = self.partitions[k]["jobs"]
            for start in range(0, rows, chunk_rows):
                yield self.read(k, start, min(rows, start + chunk_rows), columns)

    def trace(self, start: int = 0, jobs: int | None = None) -> Trace:
        """Jobs start .. start+jobs-1 of the whole store as a Trace (for the simulator), with
        the recorded waits when the store has them."""
        optional = [name for name in OPTIONAL_COLUMNS if name in self.manifest["columns"]]
        return self.as_trace(self.columns(start, jobs, (*CORE_COLUMNS, *optional)))

    def columns(
        self, start: int = 0, jobs: int | None = None, names=tuple(CORE_COLUMNS)
    ) -> dict[str, np.ndarray]:
        """The named columns of jobs start .. start+jobs-1 of the whole store."""
        if not 0 <= start < len(self):
            raise TraceError(f"--start {start} is outside the dataset's {len(self)} jobs")
        if jobs is not None and jobs < 1:
            raise TraceError(f"{self.path}: a window needs at least one job, not {jobs}")
        stop = len(self) if jobs is None else min(len(self), start + jobs)
        pieces = []
        for k, part in enumerate(self.partitions):
            first, rows = part["first_job"], part["jobs"]
            lo, hi = max(start, first), min(stop, first + rows)
            if lo < hi:
                pieces.append(self.read(k, lo - first, hi - first, names))
        return {name: np.concatenate([p[name] for p in pieces]) for name in names}

    def as_trace(self, columns: dict[str, np.ndarray]) -> Trace:
        """A Trace of read columns: the core ones, and `wait_time` if read (else -1)."""
        return Trace(
            **{name: columns[name] for name in CORE_COLUMNS},
            machine_procs=self.machine_procs,
            dropped=dict(self.manifest.get("dropped", {})),
            source=str(self.path),
            wait_time=columns.get("wait_time"),
        )

    def validate(self) -> list[str]:
        """Every partition's problems: missing, altered, wrong columns or lengths, submit
        times that go backwards, procs outside 1..machine."""
        problems = []
        last_submit = -np.inf
        for k in range(len(self.partitions)):
            try:
                self._open(k).close()
                last_submit = self._check_jobs(k, last_submit)
            except TraceError as e:
                problems.append(str(e))
        return problems

    def _check_jobs(self, k: int, last_submit: float) -> float:
        """Raises at partition k's first job out of submit order or machine; returns its
        last submit time."""
        part = self.partitions[k]
        path = self.path / part["file"]
        for start in range(0, part["jobs"], CHUNK_ROWS):
            chunk = self.read(k, start, start + CHUNK_ROWS, ("submit", "procs"))
            submit, procs = chunk["submit"], chunk["procs"]
            if submit[0] < last_submit or np.any(np.diff(submit) < 0):
                raise TraceError(f"{path}: submit times go backwards")
            outside = np.flatnonzero((procs < 1) | (procs > self.machine_procs))
            if outside.size:
                row = outside[0]
                raise TraceError(
                    f"{path}: procs outside 1..{self.machine_procs} "
                    f"({procs[row]} at job {part['first_job'] + start + row})"
                )
            last_submit = submit[-1]
        return last_submit


def validate(path: str | Path) -> list[str]:
    """Every problem of a dataset directory: its manifest's, else its partitions'."""
    where = Path(path) / MANIFEST
    return manifest_problems(read_manifest(where), where) or TraceStore(path).validate()
