"""GPU-mode DD-PPO at 1 and 2 ranks: the dual agent's weights stay bit-identical; the
training windows' best teacher is rank 0's choice on every rank."""

import torch
from simhelpers import TINY_GPU
from test_train import flat_weights, run_dir

from ddppo_hpc.config import load_config
from ddppo_hpc.dist import context
from ddppo_hpc.gpu import training
from ddppo_hpc.train import train


def test_dual_agent_weights_are_identical_across_ranks(tmp_path_factory):
    config = load_config(None, [*TINY_GPU, "gpu.mode=dual", "policy.name=dual"])
    ctx = context.init("cpu")
    trainer = train(config, ctx, run_dir(tmp_path_factory), resume=False)
    weights = flat_weights(trainer.policy)
    assert all(torch.equal(weights, other) for other in ctx.comm.allgather(weights))
    assert trainer.update == 2


def test_the_training_best_teacher_is_the_same_on_every_rank():
    overrides = [*TINY_GPU, "gpu.mode=placement", "gpu.teacher=training_best", "gpu.order=las"]
    config = load_config(None, [*overrides, "gpu.non_blocking=true"])
    comm = context.init("cpu").comm
    chosen = training.choose_teacher(config, comm)
    rules = comm.allgather((chosen.gpu.order, chosen.gpu.reward_baseline))
    mine = training.rule_scores(config, training.training_jobs(config))[0][1:]  # rank 0's jobs
    assert rules == [mine] * comm.size
