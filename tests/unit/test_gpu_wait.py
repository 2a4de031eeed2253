"""The agents' wait action (gpu.wait; docs/gpu.md, "Environments"), by hand on the
2-machine, 4-GPU cluster."""

import numpy as np
import pytest
from gpu_reference import GpuJob, RefMachine
from test_gpu_sim import ONE_RACK, cluster, workload

from ddppo_hpc.gpu import simulate_gpu, training
from ddppo_hpc.gpu.env import VecGpuEnv

WAIT = 4  # the last of max(K = 4, 4 GPUs) + 1 slots


def tf(seconds):
    return np.float32(min(np.log1p(seconds / 60) / 10, 1))


def test_waiting_for_a_machine_instead_of_spreading():
    # J1 (0 s, 10 s, 1 GPU), J2 (0 s, 100 s, 1 GPU), J3 (1 s, 50 s, 2 GPUs)
    jobs = [GpuJob(1, 0, 10, 1), GpuJob(2, 0, 100, 1), GpuJob(3, 1, 50, 2)]
    env = VecGpuEnv(workload(jobs), cluster(ONE_RACK), 1, 3, 4, "dual", "srtf", wait=True)
    obs, _ = env.reset()
    assert obs["action_mask"][0].tolist() == [True, True, False, False, True]  # J3 comes at 1 s
    wait = obs["jobs"][0, WAIT]
    # the wait slot shows srtf's pick (J1): 1 s to the next event, J1 fits now on one GPU
    assert wait.tolist() == [tf(1), tf(10), 0.25, 1, tf(10), 0, 0, -1, 0, 0, 0]
    for action in (0, 0, 0, 2):  # J1 on GPU 0 (ends at 10 s), J2 on GPU 2 (ends at 100 s)
        obs, reward, *_ = env.step(np.array([action]))
    # 1 s: J3 fits only across the machines (GPUs 1 and 3: cost 4); machine 0 is whole at 10 s
    slots = obs["jobs"][0]
    assert obs["cluster"][0, 0] == 0 and obs["action_mask"][0].tolist()[0] and slots[0, 3] == 1
    assert slots[0, 6] == 4 / 16 and slots[0, 10] == tf(9)
    assert slots[WAIT, [0, 6, 10]].tolist() == [tf(9), 4 / 16, tf(9)]
    obs, reward, *_ = env.step(np.array([WAIT]))
    assert reward[0] == 0
    # 10 s: J1 has ended; J3 now fits on machine 0 alone
    slots = obs["jobs"][0]
    assert obs["cluster"][0, 0] == 0 and slots[0, 6] == 1 / 16 and slots[0, 10] == 0
    obs, *_ = env.step(np.array([0]))
    assert obs["action_mask"][0, WAIT]  # before the first GPU, the head may still wait
    obs, *_ = env.step(np.array([0]))
    assert obs["action_mask"][0].tolist() == [False, True, False, True, False]  # no wait now
    obs, reward, terminated, _, info = env.step(np.array([1]))
    assert terminated[0]
    # J3 on {0, 1} from 10 s to 60 s, cost 1 (spread at 1 s: cost 4, 57.5 s, ends at 58.5 s)
    assert info["avg_comm_cost"][0] == 1
    assert info["avg_jct"][0] == pytest.approx((10 + 100 + 59) / 3)
    assert reward[0] == pytest.approx(-(59 / 3600 + 0.1 * 1 / 16) / 3)


def test_the_placement_agent_waits_with_its_job_committed():
    # J1 (0 s, 10 s, 1 GPU), J2 (0 s, 20 s, 3 GPUs): fifo, the agent places
    jobs = [GpuJob(1, 0, 10, 1), GpuJob(2, 0, 20, 3)]
    env = VecGpuEnv(workload(jobs), cluster(ONE_RACK), 1, 2, 4, "placement", "fifo", wait=True)
    obs, _ = env.reset()
    assert not obs["action_mask"][0, WAIT]  # nothing runs and nothing arrives: no waiting
    obs, *_ = env.step(np.array([WAIT]))  # masked: the first available GPU instead
    assert obs["jobs"][0, :4, 0].tolist() == [0, 1, 1, 1]  # J1 took GPU 0
    assert obs["action_mask"][0, WAIT]  # J1 ends at 10 s
    obs, *_ = env.step(np.array([WAIT]))
    # 10 s: J1 has ended and J2 is still the one to place, on all four GPUs now free
    assert obs["cluster"][0, 0] == 1 and obs["cluster"][0, 2] == 0.75
    assert obs["action_mask"][0].tolist() == [True, True, True, True, False]
    assert obs["jobs"][0, :4, 8].tolist() == [1, 1, 1, 0]  # best_fit plans afresh: 0, 1, 2
    for gpu in (0, 1, 2):
        obs, reward, terminated, _, info = env.step(np.array([gpu]))
    assert terminated[0]
    assert info["avg_queue_delay"][0] == 5  # J2 started at 10 s


def test_the_wait_slot_reproduces_the_simulators_wait_rule():
    # J1 (0 s, 100 s, 3 GPUs), J2 (1 s, 10 s, 2 GPUs), J3 (2 s, 50 s, 1 GPU): the rule
    # (test_gpu_sim.test_the_wait_rule_by_hand) driven through the dual env's wait slot
    jobs = workload([GpuJob(1, 0, 100, 3), GpuJob(2, 1, 10, 2), GpuJob(3, 2, 50, 1)])
    env = VecGpuEnv(jobs, cluster(ONE_RACK), 1, 3, 4, "dual", "srtf", wait=True)

    def rule(obs):
        if obs["cluster"][0, 0] > 0:
            return env.heuristic_actions(placement="best_fit")
        fits = np.flatnonzero(obs["action_mask"][0, :WAIT] & (obs["jobs"][0, :WAIT, 3] > 0))
        return np.array([fits[0] if len(fits) else WAIT], dtype=np.int32)

    metrics = training.episode(env, 0, rule)
    expected = simulate_gpu(jobs, cluster(ONE_RACK), "srtf", "best_fit", wait=True).metrics
    assert metrics == {k: expected[k] for k in env.METRICS}
    assert metrics["avg_jct"] == pytest.approx((110 + 119 + 50) / 3)


def test_non_blocking_commits_only_what_fits_and_waits_only_when_nothing_else_fits():
    # J1 (0 s, 100 s, 3 GPUs), J2 (1 s, 10 s, 2 GPUs), J3 (2 s, 50 s, 1 GPU), dual
    jobs = workload([GpuJob(1, 0, 100, 3), GpuJob(2, 1, 10, 2), GpuJob(3, 2, 50, 1)])
    env = VecGpuEnv(jobs, cluster(ONE_RACK), 1, 3, 4, "dual", "srtf", wait=True, non_blocking=True)
    obs, _ = env.reset()
    assert env.decision(0) == (0.0, 1, -1)
    assert obs["action_mask"][0].tolist() == [True, False, False, False, False]  # no wait
    for gpu in (0, 0, 1, 2):  # J1 on {0, 1, 2}
        obs, *_ = env.step(np.array([gpu]))
    # 1 s: J2 does not fit, so there is no decision until J3 arrives at 2 s: only J3 shown
    assert env.decision(0) == (2.0, 2, -1)
    assert obs["action_mask"][0].tolist() == [True, False, False, False, False]
    obs, *_ = env.step(np.array([0]))
    # J3's placement: J2 (waiting) does not fit, so holding J3 delays no one: the wait is valid
    assert obs["action_mask"][0].tolist() == [False, False, False, True, True]


def test_non_blocking_holds_no_job_while_another_could_start():
    # J1 (0 s, 10 s, 1 GPU), J2 (0 s, 20 s, 2 GPUs), J3 (0 s, 5 s, 1 GPU): fifo, the agent
    # places; at J2's placement J3 fits too, so only a blocking env lets J2 be held
    jobs = workload([GpuJob(1, 0, 10, 1), GpuJob(2, 0, 20, 2), GpuJob(3, 0, 5, 1)])
    for non_blocking, hold in ((False, True), (True, False)):
        env = VecGpuEnv(jobs, cluster(ONE_RACK), 1, 3, 4, "placement", "fifo", wait=True,
                        non_blocking=non_blocking)  # fmt: skip
        env.reset()
        obs, *_ = env.step(np.array([0]))  # J1 on GPU 0
        assert env.decision(0) == (0.0, 1, 1) and obs["action_mask"][0, WAIT] == hold


@pytest.mark.parametrize(("mode", "placement"), [("placement", "best_fit"), ("dual", "speed_fit")])
def test_non_blocking_heuristics_are_the_wait_rule(mode, placement):
    from test_gpu_env import CLUSTER, WORKLOAD, drive

    env = VecGpuEnv(WORKLOAD, CLUSTER, 1, 200, 8, mode, "srtf", (1.0, 0.0, 0.1), seed=7,
                    baseline=placement, wait=True, non_blocking=True)  # fmt: skip
    env.reset()
    env.begin_at([100])
    metrics, total = drive(env, "srtf", placement)
    r = simulate_gpu(WORKLOAD, CLUSTER, "srtf", placement, 7, 100, 200, wait=True)
    assert metrics == {k: r.metrics[k] for k in env.METRICS}
    assert total == pytest.approx(0, abs=1e-6)  # the baseline is the wait rule itself


# The set-aside hold (docs/gpu.md, "The set-aside hold"), on a P100 (machine 0, speed 0.6)
# and a V100 (machine 1, 1.0) of one GPU each: A (0 s, 100 s) takes the V100 under fifo +
# speed_fit; B (10 s, R s) finds only the P100 free; C (20 s, 50 s).
TWO_SPEEDS = [RefMachine(0, 1, speed=0.6, nominal=0.6), RefMachine(0, 1)]


def three_jobs(runtime_b):
    return workload([GpuJob(1, 0, 100, 1), GpuJob(2, 10, runtime_b, 1), GpuJob(3, 20, 50, 1)])


@pytest.mark.parametrize(
    ("runtime_b", "starts", "ends"),
    [
        # 100 + 1000 / 1.0 = 1,100 < 10 + 1000 / 0.6 = 1,676.7: B is set aside at 10 s and
        # again at 20 s, where C takes the P100 (ends at 20 + 50 / 0.6); B starts on the V100
        # when A ends
        (1000, [0, 100, 20], [100, 1100, 20 + 50 / 0.6]),
        # 100 + 100 = 200 > 10 + 100 / 0.6 = 176.7: B starts on the P100 at once, C waits
        # for the V100: the wait rule
        (100, [0, 10, 100], [100, 10 + 100 / 0.6, 150]),
    ],
)
def test_the_hold_rule_sets_aside_a_job_that_would_end_sooner_on_faster_gpus_later(
    runtime_b, starts, ends
):
    jobs, c = three_jobs(runtime_b), cluster(TWO_SPEEDS)
    held = simulate_gpu(jobs, c, "fifo", "speed_fit", hold=True)
    assert held.start_time.tolist() == pytest.approx(starts)
    assert held.end_time.tolist() == pytest.approx(ends)
    waited = simulate_gpu(jobs, c, "fifo", "speed_fit", wait=True)
    assert waited.end_time.tolist() == pytest.approx([100, 10 + runtime_b / 0.6, 150])


def test_the_wait_slot_sets_aside_while_the_hold_rule_would_and_reproduces_it():
    jobs, c = three_jobs(1000), cluster(TWO_SPEEDS)
    env = VecGpuEnv(jobs, c, 1, 3, 4, "placement", "fifo", baseline="speed_fit", wait=True,
                    non_blocking=True, set_aside=True)  # fmt: skip
    assert env.teacher_slots == WAIT + 1  # imitation clones the hold rule's set-asides too
    obs, _ = env.reset()
    obs, *_ = env.step(np.array([1]))  # A on the V100
    assert env.decision(0) == (10.0, 0, 1) and obs["jobs"][0, WAIT, 8] == 1
    assert env.heuristic_actions().tolist() == [WAIT]
    obs, reward, *_ = env.step(np.array([WAIT]))
    # 20 s: B was set aside until C came; B is committed again, and C fits: the plain wait
    # would not be valid, the set-aside is
    assert env.decision(0) == (20.0, 1, 1) and reward[0] == 0
    assert obs["action_mask"][0].tolist() == [True, False, False, False, True]
    obs, *_ = env.step(np.array([WAIT]))
    assert env.decision(0) == (20.0, 1, 2)  # C committed at the same time, B waits
    # nothing else fits (B is set aside), but the hold rule would not hold C: no plain wait
    assert not obs["action_mask"][0, WAIT] and env.heuristic_actions().tolist() == [0]
    from test_gpu_env import drive

    env.reset()
    metrics, total = drive(env, "fifo", "speed_fit")
    rule = simulate_gpu(jobs, c, "fifo", "speed_fit", hold=True).metrics
    assert metrics == {k: rule[k] for k in env.METRICS}
    assert metrics["avg_jct"] == pytest.approx((100 + 1090 + 50 / 0.6) / 3)
    assert total == pytest.approx(0, abs=1e-6)  # the baseline is the hold rule itself


@pytest.mark.parametrize("mode", ["placement", "dual"])
def test_set_aside_heuristics_are_the_hold_rule(mode):
    from test_gpu_env import CLUSTER, WORKLOAD, drive

    env = VecGpuEnv(WORKLOAD, CLUSTER, 1, 200, 8, mode, "srtf", (1.0, 0.0, 0.1), seed=7,
                    baseline="speed_fit", wait=True, non_blocking=True, set_aside=True)  # fmt: skip
    env.reset()
    env.begin_at([100])
    metrics, total = drive(env, "srtf", "speed_fit")
    r = simulate_gpu(WORKLOAD, CLUSTER, "srtf", "speed_fit", 7, 100, 200, hold=True)
    waited = simulate_gpu(WORKLOAD, CLUSTER, "srtf", "speed_fit", 7, 100, 200, wait=True)
    assert metrics == {k: r.metrics[k] for k in env.METRICS}
    assert r.metrics["avg_jct"] != waited.metrics["avg_jct"]  # some job was set aside
    assert total == pytest.approx(0, abs=1e-6)


def test_a_wait_rule_teacher_leaves_the_set_aside_to_the_agent():
    # teacher_holds False: the same set-aside is valid, but the baseline and the heuristics'
    # actions are fifo + speed_fit + wait, which places B on the P100 at 10 s
    from test_gpu_env import drive

    jobs, c = three_jobs(1000), cluster(TWO_SPEEDS)
    env = VecGpuEnv(jobs, c, 1, 3, 4, "placement", "fifo", baseline="speed_fit", wait=True,
                    non_blocking=True, set_aside=True, teacher_holds=False)  # fmt: skip
    assert env.teacher_slots == WAIT  # imitation leaves the wait slot out
    obs, _ = env.reset()
    obs, *_ = env.step(np.array([1]))  # A on the V100
    assert env.decision(0) == (10.0, 0, 1) and obs["action_mask"][0, WAIT]
    assert env.heuristic_actions().tolist() == [0]
    env.reset()
    metrics, total = drive(env, "fifo", "speed_fit")
    rule = simulate_gpu(jobs, c, "fifo", "speed_fit", wait=True).metrics
    assert metrics == {k: rule[k] for k in env.METRICS}
    assert total == pytest.approx(0, abs=1e-6)  # the baseline is the wait rule
    # the agent's set-asides are rewarded against it: B set aside twice, as the hold rule does
    env.reset()
    total = 0.0
    for action in (1, WAIT, WAIT, 0, 1):  # A; B aside at 10 s and 20 s; C on the P100; B
        obs, reward, terminated, _, info = env.step(np.array([action]))
        total += float(reward[0])
    held = simulate_gpu(jobs, c, "fifo", "speed_fit", hold=True).metrics
    assert terminated[0] and float(info["avg_jct"][0]) == held["avg_jct"]
    assert total == pytest.approx((rule["avg_jct"] - held["avg_jct"]) * 3 / 3600 / 3)


def test_the_set_aside_needs_the_wait_and_non_blocking():
    with pytest.raises(ValueError, match="the set-aside hold needs wait and non_blocking"):
        VecGpuEnv(three_jobs(1000), cluster(TWO_SPEEDS), 1, 3, 4, wait=True, set_aside=True)
