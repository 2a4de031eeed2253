"""Make the helpers in tests/ (reference_sim, cases) importable from every test."""

import sys
from pathlib import Path

_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


def traces_dir() -> Path:
    """The shared real traces (../shared/traces from the project root, or $DDPPO_TRACES)."""
    import os

    root = Path(__file__).resolve().parent.parent
    return Path(os.environ.get("DDPPO_TRACES", root.parent / "shared" / "traces"))
