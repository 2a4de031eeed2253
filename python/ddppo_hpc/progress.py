"""Progress lines for long work, on stderr, from rank 0 only."""

from __future__ import annotations

import os
import sys
import time

# Launchers' rank variables: Open MPI, MPICH/Intel MPI (PMI), Slurm.
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def is_rank0() -> bool:
    return all(os.environ.get(name, "0") == "0" for name in _RANK_VARIABLES)


class Progress:
    """`update(done)` prints "label: 42% (4.2M/10M jobs, 3.1 s)" at most every `every` s,
    once the work has taken a second; a terminal gets one rewritten line."""

    def __init__(self, label: str, total: int, unit: str, every: float = 2.0):
        self.label, self.total, self.unit, self.every = label, total, unit, every
        self.start = self.last = time.monotonic()
        self.shown = False
        self.quiet = not is_rank0()
        self.tty = sys.stderr.isatty()

    def update(self, done: int) -> None:
        now = time.monotonic()
        if self.quiet or now - self.start < 1 or now - self.last < self.every:
            return
        self.last = now
        self._show(done, now)

    def done(self) -> None:
        if self.shown:
            self._show(self.total, time.monotonic())
            if self.tty:
                sys.stderr.write("\n")

    def _show(self, done: int, now: float) -> None:
        self.shown = True
        percent = 100 * done / max(self.total, 1)
        line = (
            f"{self.label}: {percent:3.0f}% ({_short(done)}/{_short(self.total)} {self.unit}, "
            f"{now - self.start:.1f} s)"
        )
        sys.stderr.write(f"\r{line}" if self.tty else f"{line}\n")
        sys.stderr.flush()


def _short(n: int) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f}{suffix}"
    return str(n)
