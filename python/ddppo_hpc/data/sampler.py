"""Training episodes from a rank's partitions of a trace store."""

from __future__ import annotations

import numpy as np

from ddppo_hpc.data.store import TraceStore
from ddppo_hpc.data.trace import Trace, TraceError


class EpisodeSampler:
    """Windows of `window_jobs` consecutive jobs at seeded random starts.

    A window lies inside one partition: partitions are chosen in proportion to the number
    of windows they hold, so every start in the rank's share is equally likely. Each sample
    reads only its own rows (HDF5 hyperslabs), never a whole partition.
    """

    def __init__(self, store: TraceStore, partitions: list[int], window_jobs: int, seed: int):
        if window_jobs <= 0:
            raise TraceError(f"episode windows need at least one job, not {window_jobs}")
        self.store = store
        self.window_jobs = window_jobs
        self.partitions = [k for k in partitions if store.partitions[k]["jobs"] >= window_jobs]
        if not self.partitions:
            largest = max(store.partitions[k]["jobs"] for k in partitions)
            raise TraceError(
                f"{store.path}: no partition of this rank holds {window_jobs} jobs "
                f"(the largest holds {largest}); use fewer partitions or shorter episodes"
            )
        starts = np.array([store.partitions[k]["jobs"] - window_jobs + 1 for k in self.partitions])
        self.weights = starts / starts.sum()
        self.rng = np.random.default_rng(seed)

    def sample(self) -> Trace:
        k = self.partitions[self.rng.choice(len(self.partitions), p=self.weights)]
        start = int(self.rng.integers(0, self.store.partitions[k]["jobs"] - self.window_jobs + 1))
        return self.store.as_trace(self.store.read(k, start, start + self.window_jobs))
