"""Standard Workload Format files, plain or gzip-compressed, parsed by the C++ core."""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

from ddppo_hpc import _core
from ddppo_hpc.data.trace import Trace, TraceError, clean

_LINE_ERROR = re.compile(r"line (\d+): (.*)", re.DOTALL)


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes, decompressed when it is gzip (by its magic number, not its name)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(f"{path}: corrupt gzip data: {e}") from None
    return data


def read_swf(path: str | Path, machine_procs: int | None = None) -> Trace:
    """Reads and cleans an SWF log; errors name the file and line (`file:line: ...`)."""
    try:
        columns = _core.parse_swf(read_bytes(path))
    except ValueError as e:
        match = _LINE_ERROR.match(str(e))
        raise TraceError(f"{path}:{match[1]}: {match[2]}" if match else f"{path}: {e}") from None
    return clean(
        columns,
        machine_procs=machine_procs,
        header_max_procs=columns.pop("max_procs"),
        header_max_nodes=columns.pop("max_nodes"),
        source=str(path),
    )
