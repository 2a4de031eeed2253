"""Writing a dataset directory (see `store`): into a temporary directory beside the target,
renamed onto it at the end, so that an interrupted or failed run (killed, a full disk)
leaves no dataset behind and a dataset replaced with --force stays until the new one is in
place."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import h5py
import numpy as np

from ddppo_hpc import __version__
from ddppo_hpc.data.manifest import CORE_COLUMNS, MANIFEST, SCHEMA_VERSION
from ddppo_hpc.data.store import CHUNK_ROWS, COMPRESSION, partition_name, sha256_of
from ddppo_hpc.data.trace import TraceError
from ddppo_hpc.io import output_errors


def check_output(out_dir: Path, force: bool, inputs: Sequence[Path] = ()) -> None:
    """A writer may create `out_dir`, or replace a dataset there with --force; nothing else:
    not a file or a directory without a manifest, not the working directory or one above
    it, not a directory that holds one of the inputs."""
    if not out_dir.exists() and not out_dir.is_symlink():
        return
    if out_dir.is_symlink() or not (out_dir / MANIFEST).is_file():
        raise TraceError(
            f"{out_dir}: exists and is not a dataset (no {MANIFEST}); choose another OUT_DIR"
        )
    if not force:
        raise TraceError(f"{out_dir}: exists; add --force to replace it")
    here = out_dir.resolve()
    if Path.cwd().is_relative_to(here):
        raise TraceError(f"{out_dir}: holds the current directory; --force will not replace it")
    for path in inputs:
        if Path(path).resolve().is_relative_to(here):
            raise TraceError(f"{out_dir}: holds the input {path}; --force will not replace it")


class _Sink(io.FileIO):
    """The file HDF5 writes a partition through. HDF5 (2.0) crashes closing a file after a
    failed write (a full disk), so a failure is kept here and never reported to HDF5: later
    writes are dropped, and the writer raises the first error once the file is closed."""

    error: OSError | None = None

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while self.error is None and done < len(view):
            try:
                done += super().write(view[done:])
            except OSError as e:
                self.error = e
        return len(view)

    def truncate(self, size: int | None = None) -> int:
        if self.error is None:
            try:
                return super().truncate(size)
            except OSError as e:
                self.error = e
        return self.tell() if size is None else size

    def close(self) -> None:
        """Syncs first: a file system may report a full disk only then."""
        if self.error is None and not self.closed:
            try:
                os.fsync(self.fileno())
            except OSError as e:
                self.error = e
        super().close()


class StoreWriter:
    """Writes `jobs` rows, appended in (submit, id) order, into `partitions` partitions.

    Use as a context manager; `finish(...)` writes the manifest and renames the temporary
    directory onto `out_dir`. Leaving the block without `finish`, or with an exception,
    removes everything written; a write that fails raises OutputError naming `out_dir`.
    `inputs` are the files read, which --force never deletes (see `check_output`).
    """

    def __init__(
        self,
        out_dir: str | Path,
        jobs: int,
        partitions: int,
        columns: dict[str, type],
        force: bool = False,
        inputs: Sequence[Path] = (),
    ):
        self.out_dir = Path(out_dir)
        if jobs <= 0:
            raise TraceError(f"{out_dir}: a dataset needs at least one job")
        if not 1 <= partitions <= jobs:
            raise TraceError(
                f"--partitions must be between 1 and the {jobs} jobs, not {partitions}"
            )
        check_output(self.out_dir, force, inputs)
        missing = set(CORE_COLUMNS) - set(columns)
        if missing:
            raise TraceError(f"store columns lack {', '.join(sorted(missing))}")
        self.columns = {name: np.dtype(t) for name, t in columns.items()}
        self.jobs = jobs
        self.bounds = [k * jobs // partitions for k in range(partitions + 1)]
        self.tmp = self.out_dir.parent / f".{self.out_dir.name}.tmp-{os.getpid()}"
        with output_errors(self.out_dir):
            _remove_stale_temporaries(self.out_dir)
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp.mkdir(parents=True)
        self.written = 0
        self.last_submit = -np.inf
        self.sink: _Sink | None = None
        self.file: h5py.File | None = None
        self.partition = -1
        self.parts: list[dict] = []

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc) -> None:
        self._close_partition()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def append(self, chunk: dict[str, np.ndarray]) -> None:
        """Adds the next rows; every column of the store must be there."""
        n = len(chunk["id"])
        if self.written + n > self.jobs:
            raise TraceError(f"{self.out_dir}: more than the announced {self.jobs} jobs")
        submit = chunk["submit"]
        if n and (submit[0] < self.last_submit or np.any(np.diff(submit) < 0)):
            raise TraceError(f"{self.out_dir}: jobs must be appended in submit order")
        with self._writing():
            self._write_rows(chunk)
        if n:
            self.last_submit = float(submit[-1])

    def _write_rows(self, chunk: dict[str, np.ndarray]) -> None:
        submit, done = chunk["submit"], 0
        while done < len(submit):
            if self.written == self.bounds[self.partition + 1] or self.file is None:
                self._next_partition()
            room = self.bounds[self.partition + 1] - self.written
            take = min(room, len(submit) - done)
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

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A failed write raises OutputError naming out_dir, never the temporary; once the
        sink has failed, its error is the cause of whatever HDF5 reports after it."""
        with output_errors(self.out_dir):
            try:
                yield
            except (OSError, RuntimeError):  # h5py raises either
                self._raise_write_error()
                raise
            self._raise_write_error()

    def _raise_write_error(self) -> None:
        if self.sink is not None and self.sink.error is not None:
            raise self.sink.error

    def _close_partition(self) -> None:
        if self.file is not None:
            self.file.close()
            self.sink.close()
            self.file = None

    def _next_partition(self) -> None:
        self._close_partition()
        self._raise_write_error()
        self.partition += 1
        rows = self.bounds[self.partition + 1] - self.bounds[self.partition]
        name = partition_name(self.partition)
        self.sink = _Sink(self.tmp / name, "w+")
        self.file = h5py.File(self.sink, "w")
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
        with self._writing():
            self._close_partition()
            self._raise_write_error()
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
            with open(self.tmp / MANIFEST, "w") as f:
                f.write(json.dumps(document, indent=1) + "\n")
                f.flush()
                os.fsync(f.fileno())
            self._publish()
        self.manifest = document
        return self.out_dir

    def _publish(self) -> None:
        """Renames the temporary onto out_dir; an old dataset there (--force) is renamed
        aside first and removed only once the new one is in place."""
        if not self.out_dir.exists():
            os.replace(self.tmp, self.out_dir)
            return
        old = self.tmp.with_name(f"{self.tmp.name}-old")
        os.replace(self.out_dir, old)
        try:
            os.replace(self.tmp, self.out_dir)
        except OSError:
            os.replace(old, self.out_dir)
            raise
        shutil.rmtree(old, ignore_errors=True)


def _remove_stale_temporaries(out_dir: Path) -> None:
    """Temporary directories of writers that were killed (their process is gone)."""
    prefix = f".{out_dir.name}.tmp-"
    for tmp in out_dir.parent.glob(f"{prefix}*"):
        pid = tmp.name[len(prefix) :].split("-")[0]  # .NAME.tmp-PID, or .NAME.tmp-PID-old
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(tmp, ignore_errors=True)
