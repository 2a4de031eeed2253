"""Each rank streams its own partitions of a trace store; together they read every job
exactly once. Runs at size 1 (pytest tests) and 2 (mpirun -n 2, see the Makefile)."""

import shutil
import tempfile
from pathlib import Path

import numpy as np
from mpi4py import MPI

from ddppo_hpc.data import convert
from ddppo_hpc.data.sampler import EpisodeSampler
from ddppo_hpc.data.store import TraceStore


def test_ranks_stream_disjoint_partitions_that_cover_the_store():
    comm = MPI.COMM_WORLD
    folder = comm.bcast(tempfile.mkdtemp(prefix="ddppo-mpi-") if comm.rank == 0 else None)
    if comm.rank == 0:
        convert.generate(Path(folder) / "ds", 5000, partitions=4, seed=3)
    comm.Barrier()
    store = TraceStore(Path(folder) / "ds")
    mine = store.partitions_for(comm.rank, comm.size)
    ids = np.concatenate([c["id"] for c in store.stream(mine, chunk_rows=700)])
    everyone = comm.allgather(ids)
    assert sorted(np.concatenate(everyone).tolist()) == list(range(1, 5001))
    # Seeds `base + rank`: ranks draw different episodes, each from its own partitions.
    episode = EpisodeSampler(store, mine, 100, seed=10 + comm.rank).sample()
    firsts = {store.partitions[k]["first_job"] + 1 for k in mine}
    assert any(f <= episode.id[0] < f + 1250 for f in firsts)
    comm.Barrier()
    if comm.rank == 0:
        shutil.rmtree(folder)
