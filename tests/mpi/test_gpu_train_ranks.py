"""GPU-mode DD-PPO at 1 and 2 ranks: the dual agent's weights stay bit-identical."""

import torch
from simhelpers import TINY_GPU
from test_train import flat_weights, run_dir

from ddppo_hpc.config import load_config
from ddppo_hpc.dist import context
from ddppo_hpc.train import train


def test_dual_agent_weights_are_identical_across_ranks(tmp_path_factory):
    config = load_config(None, [*TINY_GPU, "gpu.mode=dual", "policy.name=dual"])
    ctx = context.init("cpu")
    trainer = train(config, ctx, run_dir(tmp_path_factory), resume=False)
    weights = flat_weights(trainer.policy)
    assert all(torch.equal(weights, other) for other in ctx.comm.allgather(weights))
    assert trainer.update == 2
