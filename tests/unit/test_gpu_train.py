"""Training and evaluation in GPU mode (docs/gpu.md, "Environments"): configuration
checks, a tiny dual-agent run and its comparison with the heuristics."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from simhelpers import TINY_GPU, alibaba_store

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.dist import context
from ddppo_hpc.gpu import training
from ddppo_hpc.gpu.env import GLOBAL_FEATURES, SLOT_FEATURES
from ddppo_hpc.policy import DualPolicy
from ddppo_hpc.train import Trainer, train


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["gpu.mode=dual"], "'gpu.mode: dual' needs 'policy.name' dual"),
        (["policy.name=dual"], "'gpu.mode: off' needs 'policy.name' mlp, attention, gtrxl"),
        (["gpu.mode=placement", "policy.name=attention"], "needs 'policy.name' mlp"),
        (["gpu.mode=sharing"], "'gpu.mode' must be one of off, placement, dual"),
        (["gpu.order=sjf"], "'gpu.order' must be one of fifo, srtf, las"),
        (["gpu.racks=0"], "'gpu.racks' must be positive"),
        (["gpu.reward_baseline=fifo"], "'gpu.reward_baseline' must be one of none, first_fit"),
        (["ppo.imitation_updates=-1"], "'ppo.imitation_updates' must be at least 0"),
    ],
)
def test_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_cluster_and_holdout_errors():
    config = load_config(None, ["gpu.link_costs=1,4", "gpu.mode=placement"])
    with pytest.raises(ConfigError, match="'gpu.link_costs' must be three numbers"):
        training.cluster_of(config)
    config = load_config(None, [*TINY_GPU, "gpu.mode=placement", "gpu.holdout_jobs=790"])
    cluster = training.cluster_of(config)
    with pytest.raises(ConfigError, match="leave no training window in 800 jobs"):
        training.split(config, training.workload_of(config, cluster, 0))


NODES = ["n0,64000,262144,2,P100", "n1,96000,393216,8,G3"]
PODS = [f"p{i},6000,12288,{1 + i % 2},1000,,BE,Succeeded,{i},{600 + i},{i}" for i in range(40)]


def test_nodes_topology_is_the_traces_own_node_list(tmp_path):
    overrides = [f"data.trace={alibaba_store(tmp_path, NODES, PODS)}", "gpu.mode=placement"]
    config = load_config(None, [*overrides, "gpu.nodes_topology=true", "gpu.machines_per_rack=1"])
    machines = training.cluster_of(config).machines
    assert machines.gpus.tolist() == [2, 8] and machines.model == ("P100", "G3")
    assert machines.rack.tolist() == [0, 1] and machines.cpu.tolist() == [64000, 96000]
    assert training.cluster_of(load_config(None, overrides)).total_gpus == 64  # uniform
    config = load_config(None, ["gpu.mode=placement", "gpu.nodes_topology=true"])
    with pytest.raises(ConfigError, match="'gpu.nodes_topology' needs a trace with a node list"):
        training.cluster_of(config)


def test_validation_jobs_come_before_the_held_out_ones():
    config = load_config(None, [*TINY_GPU, "gpu.holdout_jobs=100", "gpu.validation_jobs=50"])
    jobs = training.workload_of(config, training.cluster_of(config), 0)
    train, valid, held = training.split(config, jobs)
    assert (len(train), len(valid), len(held)) == (len(jobs) - 150, 50, 100)
    assert valid.id[0] == jobs.id[len(jobs) - 150] and held.id[0] == jobs.id[len(jobs) - 100]


@pytest.mark.parametrize("wait", ["false", "true"])
def test_imitation_updates_follow_and_copy_the_heuristic(tmp_path, wait):
    overrides = [*TINY_GPU, "gpu.mode=placement", "ppo.imitation_updates=1", f"gpu.wait={wait}"]
    config = load_config(None, overrides)
    trainer = Trainer(config, context.init("cpu"), tmp_path)
    env = training.make_env(config, 0, 1)
    env.reset()
    expected = []
    for _ in range(config.ppo.rollout_steps):
        expected.append(env.heuristic_actions("srtf", "best_fit"))
        env.step(expected[-1])
    rollout = trainer.rollout()
    assert np.array_equal(trainer.storage.actions.numpy(), np.stack(expected))
    stats = trainer.learn(rollout["last_value"])
    assert stats["policy_loss"] > 0 and stats["approx_kl"] == 0  # a cross-entropy
    # with gpu.wait the wait slot (the last; else a GPU) is left out of the cloning: the
    # heuristics never wait, and PPO is to learn when to
    assert trainer.storage.mask[..., -1].any() == (wait == "false")
    trainer.update = 1
    assert not trainer.imitating()
    trainer.rollout()
    assert trainer.storage.mask[..., -1].any()


def test_dual_training_updates_both_networks(tmp_path):
    config = load_config(None, [*TINY_GPU, "gpu.mode=dual", "policy.name=dual"])
    torch.manual_seed(config.run.seed)
    before = DualPolicy(config.policy.hidden, SLOT_FEATURES, GLOBAL_FEATURES).state_dict()
    trainer = train(config, context.init("cpu"), tmp_path, resume=False)
    after = trainer.policy.state_dict()
    assert trainer.update == 2
    assert not torch.equal(before["order.score.weight"], after["order.score.weight"])
    assert not torch.equal(before["place.score.weight"], after["place.score.weight"])


def test_evaluate_compares_with_every_heuristic_pair(tmp_path):
    run = [sys.executable, "-m", "ddppo_hpc.train", "--run-dir", str(tmp_path)]
    overrides = [*TINY_GPU, "gpu.mode=placement", "gpu.wait=true"]
    subprocess.run([*run, *overrides], check=True, capture_output=True, timeout=300)
    out = subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.evaluate", "--checkpoint", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    out_lines = out.stdout.splitlines()
    rows = [line.split() for line in out_lines]
    assert rows[0] == ["scheduler", "windows", "avg_jct", "makespan", "avg_comm_cost",
                       "gpu_utilization", "avg_queue_delay"]  # fmt: skip
    names = [r[0] for r in rows[1:]]
    assert names[0] == "agent" and len(names) == 1 + 3 * 4 * 2
    assert names[1:3] == ["fifo+first_fit", "fifo+first_fit+wait"]  # each rule, then waiting
    assert {"srtf+best_fit+wait", "srtf+speed_fit", "las+random+wait"} <= set(names)
    out = subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.evaluate", "--checkpoint", str(tmp_path), "--trace", "x"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2 and "--trace and --out do not apply to a GPU-mode run" in out.stderr
    evaluate = [sys.executable, "-m", "ddppo_hpc.evaluate", "--checkpoint", str(tmp_path)]
    validation = subprocess.run(
        [*evaluate, "--split", "validation"], capture_output=True, text=True
    )
    assert validation.returncode == 0, validation.stderr
    assert validation.stdout.splitlines()[0] == out_lines[0]  # the same table
    assert validation.stdout.splitlines()[1:] != out_lines[1:]  # on other windows
    train = subprocess.run([*evaluate, "--split", "train"], capture_output=True, text=True)
    assert train.returncode == 2 and "GPU-mode run has validation and held-out" in train.stderr
