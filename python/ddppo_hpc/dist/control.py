"""Stop signals, checkpoints and the run directory: requeue-friendly runs under Slurm and
PBS, and errors that stop every rank together."""

from __future__ import annotations

import io
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch
from mpi4py import MPI

from ddppo_hpc.io import atomic_write, output_errors, reason

CHECKPOINT = "checkpoint.pt"
BEST = "best.pt"  # run.keep_best: the checkpoint that scored best on the validation part
METRICS = "metrics.h5"
COMPLETED = "COMPLETED"  # the update count of a run that reached its last update
STOPPED = "STOPPED"  # the update at which a signal stopped the run (it can resume)
RUN_FILES = (CHECKPOINT, BEST, METRICS, COMPLETED, STOPPED)  # a run's own files in its directory
# Written by save_checkpoint: what a checkpoint of this package holds.
CHECKPOINT_KEYS = {"config", "update", "model", "optimizer", "ranks"}

T = TypeVar("T")


class RunError(Exception):
    """An expected error (bad input, an unreadable or unwritable file) raised on every rank
    together; the message is that of the first rank that met it."""


class CheckpointError(ValueError):
    """A checkpoint file that is missing, truncated or not one of ours."""


def collectively(
    comm: MPI.Comm, work: Callable[..., T], *args, rank0_only: bool = False
) -> T | None:
    """Runs `work(*args)` on every rank (on rank 0 alone with `rank0_only`) and returns its
    result.
    An OSError or ValueError on any rank becomes a RunError on every rank: no rank is left
    waiting in a collective (a Barrier, an all-reduce) for a rank that has stopped. On
    return, whatever rank 0 wrote is there for every rank."""
    result, error = None, None
    if comm.Get_rank() == 0 or not rank0_only:
        try:
            result = work(*args)
        except (OSError, ValueError) as e:
            error = str(e)
    errors = [e for e in comm.allgather(error) if e is not None]
    if errors:
        raise RunError(errors[0])
    return result


class StopFlag:
    """SIGTERM and SIGUSR1 (Slurm's --signal, PBS's qdel/preemption) only set a flag; the
    loop checks it at the next update boundary, where every rank agrees to stop."""

    def __init__(self):
        self.event = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, lambda *_: self.event.set())

    def any_rank(self, comm: MPI.Comm) -> bool:
        return bool(comm.allreduce(int(self.event.is_set()), op=MPI.MAX))


def prepare_run_dir(run_dir: Path, force: bool) -> None:
    """Creates a new run's directory. One that holds another run's files is refused unless
    `force`, which removes those files and nothing else."""
    with output_errors(run_dir):
        run_dir.mkdir(parents=True, exist_ok=True)
        found = [name for name in RUN_FILES if (run_dir / name).exists()]
        if found and not force:
            raise ValueError(
                f"{run_dir} holds a run ({', '.join(found)}); use --resume to continue it, or "
                "--force to start over"
            )
        for name in found:
            (run_dir / name).unlink()


def clear_markers(run_dir: Path) -> None:
    """A run that goes on is neither completed nor stopped."""
    with output_errors(run_dir):
        for name in (COMPLETED, STOPPED):
            (run_dir / name).unlink(missing_ok=True)


def write_marker(run_dir: Path, name: str, update: int) -> None:
    """COMPLETED or STOPPED: the batch templates' sign of how the run ended."""
    with atomic_write(run_dir / name) as f:
        f.write(f"{update}\n")


def save_checkpoint(run_dir: Path, comm: MPI.Comm, shared: dict, mine: dict) -> None:
    """Rank 0 writes `shared` (model, optimizer, counters, config) with every rank's `mine`
    (RNG and environment states), to a temp file renamed onto checkpoint.pt. On return the
    file is there for every rank (a resume in the same job cannot read an older one); if it
    could not be written (a full disk), every rank raises RunError and the previous
    checkpoint is kept."""
    ranks = comm.gather(mine, root=0)

    def write() -> None:
        buffer = io.BytesIO()  # serialised first: a failed write is then a plain OSError
        torch.save({**shared, "ranks": ranks}, buffer)
        with atomic_write(run_dir / CHECKPOINT, "wb") as f:
            f.write(buffer.getbuffer())

    collectively(comm, write, rank0_only=True)


def keep_as_best(run_dir: Path) -> None:
    """Copies checkpoint.pt onto best.pt (temp file and rename)."""
    with output_errors(run_dir / CHECKPOINT):
        data = (run_dir / CHECKPOINT).read_bytes()
    with atomic_write(run_dir / BEST, "wb") as f:
        f.write(data)


def read_checkpoint(file: Path) -> dict:
    """A checkpoint written by save_checkpoint, on the CPU; CheckpointError names the file
    when it is missing, unreadable, truncated or not a ddppo-hpc training checkpoint."""
    try:
        with open(file, "rb") as f:
            state = torch.load(f, map_location="cpu", weights_only=False)
    except FileNotFoundError:
        raise CheckpointError(f"{file}: no checkpoint") from None
    except (IsADirectoryError, PermissionError) as e:
        raise CheckpointError(f"{file}: cannot read: {reason(e)}") from None
    except Exception:  # unpickling foreign or cut-off bytes fails in any way (Errno 22, EOF...)
        raise CheckpointError(
            f"{file}: not a ddppo-hpc training checkpoint (truncated, or another kind of file)"
        ) from None
    missing = CHECKPOINT_KEYS - set(state) if isinstance(state, dict) else CHECKPOINT_KEYS
    if missing or not isinstance(state["config"], dict) or not isinstance(state["ranks"], list):
        what = f"no {', '.join(sorted(missing))}" if missing else "a malformed config or ranks"
        raise CheckpointError(f"{file}: not a ddppo-hpc training checkpoint ({what})")
    return state


def checkpoint_config(run_dir: Path) -> dict:
    """The configuration a run was started with."""
    return read_checkpoint(run_dir / CHECKPOINT)["config"]


def load_checkpoint(run_dir: Path, comm: MPI.Comm) -> tuple[dict, dict]:
    """The shared part and this rank's part of the checkpoint in run_dir."""
    path = run_dir / CHECKPOINT
    state = read_checkpoint(path)
    if len(state["ranks"]) != comm.Get_size():
        raise ValueError(
            f"{path} was written by {len(state['ranks'])} ranks, this job has "
            f"{comm.Get_size()}: resume with the same number of ranks"
        )
    return state, state["ranks"][comm.Get_rank()]
