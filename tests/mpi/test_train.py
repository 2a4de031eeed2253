"""DD-PPO training at 1 and 2 ranks: equal weights, straggler preemption (and the same
optimizer steps on a rank it cut short), a recurrent policy resumed mid-episode, a full disk
that stops every rank. (Resume after a signal and the size-1 command line run in
tests/test_train_runs.py.)"""

import contextlib
import faulthandler
import os
from pathlib import Path

import pytest
import torch
from mpi4py import MPI
from simhelpers import TINY_TRAINING

from ddppo_hpc.config import load_config
from ddppo_hpc.dist import context, control
from ddppo_hpc.train import train

SMALL = TINY_TRAINING


@contextlib.contextmanager
def no_hang(seconds: float):
    """A rank still inside after `seconds` prints its stack and exits, which ends the job
    (a failure), instead of waiting for ever in a collective."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def run_dir(tmp_path_factory) -> Path:
    comm = MPI.COMM_WORLD
    return Path(comm.bcast(str(tmp_path_factory.mktemp("run")) if comm.rank == 0 else None))


def flat_weights(policy) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in policy.parameters()])


def test_weights_are_bit_identical_across_ranks(tmp_path_factory):
    config = load_config(None, [*SMALL, "ppo.updates=3"])
    ctx = context.init("cpu")
    trainer = train(config, ctx, run_dir(tmp_path_factory), resume=False)
    weights = flat_weights(trainer.policy)
    everyone = ctx.comm.allgather(weights)
    assert all(torch.equal(weights, other) for other in everyone)
    assert trainer.update == 3


def test_a_slow_rank_is_preempted_and_training_goes_on(tmp_path_factory):
    # At 2 ranks, preemption needs sync_frac <= 0.5: one finished rank is half the world.
    config = load_config(
        None,
        [
            *SMALL,
            "ppo.updates=2",
            "dist.sync_frac=0.5",
            "dist.slow_rank=1",
            "dist.slow_factor=30",
        ],
    )
    ctx = context.init("cpu")
    trainer = train(config, ctx, run_dir(tmp_path_factory), resume=False)
    steps = trainer.storage.used
    all_steps = ctx.comm.allgather(steps)
    assert trainer.update == 2
    if ctx.size == 1:
        assert all_steps == [24]  # nobody to wait for
    else:
        assert all_steps[0] == 24
        assert 6 <= all_steps[1] < 24  # cut short, but not before min_rollout_frac (0.25)


def test_a_rank_cut_short_runs_as_many_optimizer_steps(tmp_path_factory):
    # Issue 14's deadlock: 3 environments, and rank 1 (30x slower) preempted after 4 of 16
    # steps keeps 12 samples; torch.chunk cut them into 6 minibatches where rank 0 had 8,
    # the ranks then ran different numbers of all-reduces and waited for ever.
    config = load_config(
        None,
        [
            *SMALL,
            "env.num_envs=3",
            "ppo.rollout_steps=16",
            "ppo.minibatches=8",
            "ppo.updates=2",
            "dist.sync_frac=0.5",
            "dist.slow_rank=1",
            "dist.slow_factor=30",
        ],
    )
    ctx = context.init("cpu")
    with no_hang(120):
        trainer = train(config, ctx, run_dir(tmp_path_factory), resume=False)
    assert ctx.comm.allgather(trainer.storage.used) == [16, 4][: ctx.size]
    # Adam counts its steps: updates x epochs x minibatches on every rank (and one that
    # Horovod's broadcast of the optimizer state takes to create it).
    steps = {int(s["step"]) for s in trainer.optimizer.state.values()}
    assert ctx.comm.allgather(steps) == [{1 + 2 * 2 * 8}] * ctx.size


def test_a_full_disk_stops_every_rank_with_the_same_error(tmp_path_factory, small_disk):
    comm = MPI.COMM_WORLD
    disk = None
    if comm.rank == 0:  # rank 0 writes the run directory: its disk is the one to fill
        with contextlib.suppress(pytest.skip.Exception):
            disk = small_disk(512)
    disk = comm.bcast(disk)
    if disk is None:
        pytest.skip("no small tmpfs here")
    run, ctx = disk / "run", context.init("cpu")
    options = [*SMALL, "dist.preemption=false", "run.checkpoint_every=1"]
    train(load_config(None, [*options, "ppo.updates=1"]), ctx, run, resume=False)
    if comm.rank == 0:  # room for the next metrics file, not for the next checkpoint
        stat = os.statvfs(disk)
        (disk / "filler").write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - 24576))
    comm.Barrier()
    message = f"{run}/checkpoint.pt: cannot write: no space left on device"
    with no_hang(120), pytest.raises(control.RunError, match=message):
        train(load_config(None, [*options, "ppo.updates=2"]), ctx, run, resume=True)
    assert control.read_checkpoint(run / "checkpoint.pt")["update"] == 1


def test_gtrxl_resumed_halfway_equals_an_uninterrupted_run(tmp_path_factory):
    # 4 updates of 24 steps on 64-job episodes: the stop falls mid-episode, memory non-empty.
    options = [*SMALL, "dist.preemption=false", "policy.name=gtrxl", "policy.hidden=16"]
    ctx = context.init("cpu")
    straight = train(
        load_config(None, [*options, "ppo.updates=4"]), ctx, run_dir(tmp_path_factory), resume=False
    )
    halves = run_dir(tmp_path_factory)
    first = train(load_config(None, [*options, "ppo.updates=2"]), ctx, halves, resume=False)
    assert first.memory[..., -1].any()  # the checkpoint holds a memory in use
    resumed = train(load_config(None, [*options, "ppo.updates=4"]), ctx, halves, resume=True)
    assert resumed.update == 4
    assert torch.equal(flat_weights(straight.policy), flat_weights(resumed.policy))
    assert torch.equal(straight.memory, resumed.memory)
