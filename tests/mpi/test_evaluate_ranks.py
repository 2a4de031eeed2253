"""Evaluation shared out over ranks (rank r takes windows r, r + size, ...) writes the same
results file as one rank alone."""

from pathlib import Path

import h5py
import numpy as np
from mpi4py import MPI
from simhelpers import TINY_TRAINING

from ddppo_hpc import evaluate
from ddppo_hpc.config import load_config
from ddppo_hpc.dist import context
from ddppo_hpc.train import train

RUN_DEPENDENT = ("command", "ranks")  # the attributes that name the output and the ranks


def test_results_file_does_not_depend_on_the_ranks(tmp_path_factory):
    comm = MPI.COMM_WORLD
    run = Path(comm.bcast(str(tmp_path_factory.mktemp("run")) if comm.rank == 0 else None))
    train(load_config(None, [*TINY_TRAINING, "ppo.updates=1"]), context.init("cpu"), run, False)
    comm.Barrier()  # rank 0 may still be writing the checkpoint
    # 5 windows: 3 on rank 0 and 2 on rank 1 at size 2.
    argv = ["--checkpoint", str(run), "--windows", "5", "--jobs", "64", "--backfill", "none,easy"]
    assert evaluate.main([*argv, "--out", str(run / "world.h5")]) == 0
    if comm.rank != 0:
        return
    assert evaluate.main([*argv, "--out", str(run / "alone.h5")], comm=MPI.COMM_SELF) == 0
    with h5py.File(run / "world.h5", "r") as world, h5py.File(run / "alone.h5", "r") as alone:
        assert world.attrs["ranks"] == comm.size and alone.attrs["ranks"] == 1
        assert {k: str(v) for k, v in world.attrs.items() if k not in RUN_DEPENDENT} == {
            k: str(v) for k, v in alone.attrs.items() if k not in RUN_DEPENDENT
        }
        assert set(world) == set(alone) == {"jobs", "windows", "summary"}
        for group in world:
            assert set(world[group]) == set(alone[group])
            for name in world[group]:
                assert np.array_equal(world[group][name][...], alone[group][name][...])
        # ddppo under none and easy; 6 orders under none; under easy with both estimates
        assert len(world["windows/window"]) == (2 + 6 + 6 * 2) * 5


def test_a_rank_that_cannot_start_stops_every_rank(tmp_path_factory):
    comm = MPI.COMM_WORLD
    tmp = Path(comm.bcast(str(tmp_path_factory.mktemp("eval")) if comm.rank == 0 else None))
    missing = str(tmp / f"trace-{comm.rank}.swf")  # a path no rank can read
    if comm.rank == 0:
        (tmp / "trace-0.swf").write_text("1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n")
        missing = str(tmp / "trace-0.swf")  # rank 0 can read its own
    code = evaluate.main(["--trace", missing, "--full"])
    expected = [0] if comm.size == 1 else [2] * comm.size  # at size 2 rank 1 cannot read
    assert comm.allgather(code) == expected
