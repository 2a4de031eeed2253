"""The GPU-cluster environments (docs/gpu.md, "Environments")."""

import numpy as np
import pytest
from gpu_reference import GpuJob, RefMachine
from test_gpu_sim import ONE_RACK, cluster, workload

from ddppo_hpc.data.dljobs import generate_dl_jobs
from ddppo_hpc.gpu import Cluster, simulate_gpu
from ddppo_hpc.gpu.env import VecGpuEnv
from ddppo_hpc.gpu.topology import uniform
from ddppo_hpc.gpu.workload import from_trace

CLUSTER = Cluster(uniform(2, 2, 4, ("V100M32", "P100")), speed_noise=0.2, speed_seed=3)
WORKLOAD = from_trace(generate_dl_jobs(600, 16, seed=1), "dl").fitted(CLUSTER.machines)


def drive(env, order, placement):
    """Steps environment 0 with the heuristics to the end of its episode."""
    total = 0.0
    while True:
        obs, reward, terminated, _, info = env.step(env.heuristic_actions(order, placement))
        total += float(reward[0])
        if terminated[0]:
            return {k: float(info[k][0]) for k in env.METRICS}, total


@pytest.mark.parametrize(
    ("mode", "order", "placement"),
    [("placement", "srtf", "best_fit"), ("dual", "las", "random"), ("dual", "fifo", "first_fit")],
)
def test_heuristics_through_the_env_reproduce_the_simulator(mode, order, placement):
    env = VecGpuEnv(WORKLOAD, CLUSTER, 1, 200, 32, mode, order, (1.0, 0.5, 0.1), seed=7)
    env.reset()
    env.begin_at([100])
    metrics, total = drive(env, order, placement)
    r = simulate_gpu(WORKLOAD, CLUSTER, order, placement, seed=7, start=100, jobs=200)
    assert metrics == {k: r.metrics[k] for k in env.METRICS}
    # rewards add up to minus the weighted averages (comm cost over all jobs, per link_cross)
    expected = -(
        r.metrics["avg_jct"] / 3600
        + 0.5 * r.metrics["makespan"] / 3600
        + 0.1 * r.comm_cost.mean() / 16
    )
    assert total == pytest.approx(expected, rel=1e-5)


def test_placement_steps_on_the_two_machine_cluster():
    # A (0 s, 100 s, 1 GPU) then B (0 s, 10 s, 2 GPUs): fifo order, the agent places.
    jobs = [GpuJob(1, 0, 100, 1), GpuJob(2, 0, 10, 2)]
    env = VecGpuEnv(workload(jobs), cluster(ONE_RACK), 1, 2, 4, "placement", "fifo")
    obs, _ = env.reset()
    assert obs["cluster"][0, 0] == 1  # a placement step, for A
    assert obs["action_mask"][0].tolist() == [True] * 4
    obs, reward, *_ = env.step(np.array([1]))  # A on GPU 1: reward -(100 s / 1 h) / 2
    assert reward[0] == pytest.approx(-100 / 3600 / 2)
    assert obs["action_mask"][0].tolist() == [True, False, True, True]
    assert obs["cluster"][0, 2] == pytest.approx(2 / 4)  # B asks 2 of the 4 GPUs
    obs, reward, *_ = env.step(np.array([2]))  # B's first GPU: 2
    slots = obs["jobs"][0]
    assert slots[:, 1].tolist() == [0, 0, 1, 0]  # chosen
    assert obs["action_mask"][0].tolist() == [True, False, False, True]
    # mean link cost to the chosen GPU 2, per link_cross: 4/16 for GPU 0, 1/16 for GPU 3
    assert slots[:, 5].tolist() == pytest.approx([4 / 16, 4 / 16, 0, 1 / 16])
    obs, reward, terminated, _, info = env.step(np.array([0]))  # {2, 0}: cost 4, 11.5 s
    assert terminated[0]
    assert reward[0] == pytest.approx(-(11.5 / 3600 + 0.1 * 4 / 16) / 2)  # B's share
    assert info["avg_comm_cost"][0] == 4 and info["avg_jct"][0] == pytest.approx(111.5 / 2)


def test_dual_ordering_step_masks_the_queue():
    jobs = [GpuJob(1, 0, 100, 4), GpuJob(2, 1, 10, 2), GpuJob(3, 1, 5, 1)]
    env = VecGpuEnv(workload(jobs), cluster([RefMachine(0, 2), RefMachine(0, 2)]), 1, 3, 4, "dual")
    obs, _ = env.reset()
    assert obs["cluster"][0, 0] == 0 and obs["action_mask"][0].tolist() == [
        True,
        False,
        False,
        False,
    ]
    for action in (0, 0, 1, 2):  # pick job 1, then its GPUs 0, 1, 2
        obs, *_ = env.step(np.array([action]))
        assert obs["cluster"][0, 0] == 1
    obs, *_ = env.step(np.array([3]))  # the 4th GPU: the job starts, both others wait
    assert obs["cluster"][0, 0] == 0
    assert obs["action_mask"][0].tolist() == [True, True, False, False]
    assert obs["jobs"][0, :2, 3].tolist() == [0, 0]  # neither fits now


@pytest.mark.parametrize("wait", [False, True])
def test_state_resumes_mid_episode(wait):
    def make():
        env = VecGpuEnv(WORKLOAD, CLUSTER, 3, 64, 16, "dual", seed=11, wait=wait)
        env.reset()
        return env

    a, rng = make(), np.random.default_rng(0)
    for _ in range(150):
        a.step(a.random_actions(rng))
    b = make()
    obs = b.load_state(a.state())
    for key in ("jobs", "cluster", "action_mask"):
        assert np.array_equal(obs[key], a.observation()[key])
    for _ in range(100):
        actions = a.random_actions(rng)
        ra = a.step(actions)[1].copy()
        assert np.array_equal(ra, b.step(actions)[1])


@pytest.mark.parametrize(("baseline", "plan", "action"), [("best_fit", 0, 0), ("speed_fit", 2, 2)])
def test_the_teacher_is_the_baseline_packing(baseline, plan, action):
    # one 1-GPU job on a P100 machine (GPUs 0, 1) and a G3 machine (GPUs 2, 3): best_fit
    # takes GPU 0 (a tie of slots), speed_fit GPU 2 (the fastest machine)
    machines = [RefMachine(0, 2, speed=0.6, nominal=0.6), RefMachine(0, 2, speed=1.6, nominal=1.6)]
    jobs = workload([GpuJob(1, 0, 90, 1), GpuJob(2, 5, 90, 1)])
    env = VecGpuEnv(jobs, cluster(machines), 1, 2, 4, "placement", "fifo", baseline=baseline)
    obs, _ = env.reset()
    assert obs["jobs"][0, :4, 8].tolist() == [float(g == plan) for g in range(4)]
    assert env.heuristic_actions().tolist() == [action]
