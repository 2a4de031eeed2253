"""The GPU environments' heuristic features, job ranking and baseline rewards, computed by
hand on tiny clusters (docs/gpu.md, "Environments")."""

import numpy as np
import pytest
from gpu_reference import GpuJob, RefMachine
from test_gpu_env import CLUSTER, WORKLOAD, drive
from test_gpu_sim import ONE_RACK, cluster, workload

from ddppo_hpc.gpu.env import VecGpuEnv

# Rack 0: machines 0 and 1 (GPUs {0, 1} and {2, 3}); rack 1: machine 2 (GPUs 4 to 7),
# which runs at half speed.
THREE = [RefMachine(0, 2), RefMachine(0, 2), RefMachine(1, 4, speed=0.5)]
# A (0 s, 100 s, 1 GPU), then B (0 s, 10 s, 3 GPUs), in fifo order.
A_B = [GpuJob(1, 0, 100, 1), GpuJob(2, 0, 10, 3)]


def test_placement_features_follow_best_fit_and_the_racks():
    env = VecGpuEnv(workload(A_B), cluster(THREE), 1, 2, 4, "placement", "fifo")
    obs, _ = env.reset()
    slots = obs["jobs"][0]
    # A: best_fit takes the machine with the fewest slots >= 1 (machine 0): GPU 0.
    assert slots[:, 8].tolist() == [1, 0, 0, 0, 0, 0, 0, 0]
    assert slots[:, 9].tolist() == [1] * 8  # both racks free
    assert slots[:, 10].tolist() == [1] * 8  # every machine can take A alone
    obs, *_ = env.step(np.array([4]))  # A on GPU 4 instead
    slots = obs["jobs"][0]
    # B (3 GPUs): only machine 2 has 3 slots: best_fit plans GPUs 5, 6, 7.
    assert slots[:, 8].tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert slots[:, 9].tolist() == [1, 1, 1, 1, 0.75, 0.75, 0.75, 0.75]
    assert slots[:, 10].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    obs, *_ = env.step(np.array([0]))  # B's first GPU on machine 0 instead
    slots = obs["jobs"][0]
    # 2 left: best_fit replans them on the machine with the fewest slots >= 2 (machine 1)
    assert slots[:, 8].tolist() == [0, 0, 1, 1, 0, 0, 0, 0]
    assert env.heuristic_actions("fifo", "best_fit")[0] == 2
    assert slots[:, 9].tolist() == [0.75] * 8
    assert slots[:, 10].tolist() == [0, 0, 1, 1, 1, 1, 1, 1]  # machine 0 has 1 slot left


def test_rewards_relative_to_the_baseline():
    env = VecGpuEnv(
        workload(A_B), cluster(THREE), 1, 2, 4, "placement", "fifo", baseline="best_fit"
    )
    env.reset()
    # A on the half-speed machine: 200 s against best_fit's 100 s on machine 0.
    _, reward, *_ = env.step(np.array([4]))
    assert reward[0] == pytest.approx(-(200 - 100) / 3600 / 2)
    # B as best_fit places it (GPUs 5, 6, 7; the baseline: 4, 5, 6): the same JCT and cost.
    rewards = [env.step(env.heuristic_actions("fifo", "best_fit"))[1][0] for _ in range(3)]
    assert rewards == [0, 0, 0]


def test_the_baseline_heuristic_earns_nothing():
    env = VecGpuEnv(WORKLOAD, CLUSTER, 1, 200, 32, "dual", "srtf", (1.0, 0.5, 0.1), 7, "best_fit")
    env.reset()
    env.begin_at([100])
    _, total = drive(env, "srtf", "best_fit")
    assert total == 0


def test_ordering_slots_rank_the_jobs_by_the_ordering():
    # All at 0 s: J1 (100 s, 4 GPUs), J2 (50 s, 2 GPUs), J3 (10 s, 1 GPU).
    jobs = [GpuJob(1, 0, 100, 4), GpuJob(2, 0, 50, 2), GpuJob(3, 0, 10, 1)]
    env = VecGpuEnv(workload(jobs), cluster(ONE_RACK), 1, 3, 4, "dual", "srtf")
    obs, _ = env.reset()
    slots = obs["jobs"][0]
    assert obs["action_mask"][0].tolist() == [True, True, True, False]
    assert slots[:3, 1] == pytest.approx([np.log1p(t / 60) / 10 for t in (10, 50, 100)])
    assert slots[:3, 5].tolist() == [0, 0.25, 0.5]  # rank / K
    # best_fit's cost if started now, per link_cross: 1 GPU 0; {0, 1} 1; all four 3
    assert slots[:3, 6].tolist() == [0, 1 / 16, 3 / 16]
    assert slots[:3, 8].tolist() == [1, 0, 0]  # srtf's pick
    assert slots[:3, 9] == pytest.approx([2 / 3, 1 / 3, 0])  # queue position / queue
    assert env.heuristic_actions()[0] == 0 and env.heuristic_actions("fifo")[0] == 2
    obs, *_ = env.step(np.array([2]))  # slot 2: J1
    assert obs["cluster"][0, 0] == 1 and obs["cluster"][0, 2] == 1  # placing 4 of 4 GPUs
