"""Writers that never leave a half-written file: write to a temp path, then rename. A write
that fails (a full disk, a read-only directory) raises OutputError naming the target, never
the hidden temp path, and leaves the previous file as it was."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import h5py


class OutputError(OSError):
    """An output that could not be written; the message names the target and why."""


def reason(error: OSError) -> str:
    """Why a read or write failed, in a few lowercase words ("no such file or directory");
    HDF5 reports errno only inside its message."""
    text = str(error)
    if error.errno == errno.ENOSPC or "errno = 28" in text or "No space left" in text:
        return "no space left on device"
    if error.errno:
        return os.strerror(error.errno).lower()
    return text.splitlines()[0] if text else type(error).__name__


@contextlib.contextmanager
def output_errors(target: str | Path) -> Iterator[None]:
    """Turns an OSError raised while writing `target` into one OutputError that names it."""
    try:
        yield
    except OutputError:
        raise
    except OSError as e:
        raise OutputError(f"{target}: cannot write: {reason(e)}") from None


def check_output(path: str | Path) -> None:
    """Refuses an output that could not be written, before the work that produces it: an
    existing directory, or a folder that is missing or takes no new file."""
    target = Path(path)
    with output_errors(target):
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        tempfile.TemporaryFile(dir=target.parent).close()


def not_an_input(out: str | Path, inputs: list) -> None:
    """Refuses an output that would replace one of the inputs: a file given as input, or a
    file inside an input directory (a trace store)."""
    target = Path(out).resolve()
    for given in map(Path, inputs):
        where = given.resolve()
        if target == where or (where.is_dir() and where in target.parents):
            raise OutputError(f"{out}: would replace {given}, an input: write it elsewhere")


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Opens a temp file beside `path`; renames it onto `path` only if the block succeeds."""
    path = Path(path)
    with output_errors(path):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, mode) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; give the usual mode of a new file
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


@contextlib.contextmanager
def atomic_hdf5(path: str | Path) -> Iterator[h5py.File]:
    """An h5py File built in memory, written onto `path` with atomic_write when the block
    succeeds. HDF5 itself then never meets a full disk (it crashes closing a file after a
    failed write): the failure is one plain write, and the previous file stays whole. For
    small files (results, metrics); stores stream through data.writer instead."""
    image = io.BytesIO()
    with h5py.File(image, "w") as f:
        yield f
    with atomic_write(path, "wb") as out:
        out.write(image.getbuffer())
