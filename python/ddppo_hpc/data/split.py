"""Splits by time (ARCHITECTURE.md): every trace source's jobs, in submit order, fall into a
train, a validation and a test part. Training sees only the train part, model choice uses
validation, reported numbers use test (docs/simulation.md, "Splits")."""

from __future__ import annotations

import math
from fractions import Fraction

PARTS = ("train", "validation", "test")
DEFAULT_SPLIT = (0.7, 0.1, 0.2)


def split_problem(fractions: object) -> str | None:
    """What is wrong with `fractions` as a split (None when nothing is): three numbers, none
    negative, a train part, summing to 1."""
    if not isinstance(fractions, (list, tuple)) or len(fractions) != 3:
        return f"must be three fractions (train, validation, test), not {fractions!r}"
    if not all(isinstance(f, (int, float)) and not isinstance(f, bool) for f in fractions):
        return f"must be three numbers, not {fractions!r}"
    if not all(math.isfinite(f) and f >= 0 for f in fractions):
        return f"fractions must be finite and not negative, not {list(fractions)}"
    if fractions[0] <= 0:
        return f"the train fraction must be positive, not {fractions[0]}"
    if abs(sum(fractions) - 1) > 1e-6:
        return f"fractions must sum to 1, not {sum(fractions):g} ({list(fractions)})"
    return None


def part_range(jobs: int, fractions, part: str) -> tuple[int, int]:
    """Jobs [first, stop) of `part` in a trace of `jobs` jobs: train is [0, floor(f_train *
    jobs)), validation follows up to floor((f_train + f_validation) * jobs), test is the rest.
    Fractions count as the decimals they are written as (0.7 + 0.1 is exactly 0.8)."""
    train, validation = (Fraction(str(f)) for f in fractions[:2])
    bounds = (0, math.floor(train * jobs), math.floor((train + validation) * jobs), jobs)
    k = PARTS.index(part)
    return bounds[k], bounds[k + 1]


def rank_block(first: int, stop: int, rank: int, size: int) -> tuple[int, int]:
    """Rank `rank`'s contiguous share [first, stop) of jobs first .. stop-1 among `size`."""
    n = stop - first
    return first + rank * n // size, first + (rank + 1) * n // size


def describe(part: str, first: int, stop: int, jobs: int, fractions) -> str:
    """`test part: jobs 8000 .. 9999 of 10000 (split 0.7/0.1/0.2)`, or `test part: no jobs
    of 10000 (split 1/0/0)`."""
    written = "/".join(f"{f:g}" for f in fractions)
    which = f"jobs {first} .. {stop - 1}" if stop > first else "no jobs"
    return f"{part} part: {which} of {jobs} (split {written})"
