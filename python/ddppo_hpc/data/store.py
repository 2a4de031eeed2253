"""The partitioned HDF5 trace store (ARCHITECTURE.md, "HDF5 trace store").

A dataset directory holds `manifest.json` and partitions `part-00000.h5`, ...: one chunked,
LZF-compressed dataset per job column, jobs in (submit, id) order, each partition a
contiguous range of them. Writers fill a temporary directory beside the target and rename
it at the end, so an interrupted run leaves no dataset behind. Readers stream a rank's
partitions chunk by chunk with bounded memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np

from ddppo_hpc import __version__
from ddppo_hpc.data.trace import Trace, TraceError

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
CHUNK_ROWS = 1 << 16  # rows per HDF5 chunk, and per streamed chunk
# LZF (shipped with h5py; other HDF5 tools need its filter plugin) writes twice as fast as
# gzip level 1 with shuffle, for files about twice as large: conversion speed matters more.
COMPRESSION = "lzf"
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


def partition_name(k: int) -> str:
    return f"part-{k:05d}.h5"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class StoreWriter:
    """Writes `jobs` rows, appended in (submit, id) order, into `partitions` partitions.

    Use as a context manager; `finish(...)` writes the manifest and renames the temporary
    directory onto `out_dir`. Leaving the block without `finish`, or with an exception,
    removes everything written.
    """

    def __init__(
        self,
        out_dir: str | Path,
        jobs: int,
        partitions: int,
        columns: dict[str, type],
        force: bool = False,
    ):
        self.out_dir = Path(out_dir)
        if jobs <= 0:
            raise TraceError(f"{out_dir}: a dataset needs at least one job")
        if not 1 <= partitions <= jobs:
            raise TraceError(
                f"--partitions must be between 1 and the {jobs} jobs, not {partitions}"
            )
        if self.out_dir.exists() and not force:
            raise TraceError(f"{out_dir} exists; add --force to replace it")
        missing = set(CORE_COLUMNS) - set(columns)
        if missing:
            raise TraceError(f"store columns lack {', '.join(sorted(missing))}")
        self.columns = {name: np.dtype(t) for name, t in columns.items()}
        self.jobs = jobs
        self.bounds = [k * jobs // partitions for k in range(partitions + 1)]
        self.tmp = self.out_dir.parent / f".{self.out_dir.name}.tmp-{os.getpid()}"
        _remove_stale_temporaries(self.out_dir)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(parents=True)
        self.written = 0
        self.last_submit = -np.inf
        self.file: h5py.File | None = None
        self.partition = -1
        self.parts: list[dict] = []

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc) -> None:
        if self.file is not None:
            self.file.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def append(self, chunk: dict[str, np.ndarray]) -> None:
        """Adds the next rows; every column of the store must be there."""
        n = len(chunk["id"])
        if self.written + n > self.jobs:
            raise TraceError(f"{self.out_dir}: more than the announced {self.jobs} jobs")
        submit = chunk["submit"]
        if n and (submit[0] < self.last_submit or np.any(np.diff(submit) < 0)):
            raise TraceError(f"{self.out_dir}: jobs must be appended in submit order")
        done = 0
        while done < n:
            if self.written == self.bounds[self.partition + 1] or self.file is None:
                self._next_partition()
            room = self.bounds[self.partition + 1] - self.written
            take = min(room, n - done)
            first = self.written - self.bounds[self.partition]
            for name in self.columns:
                self.file[name][first : first + take] = chunk[name][done : done + take]
            span = self.parts[-1]["submit_range"]
            span[:] = [
                float(submit[done]) if first == 0 else span[0],
                float(submit[done + take - 1]),
            ]
            done += take
            self.written += take
        if n:
            self.last_submit = float(submit[-1])

    def _next_partition(self) -> None:
        if self.file is not None:
            self.file.close()
        self.partition += 1
        rows = self.bounds[self.partition + 1] - self.bounds[self.partition]
        name = partition_name(self.partition)
        self.file = h5py.File(self.tmp / name, "w")
        for column, dtype in self.columns.items():
            self.file.create_dataset(
                column,
                shape=(rows,),
                dtype=dtype,
                chunks=(min(rows, CHUNK_ROWS),),
                compression=COMPRESSION,
            )
        self.parts.append(
            {
                "file": name,
                "first_job": self.bounds[self.partition],
                "jobs": rows,
                "submit_range": [None, None],
            }
        )

    def finish(self, **manifest: object) -> Path:
        """Writes the manifest (with `manifest` fields added) and publishes the dataset."""
        if self.written != self.jobs:
            raise TraceError(f"{self.out_dir}: {self.written} jobs written of {self.jobs}")
        self.file.close()
        self.file = None
        for part in self.parts:
            part["sha256"] = sha256_of(self.tmp / part["file"])
        spans = [p["submit_range"] for p in self.parts]
        document = {
            "schema_version": SCHEMA_VERSION,
            "created_by": f"ddppo-hpc {__version__}",
            "jobs": self.jobs,
            "time_span": [spans[0][0], spans[-1][1]],
            "columns": {name: dtype.name for name, dtype in self.columns.items()},
            "compression": COMPRESSION,
            **manifest,
            "partitions": self.parts,
        }
        (self.tmp / MANIFEST).write_text(json.dumps(document, indent=1) + "\n")
        self.manifest = document
        if self.out_dir.exists():  # --force: the old dataset goes only now
            shutil.rmtree(self.out_dir)
        os.replace(self.tmp, self.out_dir)
        return self.out_dir


def _remove_stale_temporaries(out_dir: Path) -> None:
    """Temporary directories of writers that were killed (their process is gone)."""
    for tmp in out_dir.parent.glob(f".{out_dir.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(tmp, ignore_errors=True)


class TraceStore:
    """A dataset directory, opened by its manifest."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        manifest = self.path / MANIFEST
        try:
            self.manifest = json.loads(manifest.read_text())
        except FileNotFoundError:
            raise TraceError(f"{manifest}: no such file (not a dataset directory)") from None
        except (OSError, ValueError) as e:
            raise TraceError(f"{manifest}: unreadable: {e}") from None
        version = self.manifest.get("schema_version")
        if version != SCHEMA_VERSION:
            raise TraceError(
                f"{manifest}: schema version {version!r}, this ddppo-hpc reads {SCHEMA_VERSION}"
            )
        self.partitions: list[dict] = self.manifest["partitions"]
        self.machine_procs = int(self.manifest["machine"]["procs"])

    def __len__(self) -> int:
        return int(self.manifest["jobs"])

    def partitions_for(self, rank: int, world: int) -> list[int]:
        """A rank's own partitions: a contiguous block, so its jobs form one stretch of time;
        with more ranks than partitions, ranks share them."""
        count = len(self.partitions)
        if world <= count:
            return list(range(rank * count // world, (rank + 1) * count // world))
        return [rank % count]

    def rank_trace(self, rank: int, world: int) -> Trace:
        """A rank's share of the store as one Trace (its partitions are contiguous)."""
        mine = self.partitions_for(rank, world)
        first = self.partitions[mine[0]]["first_job"]
        return self.trace(first, sum(self.partitions[k]["jobs"] for k in mine))

    def _open(self, k: int) -> h5py.File:
        path = self.path / self.partitions[k]["file"]
        try:
            return h5py.File(path, "r")
        except FileNotFoundError:
            raise TraceError(f"{path}: missing partition") from None
        except OSError as e:
            raise TraceError(f"{path}: unreadable partition (truncated?): {e}") from None

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
        """Jobs start .. start+jobs-1 of the whole store as a Trace (for the simulator)."""
        return self.as_trace(self.columns(start, jobs))

    def columns(
        self, start: int = 0, jobs: int | None = None, names=tuple(CORE_COLUMNS)
    ) -> dict[str, np.ndarray]:
        """The named columns of jobs start .. start+jobs-1 of the whole store."""
        if not 0 <= start < len(self):
            raise TraceError(f"--start {start} is outside the dataset's {len(self)} jobs")
        stop = len(self) if jobs is None else min(len(self), start + jobs)
        pieces = []
        for k, part in enumerate(self.partitions):
            first, rows = part["first_job"], part["jobs"]
            lo, hi = max(start, first), min(stop, first + rows)
            if lo < hi:
                pieces.append(self.read(k, lo - first, hi - first, names))
        return {name: np.concatenate([p[name] for p in pieces]) for name in names}

    def as_trace(self, columns: dict[str, np.ndarray]) -> Trace:
        return Trace(
            **{name: columns[name] for name in CORE_COLUMNS},
            machine_procs=self.machine_procs,
            dropped=dict(self.manifest.get("dropped", {})),
            source=str(self.path),
        )

    def validate(self) -> list[str]:
        """Every problem found: missing or altered partitions, wrong lengths, disorder."""
        problems = []
        last_submit = -np.inf
        for k, part in enumerate(self.partitions):
            path = self.path / part["file"]
            if not path.exists():
                problems.append(f"{path}: missing partition")
                continue
            if sha256_of(path) != part["sha256"]:
                problems.append(f"{path}: checksum mismatch (altered or truncated)")
                continue
            for chunk in self.stream([k], columns=("submit",)):
                submit = chunk["submit"]
                if submit[0] < last_submit or np.any(np.diff(submit) < 0):
                    problems.append(f"{path}: submit times go backwards")
                    break
                last_submit = submit[-1]
            with self._open(k) as f:
                lengths = {len(f[name]) for name in self.manifest["columns"] if name in f}
                absent = [name for name in self.manifest["columns"] if name not in f]
            if absent:
                problems.append(f"{path}: columns missing: {', '.join(absent)}")
            if lengths != {part["jobs"]}:
                problems.append(f"{path}: {sorted(lengths)} rows, the manifest says {part['jobs']}")
        return problems
