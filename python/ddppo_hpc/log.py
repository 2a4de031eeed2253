"""The package's logger: progress for the person running the job, on standard error. Under a
launcher only rank 0 logs progress (progress.is_rank0(), as for Progress lines); every rank
keeps its warnings and errors."""

from __future__ import annotations

import logging
import sys

from ddppo_hpc.progress import is_rank0

logger = logging.getLogger("ddppo_hpc")


class _Stderr(logging.Handler):
    """The message alone, to the standard error of the moment (so tests can capture it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(record.getMessage(), file=sys.stderr, flush=True)


logger.addHandler(_Stderr())
logger.setLevel(logging.INFO if is_rank0() else logging.WARNING)
logger.propagate = False
