"""The package's logger: progress for the person running the job, on standard error. Under
MPI only rank 0 logs progress (quiet(rank) on the others keeps their warnings and errors)."""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("ddppo_hpc")


class _Stderr(logging.Handler):
    """The message alone, to the standard error of the moment (so tests can capture it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(record.getMessage(), file=sys.stderr, flush=True)


logger.addHandler(_Stderr())
logger.setLevel(logging.INFO)
logger.propagate = False


def quiet(rank: int) -> None:
    """Progress from rank 0 only; every rank keeps its warnings and errors."""
    logger.setLevel(logging.INFO if rank == 0 else logging.WARNING)
