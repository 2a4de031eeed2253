"""Argument types shared by the command lines: a bad value is refused while parsing, with
argparse's one line (`prog: error: argument --procs: ...`) and exit code 2, before it can
overflow a C++ integer or fail deep inside a run; and how every command line is run."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import NoReturn

INT32_MAX = 2**31 - 1  # job sizes, machine sizes and counts are 32-bit in the simulator
SEED_MAX = 2**63 - 1


def bounded_int(low: int, high: int = INT32_MAX):
    """An argparse type: an integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value

    return parse


def bounded_float(low: float, high: float = math.inf):
    """An argparse type: a finite number in [low, high]."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside {low:g}..{high:g}")
        return value

    return parse


def names(choices: tuple[str, ...]):
    """An argparse type: a comma-separated list of names from `choices`."""

    def parse(text: str) -> list[str]:
        chosen = [name.strip() for name in text.split(",") if name.strip()]
        unknown = [name for name in chosen if name not in choices]
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown) or 'empty list'} (choose from {','.join(choices)})"
            )
        return list(dict.fromkeys(chosen))

    return parse


def run(main: Callable[[], int]) -> NoReturn:
    """Exits with `main()`'s code. A reader that stops early (`| head`) closes the pipe: the
    command then ends quietly with 141 (128 + SIGPIPE, as a shell reports a command killed
    by it), never with a traceback."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        code = 141
    raise SystemExit(code)
