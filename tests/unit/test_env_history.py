"""The history features (env.history; docs/environment.md, "History"): EASY++ predictions
and per-user history per job slot, the queue past slot K in the cluster features. By hand
on tiny traces, against the observation without them, and against a full view of the queue."""

import dataclasses

import numpy as np
import pytest
from reference_sim import Job
from simhelpers import trace_of

from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import EPISODE_METRICS, VecSchedulingEnv
from ddppo_hpc.env.vector import CLUSTER_FEATURES, JOB_FEATURES, feature_widths
from ddppo_hpc.sim import simulate

T = 12 * 3600
A, B = 1, 2  # users


def log_time(t):
    return min(np.log10(1 + t) / 6, 1)


def history_row(predicted, request, ratio, mean, count, running, waiting, k):
    """Features JOB_FEATURES .. JOB_FEATURES + 6 of a job slot."""
    return np.array(
        [
            log_time(predicted),
            predicted / request,
            ratio,
            log_time(mean),
            count / 2,
            min(running / k, 1),
            min(waiting / k, 1),
        ],
        dtype=np.float32,
    )


def step(env, action):
    return env.step(np.array([action], dtype=np.int32))[0]


# 4 procs, no backfilling, FCFS picks (slot 0). J1 runs 0..10 and J2 (committed) 10..40;
# J3 and J4 arrive at 10, when J1 has just ended: J3 runs 10..15, J4 (committed) 40..60;
# J5 arrives at 50, after J1 and J3 of its user have ended.
HAND = [
    Job(1, 0, 10, 4, 20, A),
    Job(2, 0, 30, 2, 40, B),
    Job(3, 10, 5, 2, 50, A),
    Job(4, 10, 20, 4, 20, B),
    Job(5, 50, 1, 1, 100, A),
]
K = 4


def hand_env(history=True):
    return VecSchedulingEnv(trace_of(HAND, 4), 1, len(HAND), K, backfill="none", history=history)


def test_history_features_by_hand():
    env = hand_env()
    obs, _ = env.reset()
    jobs = obs["jobs"][0]
    assert jobs.shape == (K, JOB_FEATURES + 7) and obs["cluster"].shape == (1, CLUSTER_FEATURES + 6)
    # t = 0: no history yet. J1 predicts its request; each user has one job waiting.
    assert np.allclose(jobs[0, JOB_FEATURES:], history_row(20, 20, 1, 0, 0, 0, 1, K))
    assert np.allclose(jobs[1, JOB_FEATURES:], history_row(40, 40, 1, 0, 0, 0, 1, K))
    obs = step(env, 0)  # J1 starts at 0; J2 alone at 0, B has nothing running yet
    assert np.allclose(obs["jobs"][0, 0, JOB_FEATURES:], history_row(40, 40, 1, 0, 0, 0, 1, K))
    obs = step(env, 0)  # J2 waits for J1's end at 10 and starts; the decision is at 10
    jobs = obs["jobs"][0]
    # J1 ended exactly at 10: it counts. A: runtime 10 of request 20.
    assert np.allclose(jobs[0, JOB_FEATURES:], history_row(10, 50, 0.5, 10, 1, 0, 1, K))
    # B's J2 runs (B has no completed job): J4 predicts its request.
    assert np.allclose(jobs[1, JOB_FEATURES:], history_row(20, 20, 1, 0, 0, 1, 1, K))
    obs = step(env, 0)  # J3 starts at 10 (2 procs free); J4 waits
    assert np.allclose(obs["jobs"][0, 0, JOB_FEATURES:], history_row(20, 20, 1, 0, 0, 1, 1, K))
    obs = step(env, 0)  # J4 waits for J2's end at 40; the queue is empty until J5 at 50
    # A: J1 (10 of 20) and J3 (5 of 50): mean runtime 7.5, mean ratio (0.5 + 0.1) / 2.
    expected = history_row(7.5, 100, 0.3, 7.5, 2, 0, 1, K)
    assert np.allclose(obs["jobs"][0, 0, JOB_FEATURES:], expected)
    assert np.array_equal(obs["cluster"][0, 3:], np.zeros(6))  # nothing past slot K


def test_off_is_the_observation_without_history_columns():
    trace = generate(1500, machine_procs=64, seed=3)
    runs = {}
    for history in (False, True):
        env = VecSchedulingEnv(trace, 2, 200, 8, backfill="easy", seed=4, history=history)
        obs, _ = env.reset()
        seen = []
        for _ in range(300):
            seen.append((obs["jobs"].copy(), obs["cluster"].copy(), obs["action_mask"].copy()))
            obs = env.step(env.heuristic_actions())[0]
        runs[history] = seen
    assert feature_widths(False) == (JOB_FEATURES, CLUSTER_FEATURES)
    assert runs[False][0][0].shape[-1] == JOB_FEATURES
    for (jobs, cluster, mask), (jobs_h, cluster_h, mask_h) in zip(runs[False], runs[True]):
        assert np.array_equal(jobs, jobs_h[..., :JOB_FEATURES])
        assert np.array_equal(cluster, cluster_h[:, :CLUSTER_FEATURES])
        assert np.array_equal(mask, mask_h)


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
@pytest.mark.parametrize("policy", ["fcfs", "f1"])
def test_heuristic_with_history_equals_the_simulator(policy, backfill):
    trace = generate(2000, machine_procs=64, seed=5)
    window = 150
    env = VecSchedulingEnv(
        trace, 2, window, window, backfill=backfill, policy=policy, seed=11, history=True
    )
    env.reset()
    checked = 0
    while checked < 4:
        _, _, terminated, _, info = env.step(env.heuristic_actions())
        for i in np.flatnonzero(terminated):
            expected = simulate(
                trace, policy, backfill, start=int(info["episode_start"][i]), jobs=window
            )
            assert {m: info[m][i] for m in EPISODE_METRICS} == {
                m: expected.metrics[m] for m in EPISODE_METRICS
            }
            checked += 1


# 8 procs: J0 fills the machine until 100; five jobs of 1, 2, 3, 5 and 8 procs (1 h
# requests) wait from t = 1, and K = 2 shows only the first two.
BEYOND = [Job(0, 0, 100, 8, 100, A)] + [
    Job(i, 1, 50, n, 3600, B) for i, n in enumerate([1, 2, 3, 5, 8], start=1)
]


def test_queue_beyond_k_by_hand():
    env = VecSchedulingEnv(trace_of(BEYOND, 8), 1, 6, 2, backfill="none", history=True)
    env.reset()
    obs = step(env, 0)  # J0 starts; at t = 1 the queue is J1..J5
    hidden_work = (3 + 5 + 8) * 3600 / (8 * T)
    expected = [3 / 6, np.log10(1 + hidden_work) / 2, 0, 0, 1 / 3, 2 / 3]
    assert np.allclose(obs["cluster"][0, 3:], expected)
    assert np.allclose(obs["jobs"][0, :, JOB_FEATURES + 6], [1, 1])  # B: 5 waiting, capped at K = 2
    obs = step(env, 1)  # J2 waits for J0's end at 100 and starts: J1, J3 shown; J5, J8 hidden
    hidden_work = (5 + 8) * 3600 / (8 * T)
    assert np.allclose(obs["cluster"][0, 3:], [2 / 6, np.log10(1 + hidden_work) / 2, 0, 0, 0, 1])


def test_hidden_summary_matches_a_full_view_of_the_queue():
    # FCFS picks slot 0 whatever K is: a run with K = 4 and one with every job visible take
    # the same decisions (EASY backfills hidden jobs too), and the full one shows the queue.
    trace = generate(1200, machine_procs=64, seed=8)

    def user_of(procs):  # every job's user, as the rows show it: by its size
        return procs.astype(np.int64) % 5

    trace = dataclasses.replace(trace, user=user_of(trace.procs))
    window, small = 120, 4
    full_env = VecSchedulingEnv(trace, 1, window, window, backfill="easy", seed=2, history=True)
    small_env = VecSchedulingEnv(trace, 1, window, small, backfill="easy", seed=2, history=True)
    full, _ = full_env.reset()
    part, _ = small_env.reset()
    hidden_seen = 0
    for _ in range(window - 1):
        rows = full["jobs"][0][full["action_mask"][0]]
        hidden = rows[small:]
        cluster = part["cluster"][0, 3:]
        assert cluster[0] == pytest.approx(len(hidden) / window)
        if len(hidden):
            procs = np.rint(hidden[:, 2] * 64)
            request = 10 ** (6 * hidden[:, 7].astype(np.float64)) - 1  # feature 7, below 10^6 s
            work = (procs * request).sum() / (64 * T)
            assert cluster[1] == pytest.approx(np.log10(1 + work) / 2, rel=1e-4)
            classes = np.select([procs <= 8, procs <= 16, procs <= 32], [0, 1, 2], 3)
            fractions = np.bincount(classes, minlength=4) / len(hidden)
            assert np.allclose(cluster[2:], fractions)
            hidden_seen += 1
        # The users' waiting counts, over the whole queue (K = window: no cap reached).
        users = user_of(np.rint(rows[:, 2] * 64))
        H = slice(JOB_FEATURES, JOB_FEATURES + 5)  # the EASY++ and recent-history features
        for row, user in zip(rows, users, strict=True):
            assert row[JOB_FEATURES + 6] == pytest.approx((users == user).sum() / window)
        assert np.array_equal(part["jobs"][0][:, H], full["jobs"][0][:small, H])
        full, _, done, *_ = full_env.step(np.zeros(1, dtype=np.int32))
        part, *_ = small_env.step(np.zeros(1, dtype=np.int32))
        if done[0]:
            break
    assert hidden_seen > 10
