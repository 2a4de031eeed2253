"""Test helpers: tests/ on the import path (reference_sim, cases, simhelpers), a small real
disk to fill (the writers' no-space-left tests), and simhelpers' Philly extract as a file."""

import subprocess
import sys
from pathlib import Path

import pytest

_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


@pytest.fixture
def small_disk(tmp_path):
    """`small_disk(kib)`: a directory on a tmpfs of that size, to fill up (ENOSPC) for real;
    unmounted after the test. Needs root (CI runs as root); skipped where mount is refused."""
    mounts = []

    def make(kib: int) -> Path:
        where = tmp_path / f"disk{len(mounts)}"
        where.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
        mounts.append(where)
        return where

    yield make
    for where in mounts:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def philly(tmp_path):
    """simhelpers.PHILLY written as a Philly CSV."""
    from simhelpers import PHILLY

    path = tmp_path / "philly.csv"
    path.write_text(PHILLY)
    return path
