"""Standard Workload Format files, plain or gzip-compressed, parsed by the C++ core."""

from __future__ import annotations

import gzip
import re
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddppo_hpc import _core
from ddppo_hpc.data.trace import Cleaning, Trace, TraceError, cleaned_trace, cleaning
from ddppo_hpc.io import reason

# The 18 SWF fields, in order, by the names the project uses: those the simulation contract
# names keep its names (field 9, the user's estimate, is `swf_requested_time`, as the
# contract's `requested_time` falls back to the runtime).
SWF_COLUMNS = (
    "id", "submit", "wait_time", "runtime", "allocated_procs", "average_cpu_time",
    "used_memory", "requested_procs", "swf_requested_time", "requested_memory", "status",
    "user", "group", "executable", "queue", "partition", "preceding_job", "think_time",
)  # fmt: skip
INTEGER_COLUMNS = frozenset(
    ("id", "allocated_procs", "requested_procs", "status", "user", "group", "executable",
     "queue", "partition", "preceding_job")
)  # fmt: skip

GZIP_MAGIC = b"\x1f\x8b"
# Longest stretch without a line break a text log may have: SWF and CSV lines are a few
# hundred bytes; a file without one is not a log (and would make a message that long).
MAX_LINE = 1 << 16
_LINE_ERROR = re.compile(r"line (\d+): (.*)", re.DOTALL)
_HEADER_VALUE = re.compile(r"\s*(\w+)\s*:\s*(.*?)\s*$")


@dataclass(frozen=True)
class SwfLog:
    """A parsed SWF file: its 18 columns in file order and its header lines."""

    path: str
    columns: dict[str, np.ndarray]
    header: list[str]
    skipped: int  # malformed lines passed over with skip_bad

    def header_int(self, key: str) -> int:
        """A positive integer header value (`; MaxProcs: 1024`), else -1."""
        for line in self.header:
            match = _HEADER_VALUE.match(line)
            if match and match[1] == key and match[2].lstrip("-").isdigit():
                return max(int(match[2]), -1)
        return -1


def read_bytes(path: str | Path, limit: int = -1) -> bytes:
    """A text log's bytes (its first `limit` with a limit), decompressed when it is gzip (by
    its magic number, not its name). Anything else (a device, a pipe, a directory, binary
    data, no line break) is refused with one line naming the file, before it is read whole."""
    path = Path(path)
    _check_regular(path)
    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == GZIP_MAGIC
            f.seek(0)
            data = (gzip.GzipFile(fileobj=f) if gzipped else f).read(limit)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise TraceError(f"{path}: corrupt gzip data: {e}") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {reason(e)}") from None
    _check_text(path, data)
    return data


def _check_regular(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {reason(e)}") from None
    if not stat.S_ISREG(mode):
        raise TraceError(f"{path}: not a regular file; give a text log")


def _check_text(path: Path, data: bytes) -> None:
    """Text logs have no NUL byte and short lines; looking costs a memchr per MAX_LINE."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise TraceError(f"{path}: binary data (a NUL byte at offset {nul}); give a text log")
    for start in range(0, len(data) - MAX_LINE + 1, MAX_LINE):
        if data.find(b"\n", start, start + MAX_LINE) < 0:
            raise TraceError(
                f"{path}: no line break within {MAX_LINE >> 10} KiB (from byte {start}); "
                "give a text log"
            )


def parse_swf(path: str | Path, skip_bad: bool = False) -> SwfLog:
    """Parses an SWF log; a malformed line raises `file:line: field ...` unless skip_bad."""
    text = read_bytes(path)
    try:
        fields, header, skipped = _core.parse_swf(text, skip_bad)
    except ValueError as e:
        match = _LINE_ERROR.match(str(e))
        raise TraceError(f"{path}:{match[1]}: {match[2]}" if match else f"{path}: {e}") from None
    columns = {
        name: values.astype(np.int64) if name in INTEGER_COLUMNS else values
        for name, values in zip(SWF_COLUMNS, fields)
    }
    header = [line.decode("utf-8", errors="replace") for line in header]
    return SwfLog(str(path), columns, header, skipped)


def log_cleaning(log: SwfLog, machine_procs: int | None = None) -> Cleaning:
    """The drop rules and order for a parsed log, its machine from the option or header."""
    return cleaning(
        raw_columns(log),
        machine_procs,
        log.header_int("MaxProcs"),
        log.header_int("MaxNodes"),
        log.path,
    )


def raw_columns(log: SwfLog) -> dict[str, np.ndarray]:
    """The log's columns as `cleaning` reads them (field 9 as the raw `requested_time`)."""
    return dict(log.columns, requested_time=log.columns["swf_requested_time"])


def read_swf(path: str | Path, machine_procs: int | None = None, skip_bad: bool = False) -> Trace:
    """Reads and cleans an SWF log; errors name the file and line (`file:line: ...`)."""
    log = parse_swf(path, skip_bad)
    return cleaned_trace(raw_columns(log), log_cleaning(log, machine_procs), log.path)
