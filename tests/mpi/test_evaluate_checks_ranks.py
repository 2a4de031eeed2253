"""An output that rank 0 (the writer) cannot write stops every rank before any evaluates."""

from pathlib import Path

from mpi4py import MPI

from ddppo_hpc import evaluate


def test_an_unwritable_output_stops_every_rank_before_evaluating(tmp_path_factory, monkeypatch):
    comm = MPI.COMM_WORLD
    tmp = Path(comm.bcast(str(tmp_path_factory.mktemp("out")) if comm.rank == 0 else None))
    evaluated = []
    monkeypatch.setattr(evaluate, "run_rank", lambda *args: evaluated.append(args) or [])
    target = tmp / "missing" / "results.h5"
    code = evaluate.main(
        ["--policies", "fcfs", "--windows", "2", "--jobs", "50", "--out", str(target)]
    )
    # Every rank exits 2 and none has evaluated (no rank waits for another in the gather).
    assert comm.allgather((code, len(evaluated))) == [(2, 0)] * comm.size
