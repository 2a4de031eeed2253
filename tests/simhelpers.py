"""Builds C++-side traces from the reference's Job lists, so both see the same jobs."""

import numpy as np
from reference_sim import Job

from ddppo_hpc.data.trace import Trace


def trace_of(jobs: list[Job], machine_procs: int) -> Trace:
    """A Trace of already-clean jobs, ordered as the reference orders them."""
    jobs = sorted(jobs, key=lambda j: (j.submit, j.id))
    return Trace(
        id=np.array([j.id for j in jobs], dtype=np.int64),
        submit=np.array([j.submit for j in jobs], dtype=np.float64),
        runtime=np.array([j.runtime for j in jobs], dtype=np.float64),
        requested_time=np.array([j.requested_time for j in jobs], dtype=np.float64),
        procs=np.array([j.procs for j in jobs], dtype=np.int32),
        user=np.array([j.user for j in jobs], dtype=np.int64),
        group=np.full(len(jobs), -1, dtype=np.int64),
        queue=np.full(len(jobs), -1, dtype=np.int64),
        machine_procs=machine_procs,
    )
