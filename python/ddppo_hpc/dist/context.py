"""One rank's view of the job: MPI world, Horovod on the same communicator, device and
threads."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import torch
from mpi4py import MPI

from ddppo_hpc.dist import sync


class LaunchError(RuntimeError):
    """The job was launched in a way that cannot train correctly."""


@dataclass
class Context:
    comm: MPI.Comm
    rank: int
    size: int
    local_rank: int
    local_size: int
    device: torch.device

    @property
    def is_rank0(self) -> bool:
        return self.rank == 0


def _abort_on_exception(previous):
    """An uncaught exception on one rank would leave the others waiting in a collective:
    print it and abort the whole job instead (as `python -m mpi4py` does)."""

    def hook(kind, value, traceback):
        previous(kind, value, traceback)
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)

    return hook


def init(device: str = "auto") -> Context:
    comm = MPI.COMM_WORLD
    tasks = int(os.environ.get("SLURM_NTASKS", "1") or 1)
    if comm.Get_size() == 1 and tasks > 1 and "SLURM_STEP_ID" in os.environ:
        raise LaunchError(
            f"srun started {tasks} tasks but MPI sees a world of 1: this MPI was not built "
            "with Slurm's PMI/PMIx, so every task would train alone. Use srun --mpi=pmix (or "
            "pmi2), or mpirun inside the allocation."
        )
    if comm.Get_size() > 1:
        sys.excepthook = _abort_on_exception(sys.excepthook)
    try:
        sync.start(comm)
    except ImportError as e:
        raise LaunchError(
            f"{comm.Get_size()} ranks average their gradients with Horovod, which does not "
            f"import here ({e}); `make setup` installs it (a single rank needs none)"
        ) from None
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local_rank, local_size = local.Get_rank(), local.Get_size()
    local.Free()
    # Ranks on one node share its cores rather than each starting a thread per core.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    torch.set_num_threads(max(1, (cores or 1) // local_size))
    if device == "auto":
        gpus = torch.cuda.device_count()
        device = f"cuda:{local_rank % gpus}" if gpus else "cpu"
    return Context(
        comm, comm.Get_rank(), comm.Get_size(), local_rank, local_size, torch.device(device)
    )
