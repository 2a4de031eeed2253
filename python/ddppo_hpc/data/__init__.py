"""Workload data: SWF reading, cleaning, and the embedded synthetic generator."""

from ddppo_hpc.data.swf import read_swf
from ddppo_hpc.data.trace import DROP_REASONS, Trace, TraceError, clean

__all__ = ["DROP_REASONS", "Trace", "TraceError", "clean", "read_swf"]
