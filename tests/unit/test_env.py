"""The RL environment: exact against the simulator, observations, rewards, Gymnasium API."""

import dataclasses
import math

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_sim import Job
from simhelpers import trace_of

from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import EPISODE_METRICS, SchedulingEnv, VecSchedulingEnv
from ddppo_hpc.env.vector import JOB_FEATURES, user_indices
from ddppo_hpc.sim import BACKFILLS, ESTIMATES, POLICIES, simulate

WINDOW = 150


@pytest.fixture(scope="module")
def trace():
    return generate(3000, machine_procs=64, seed=5)


@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize("wait", [False, True])  # the heuristics never wait
@pytest.mark.parametrize("backfill", BACKFILLS)
@pytest.mark.parametrize("policy", POLICIES)
def test_heuristic_through_env_equals_the_simulator(trace, policy, backfill, wait, estimate):
    # Every waiting job is visible (K = window), so the helper sees what the simulator sees.
    env = VecSchedulingEnv(
        trace, 3, WINDOW, WINDOW, backfill, policy, seed=11, wait=wait, estimate=estimate
    )
    env.reset()
    assert len(env.last_start_times(0)) == 0  # no episode finished yet
    checked = 0
    while checked < 6:
        _, _, terminated, _, info = env.step(env.heuristic_actions())
        for i in np.flatnonzero(terminated):
            start = int(info["episode_start"][i])
            expected = simulate(trace, policy, backfill, start, WINDOW, estimate)
            assert {m: info[m][i] for m in EPISODE_METRICS} == {
                m: expected.metrics[m] for m in EPISODE_METRICS
            }
            assert np.array_equal(env.last_start_times(i), expected.start_time)
            checked += 1


def tiny_env(**options):
    # 4 procs. Job 1 (user 7, 3 procs) starts at 0 and runs to 100; jobs 2..4 wait at t=10.
    jobs = [
        Job(1, 0, 100, 3, 200, 7),
        Job(2, 10, 5, 2, 10, 8),
        Job(3, 10, 5, 1, 7200, 7),
        Job(4, 10, 50, 4, 50, 8),
    ]
    trace = trace_of(jobs, 4)
    return VecSchedulingEnv(trace, 1, window_jobs=4, max_queue=3, **options)


def test_observation_features_by_hand():
    env = tiny_env(backfill="none")
    obs, info = env.reset()
    assert info["episode_start"][0] == 0
    # At t=0 the only decision is job 1 alone in the queue.
    assert obs["action_mask"][0].tolist() == [True, False, False]
    obs, reward, terminated, _, _ = env.step(np.array([0]))
    assert not terminated[0] and reward[0] == 0
    jobs, cluster = obs["jobs"][0], obs["cluster"][0]
    assert obs["action_mask"][0].tolist() == [True, True, True]
    half_day = 12 * 3600
    # Job 2: waited 0 s, asks 10 s, 2 of 4 procs, cannot start (1 proc free), its user 8
    # runs nothing, queued work of user 8: 2*10 + 4*50 proc-seconds; log10(1 + 10) / 6,
    # log10(1 + 0) / 6, log2(2) / log2(4).
    expected = [0, 10 / half_day, 0.5, 0, 0, 220 / (4 * half_day), 1]
    expected += [np.log10(11) / 6, 0, 0.5, 0]
    assert jobs[0].tolist() == pytest.approx(expected)
    # Job 3: user 7 runs 3 of 4 procs; it fits in the free proc; 1 proc: log2 term 0.
    assert jobs[1][3] == 1 and jobs[1][4] == pytest.approx(0.75)
    assert jobs[1][1] == pytest.approx(7200 / half_day)
    assert jobs[1][7] == pytest.approx(np.log10(7201) / 6) and jobs[1][9] == 0
    # F1 = log10(r) * n + 870 log10(10): 2 (job 2), 3.86 (job 3), 6.80 (job 4): ranks / K.
    assert [jobs[k][10] for k in range(3)] == pytest.approx([0, 1 / 3, 2 / 3])
    # Cluster: 1 of 4 procs free; job 1 has 190 s of its 200 s request left on 3 procs.
    assert cluster.tolist() == pytest.approx([0.25, 3 * 190 / (4 * half_day), 1.0])


def request_log_features(requests) -> list[float]:
    """Feature 7 (the request's log) of jobs of these requests, from the C++ core: at t = 0
    every job waits and is visible."""
    jobs = [Job(k + 1, 0, 1, 1, float(r)) for k, r in enumerate(requests)]
    n = len(jobs)
    env = VecSchedulingEnv(trace_of(jobs, 1), 1, window_jobs=n, max_queue=n, backfill="none")
    obs, _ = env.reset()
    return obs["jobs"][0, :, 7].tolist()


def glibc_log_features(requests) -> list[float]:
    """The float advise computes (and docs/environment.md defines) with math.log10."""
    return [float(np.float32(min(math.log10(1.0 + r) / 6, 1.0))) for r in requests]


# The C++ core's log features skip log10 where a close estimate decides the float (src/env.cpp,
# log_time): they must still be glibc's log10 bit for bit.
@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1e13, allow_subnormal=False), min_size=1, max_size=32))
def test_log_features_are_log10_bit_for_bit_at_the_edges(requests):
    assert request_log_features(requests) == glibc_log_features(requests)


def test_log_features_are_log10_bit_for_bit_over_every_decade():
    # 20,000 times from 1 ms to 30 years, log-uniform, half of them whole seconds.
    times = 10 ** np.random.default_rng(0).uniform(-3, 9, 20_000)
    times[::2] = np.floor(times[::2])
    assert request_log_features(times) == glibc_log_features(times.tolist())


def test_a_job_without_a_user_is_a_user_of_its_own():
    # tiny_env's trace with user -1 (SWF: unknown) for every job: no job shares a user's
    # running procs or queued work with another.
    env = tiny_env(backfill="none")
    env = VecSchedulingEnv(
        dataclasses.replace(env.trace, user=np.full(4, -1)), 1, window_jobs=4, max_queue=3,
        backfill="none", history=True,
    )  # fmt: skip
    env.reset()
    obs, *_ = env.step(np.array([0]))
    jobs, half_day, K = obs["jobs"][0], 12 * 3600, 3
    assert jobs[:, 4].tolist() == [0, 0, 0]  # job 1's 3 procs are its user's alone
    own_work = [2 * 10, 1 * 7200, 4 * 50]
    assert jobs[:, 5].tolist() == pytest.approx([w / (4 * half_day) for w in own_work])
    running, waiting = jobs[:, JOB_FEATURES + 5], jobs[:, JOB_FEATURES + 6]
    assert running.tolist() == [0] * 3 and waiting.tolist() == pytest.approx([1 / K] * 3)
    dense, users = user_indices(np.array([5, -1, 3, -1, 5]))
    assert dense.tolist() == [1, 2, 0, 3, 1] and users == 4


def test_invalid_actions_pick_the_oldest_job_and_rewards_come_at_the_end():
    env = tiny_env(backfill="none", reward="wait")
    env.reset()
    env.step(np.array([0]))
    _, _, terminated, _, _ = env.step(np.array([99]))  # out of range: slot 0 (job 2)
    rewards = []
    while not terminated[0]:
        _, reward, terminated, _, info = env.step(np.array([0]))
        rewards.append(float(reward[0]))
    assert rewards[:-1] == [0.0] * (len(rewards) - 1)
    assert rewards[-1] == pytest.approx(-info["avg_wait"][0] / (12 * 3600))


def first_episode_end(env: VecSchedulingEnv) -> tuple[float, int]:
    """Drives env with its heuristic until an episode ends: (its reward, its window start)."""
    env.reset()
    while True:
        _, r, terminated, _, info = env.step(env.heuristic_actions())
        if terminated.any():
            i = int(np.flatnonzero(terminated)[0])
            return float(r[i]), int(info["episode_start"][i])


@pytest.mark.parametrize("reward", ["bsld", "utilization", "fairshare"])
def test_episode_rewards(trace, reward):
    env = VecSchedulingEnv(trace, 2, window_jobs=100, max_queue=100, reward=reward, seed=3)
    reward_of_episode, start = first_episode_end(env)
    result = simulate(trace, "fcfs", "easy", start=start, jobs=100)
    users = result.metrics["user_avg_bsld"]
    expected = {
        "bsld": -result.metrics["avg_bsld"],
        "utilization": result.metrics["utilization"],
        "fairshare": -(result.metrics["avg_bsld"] + np.std(users)),
    }[reward]
    assert reward_of_episode == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize("baseline", ["sjf", "f1"])
def test_rewards_relative_to_a_baseline_heuristic(trace, baseline, estimate):
    # FCFS picks; the reward is FCFS's minus the baseline's on the same window, both
    # backfilling with the same estimates.
    env = VecSchedulingEnv(
        trace, 2, window_jobs=100, max_queue=100, seed=3, baseline=baseline, estimate=estimate
    )
    reward, start = first_episode_end(env)
    ours = simulate(trace, "fcfs", "easy", start, 100, estimate).metrics["avg_bsld"]
    theirs = simulate(trace, baseline, "easy", start, 100, estimate).metrics["avg_bsld"]
    assert ours != theirs
    assert reward == pytest.approx(-(ours - theirs), rel=1e-6)


def test_dense_rewards_pay_each_job_when_it_starts(trace):
    # FCFS without backfilling starts exactly the picked job at each step, in submit order:
    # step t pays minus job t's bounded slowdown over the window's size.
    env = VecSchedulingEnv(trace, 1, window_jobs=100, max_queue=100, backfill="none", dense=True)
    env.reset()
    rewards, terminated = [], [False]
    while not terminated[0]:
        _, reward, terminated, _, info = env.step(env.heuristic_actions())
        rewards.append(float(reward[0]))
    start = int(info["episode_start"][0])
    result = simulate(trace, "fcfs", "none", start=start, jobs=100)
    wait = result.start_time - trace.submit[start : start + 100]
    runtime = trace.runtime[start : start + 100]
    bsld = np.maximum((wait + runtime) / np.maximum(runtime, 10), 1)
    assert len(rewards) == 100 and np.unique(bsld).size > 10
    assert np.allclose(rewards, -bsld / 100, rtol=1e-6)


def first_episode_rewards(env: VecSchedulingEnv, paid: list[float]) -> int:
    """Drives env with its heuristic until row 0's episode ends, appending row 0's rewards to
    `paid`; returns that episode's window start."""
    while True:
        _, r, terminated, _, info = env.step(env.heuristic_actions())
        paid.append(float(r[0]))
        if terminated[0]:
            return int(info["episode_start"][0])


@pytest.mark.parametrize("reward", ["bsld", "wait"])
def test_dense_rewards_sum_to_the_episode_reward(trace, reward):
    # With EASY several jobs can start at one step; the episode's rewards sum to the sparse
    # reward, the baseline's share included, and resuming mid-episode pays nothing twice.
    kwargs = dict(window_jobs=100, max_queue=100, reward=reward, seed=3, baseline="f1")
    sparse_env, sparse = VecSchedulingEnv(trace, 2, **kwargs), []
    sparse_env.reset()
    start = first_episode_rewards(sparse_env, sparse)
    env, paid = VecSchedulingEnv(trace, 2, dense=True, **kwargs), []
    env.reset()
    for _ in range(20):  # of the episode's 38 steps
        paid.append(float(env.step(env.heuristic_actions())[1][0]))
    again = VecSchedulingEnv(trace, 2, dense=True, **kwargs)
    again.load_state(env.state())
    assert first_episode_rewards(again, paid) == start
    assert len(paid) == len(sparse) and sparse[:-1] == [0.0] * (len(sparse) - 1)
    assert sum(paid[:-1]) < 0 and sum(paid) == pytest.approx(sparse[-1], rel=1e-5, abs=1e-6)


def test_dense_rewards_need_a_sum_over_jobs(trace):
    with pytest.raises(ValueError, match="bsld or wait"):
        VecSchedulingEnv(trace, 1, window_jobs=100, reward="utilization", dense=True)


def test_seeded_and_deterministic(trace):
    def run(seed):
        env = VecSchedulingEnv(trace, 4, window_jobs=200, seed=seed)
        _, info = env.reset()
        rng = np.random.default_rng(0)
        frames = [info["episode_start"].copy()]
        for _ in range(300):
            obs, *_ = env.step(env.random_actions(rng))
            frames.append(obs["jobs"].copy())
        return frames

    a, b, c = run(1), run(1), run(2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    assert len(set(a[0].tolist())) == 4  # environments start on different windows


def test_random_actions_are_valid(trace):
    env = VecSchedulingEnv(trace, 8, window_jobs=300, max_queue=16, seed=4)
    obs, _ = env.reset()
    rng = np.random.default_rng(1)
    for _ in range(200):
        actions = env.random_actions(rng)
        assert obs["action_mask"][np.arange(8), actions].all()
        obs, *_ = env.step(actions)


def test_gymnasium_api(trace):
    env = SchedulingEnv(trace, window_jobs=64, max_queue=32, seed=9)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=4)
    again, _ = env.reset(seed=4)
    assert np.array_equal(obs["jobs"], again["jobs"])
    total = 0
    while True:
        obs, reward, terminated, truncated, info = env.step(env.heuristic_action())
        total += 1
        if terminated:
            break
    assert reward == pytest.approx(-info["avg_bsld"], rel=1e-6) and total <= 64


def test_bad_configuration(trace):
    with pytest.raises(ValueError, match="episodes of 5000 jobs do not fit a trace of 3000"):
        VecSchedulingEnv(trace, 1, window_jobs=5000)
    with pytest.raises(ValueError, match="unknown reward 'speed'"):
        VecSchedulingEnv(trace, 1, reward="speed")
    with pytest.raises(ValueError, match="unknown backfill"):
        VecSchedulingEnv(trace, 1, backfill="aggressive")


def test_state_restores_every_environment_mid_episode(trace):
    env = VecSchedulingEnv(trace, 3, window_jobs=120, max_queue=32, seed=5)
    env.reset()
    rng = np.random.default_rng(2)
    for _ in range(150):
        env.step(env.random_actions(rng))
    state = env.state()
    again = VecSchedulingEnv(trace, 3, window_jobs=120, max_queue=32, seed=5)
    obs = again.load_state(state)
    assert np.array_equal(obs["jobs"], env.jobs)
    for _ in range(150):
        actions = env.random_actions(rng)
        a, ra, ta, _, _ = env.step(actions)
        b, rb, tb, _, _ = again.step(actions)
        assert np.array_equal(a["jobs"], b["jobs"]) and np.array_equal(ra, rb)
