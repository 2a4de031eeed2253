"""Stop signals and checkpoints: requeue-friendly runs under Slurm and PBS."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import torch
from mpi4py import MPI

from ddppo_hpc.io import atomic_write

CHECKPOINT = "checkpoint.pt"


class StopFlag:
    """SIGTERM and SIGUSR1 (Slurm's --signal, PBS's qdel/preemption) only set a flag; the
    loop checks it at the next update boundary, where every rank agrees to stop."""

    def __init__(self):
        self.event = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, lambda *_: self.event.set())

    def any_rank(self, comm: MPI.Comm) -> bool:
        return bool(comm.allreduce(int(self.event.is_set()), op=MPI.MAX))


def save_checkpoint(run_dir: Path, comm: MPI.Comm, shared: dict, mine: dict) -> None:
    """Rank 0 writes `shared` (model, optimizer, counters, config) with every rank's `mine`
    (RNG and environment states), to a temp file renamed onto checkpoint.pt. On return the
    file is there for every rank (a resume in the same job cannot read an older one)."""
    ranks = comm.gather(mine, root=0)
    if comm.Get_rank() == 0:
        with atomic_write(run_dir / CHECKPOINT, "wb") as f:
            torch.save({**shared, "ranks": ranks}, f)
    comm.Barrier()


def _read(run_dir: Path) -> dict:
    path = run_dir / CHECKPOINT
    if not path.exists():
        raise FileNotFoundError(f"{path}: no checkpoint to resume from")
    return torch.load(path, weights_only=False)


def checkpoint_config(run_dir: Path) -> dict:
    """The configuration a run was started with."""
    return _read(run_dir)["config"]


def load_checkpoint(run_dir: Path, comm: MPI.Comm) -> tuple[dict, dict]:
    """The shared part and this rank's part of the checkpoint in run_dir."""
    path = run_dir / CHECKPOINT
    state = _read(run_dir)
    if len(state["ranks"]) != comm.Get_size():
        raise ValueError(f"{path} was written by {len(state['ranks'])} ranks, this job has "
                         f"{comm.Get_size()}: resume with the same number of ranks")
    return state, state["ranks"][comm.Get_rank()]
