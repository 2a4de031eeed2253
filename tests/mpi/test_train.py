"""DD-PPO training at 1 and 2 ranks: equal weights, straggler preemption, a recurrent
policy resumed mid-episode. (Resume after a signal and the size-1 command line run in
tests/test_train_runs.py.)"""

from pathlib import Path

import torch
from mpi4py import MPI
from simhelpers import TINY_TRAINING

from ddppo_hpc.config import load_config
from ddppo_hpc.dist import context
from ddppo_hpc.train import train

SMALL = TINY_TRAINING


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
