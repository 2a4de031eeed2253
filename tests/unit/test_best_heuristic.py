"""Every heuristic's view and the best heuristic per window (docs/environment.md, "Heuristic
ranks" and "Best heuristic"): ranks by hand, the teacher and the baseline against the
simulator's runs, a training run that resumes to the weights of an uninterrupted one."""

import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch
from reference_sim import Job
from simhelpers import TINY_TRAINING, straight_and_resumed, trace_of

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.env.mixed import MixedVecEnv
from ddppo_hpc.env.vector import JOB_FEATURES, RANK_JOB_FEATURES, feature_widths
from ddppo_hpc.sim import POLICIES, simulate

WINDOW = 100


@pytest.fixture(scope="module")
def trace():
    return generate(3000, machine_procs=64, seed=5)


def ranked_queue_env(**options) -> VecSchedulingEnv:
    """4 procs, no backfilling. A (2 procs, user 7) starts at 0 and ends at 100; X (4 procs)
    is committed at 0 and starts at 100; B, C, D arrive at 10, 20, 30 and wait: at the
    decision at t = 100 they have waited 90, 80 and 70 s."""
    jobs = [
        Job(1, 0, 100, 2, 100, 7),  # A
        Job(2, 0, 10, 4, 10, 9),  # X
        Job(3, 10, 50, 1, 400, 5),  # B
        Job(4, 20, 50, 2, 400, 7),  # C: A's user
        Job(5, 30, 50, 4, 100, 6),  # D
    ]
    return VecSchedulingEnv(trace_of(jobs, 4), 1, 5, 3, "none", heuristic_ranks=True, **options)


def test_heuristic_ranks_by_hand():
    env = ranked_queue_env()
    env.reset()
    env.step(np.array([0]))  # A starts
    obs, *_ = env.step(np.array([0]))  # X waits for A's procs, then the decision at 100
    jobs = obs["jobs"][0]
    assert jobs.shape == (3, JOB_FEATURES + RANK_JOB_FEATURES)
    assert jobs[:, 0] * 12 * 3600 == pytest.approx([90, 80, 70])  # B, C, D
    # SJF r: 400, 400, 100: D, then B before C (a tie, queue order).
    # WFP3 -(w/r)^3 n: B -(90/400)^3 = -0.0114, C -(80/400)^3 * 2 = -0.016,
    #   D -(70/100)^3 * 4 = -1.372: D, C, B.
    # UNICEP -w / (log2(n) r): B -90 / (1e-15 * 400) = -2.25e14, C -80 / 400 = -0.2,
    #   D -70 / (2 * 100) = -0.35: B, D, C.
    # SJBF p: B 400 (no history), C min(100, 400) = 100 (A, of its user, ended at 100),
    #   D 100 (its request): C before D (a tie), then B.
    # F1 (feature 10) log10(r) n + 870 log10(s): B 872.6, C 1137.1, D 1293.1: B, C, D.
    expected = {
        JOB_FEATURES - 1: [0, 1, 2],
        JOB_FEATURES: [1, 2, 0],
        JOB_FEATURES + 1: [2, 1, 0],
        JOB_FEATURES + 2: [0, 2, 1],
        JOB_FEATURES + 3: [2, 0, 1],
    }
    for column, ranks in expected.items():
        assert jobs[:, column].tolist() == pytest.approx(np.array(ranks) / 3), column


def test_ranks_follow_the_history_features(trace):
    options = dict(window_jobs=WINDOW, max_queue=32, seed=3, history=True)
    plain = VecSchedulingEnv(trace, 2, **options)
    ranked = VecSchedulingEnv(trace, 2, heuristic_ranks=True, **options)
    width = plain.job_features
    assert ranked.job_features == width + RANK_JOB_FEATURES
    assert feature_widths(True, False, True) == (ranked.job_features, ranked.cluster_features)
    a, b = plain.reset()[0], ranked.reset()[0]
    rng = np.random.default_rng(0)
    for _ in range(150):
        assert np.array_equal(a["jobs"], b["jobs"][..., :width])
        assert np.array_equal(a["cluster"], b["cluster"])
        visible = b["jobs"][..., 6].sum(axis=1).astype(int)
        for i, n in enumerate(visible):  # each column: the ranks 0 .. n - 1, over K
            ranks = np.sort(b["jobs"][i, :n, width:] * 32, axis=0)
            assert np.allclose(ranks, np.arange(n)[:, None])
        actions = plain.random_actions(rng)
        a, b = plain.step(actions)[0], ranked.step(actions)[0]


def best_of(
    trace, start: int, backfill: str, estimate: str, jobs: int = WINDOW
) -> tuple[str, float]:
    """The heuristic order with the lowest avg bsld on `jobs` jobs from `start` (the first on
    ties)."""
    bsld = {p: simulate(trace, p, backfill, start, jobs, estimate).metrics for p in POLICIES}
    best = min(POLICIES, key=lambda p: bsld[p]["avg_bsld"])
    return best, bsld[best]["avg_bsld"]


@pytest.mark.parametrize(
    "backfill, estimate, agent_backfill",
    [("none", "request", False), ("easy", "request", True), ("easy", "predicted", True)],
)
def test_the_teacher_is_the_best_heuristic_and_scores_its_run(
    trace, backfill, estimate, agent_backfill
):
    # Every job visible; the agent's picks and backfills follow the teacher, so its episode is
    # the teacher's own run: the lowest avg bsld of every heuristic's on the window.
    env = VecSchedulingEnv(
        trace, 4, WINDOW, WINDOW, backfill, seed=7, estimate=estimate, teacher="best",
        agent_backfill=agent_backfill,
    )  # fmt: skip
    env.reset()
    teachers = [env.teacher(i) for i in range(4)]
    seen, checked = set(), 0
    while checked < 12:
        _, _, terminated, _, info = env.step(env.heuristic_actions())
        for i in np.flatnonzero(terminated):
            start = int(info["episode_start"][i])  # the window of the episode that ended
            best, bsld = best_of(trace, start, backfill, estimate)
            assert teachers[i] == best and env.last_best(i) == (best, bsld)
            assert info["avg_bsld"][i] == bsld
            seen.add(best)
            checked += 1
            teachers[i] = env.teacher(i)  # the next episode's
    assert len(seen) > 1


def test_teacher_jobs_choose_the_teacher_on_a_longer_stretch(trace):
    # The teacher is the best heuristic on 4 x WINDOW jobs from the episode's start (clipped
    # at the trace's end); the episode's own best stays the reward baseline.
    starts = [0, 300, 700, 1100, 1500, 1900, 2300, 2700, len(trace) - WINDOW]
    env = VecSchedulingEnv(
        trace, len(starts), WINDOW, WINDOW, seed=3, teacher="best", baseline="best",
        teacher_jobs=4 * WINDOW,
    )  # fmt: skip
    env.reset()
    env.begin_at(starts)
    stretch = [min(4 * WINDOW, len(trace) - s) for s in starts]
    longer = [best_of(trace, s, "easy", "request", n)[0] for s, n in zip(starts, stretch)]
    assert [env.teacher(i) for i in range(len(starts))] == longer
    assert longer != [best_of(trace, s, "easy", "request")[0] for s in starts]
    _, reward, terminated, _, info = env.step(env.heuristic_actions())
    while not terminated[0]:
        _, reward, terminated, _, info = env.step(env.heuristic_actions())
    ours, window_best = info["avg_bsld"][0], best_of(trace, 0, "easy", "request")
    assert reward[0] == pytest.approx(-(ours - window_best[1]), rel=1e-6)
    assert env.last_best(0) == window_best


def test_rewards_relative_to_the_best_heuristic(trace):
    # FCFS picks (the default teacher); the reward is minus FCFS's avg bsld minus the best's.
    env = VecSchedulingEnv(trace, 2, WINDOW, WINDOW, seed=3, baseline="best")
    env.reset()
    assert env.teacher(0) == "fcfs"
    while True:
        _, reward, terminated, _, info = env.step(env.heuristic_actions())
        if terminated[0]:
            break
    start = int(info["episode_start"][0])
    ours = simulate(trace, "fcfs", "easy", start, WINDOW).metrics["avg_bsld"]
    best, theirs = best_of(trace, start, "easy", "request")
    assert best != "fcfs" and env.last_best(0) == (best, theirs)
    assert reward[0] == pytest.approx(-(ours - theirs), rel=1e-6)


def test_a_mixed_batch_reports_each_groups_best(trace):
    other = generate(2000, machine_procs=128, seed=2)
    options = dict(window_jobs=80, max_queue=80, teacher="best", baseline="best")
    groups = [VecSchedulingEnv(trace, 2, seed=5, **options)]
    groups.append(VecSchedulingEnv(other, 3, seed=7, **options))
    mixed = MixedVecEnv(groups)
    mixed.reset()
    checked = 0
    while checked < 8:
        _, _, terminated, _, info = mixed.step(mixed.heuristic_actions())
        for i in np.flatnonzero(terminated):
            start, source = int(info["episode_start"][i]), mixed.window_trace(i)
            runs = {p: simulate(source, p, "easy", start, 80).metrics["avg_bsld"] for p in POLICIES}
            best = min(POLICIES, key=runs.get)
            assert mixed.last_best(i) == (best, runs[best])
            checked += 1


def test_without_best_nothing_is_run(trace):
    env = VecSchedulingEnv(trace, 1, WINDOW, WINDOW, policy="sjf", seed=3)
    env.reset()
    assert np.isnan(env.last_best(0)[1])  # no episode finished yet
    while not env.step(env.heuristic_actions())[2][0]:
        pass
    assert env.teacher(0) == "sjf" and np.isnan(env.last_best(0)[1])


def test_bad_options_by_name(trace):
    with pytest.raises(ValueError, match="teacher_jobs chooses the best heuristic: it needs"):
        VecSchedulingEnv(trace, 1, WINDOW, teacher_jobs=400)
    with pytest.raises(ValueError, match="teacher_jobs must be at least 0, not -1"):
        VecSchedulingEnv(trace, 1, WINDOW, teacher="best", teacher_jobs=-1)
    with pytest.raises(ValueError, match="unknown teacher 'worst'"):
        VecSchedulingEnv(trace, 1, WINDOW, teacher="worst")
    with pytest.raises(ConfigError, match="'env.teacher' must be one of backfill_order, best"):
        load_config(None, ["env.teacher=worst"])
    with pytest.raises(ConfigError, match="'env.teacher_jobs' needs 'env.teacher' best"):
        load_config(None, ["env.teacher_jobs=1024"])
    with pytest.raises(ConfigError, match="'env.teacher_jobs' must be at least 0"):
        load_config(None, ["env.teacher=best", "env.teacher_jobs=-1"])
    with pytest.raises(ConfigError, match="'env.heuristic_ranks' must be bool"):
        load_config(None, ["env.heuristic_ranks=3"])
    assert load_config(None, ["env.reward_baseline=best"]).env.reward_baseline == "best"
    gpu = ["gpu.mode=placement", "policy.name=mlp"]
    for option in ("env.teacher=best", "env.heuristic_ranks=true"):
        name = option.split("=")[0]
        with pytest.raises(ConfigError, match=f"'{name}' is for the HPC queue"):
            load_config(None, [*gpu, option])


def test_a_run_with_them_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    options = [
        *TINY_TRAINING,
        "env.heuristic_ranks=true",
        "env.teacher=best",
        "env.reward_baseline=best",
        "env.history=true",
        "ppo.imitation_updates=2",
    ]
    a, b = straight_and_resumed(tmp_path, options, stop=1)
    straight = tmp_path / "straight"
    assert b["update"] == 4
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    with h5py.File(straight / "metrics.h5") as f:  # the best heuristic's, where episodes ended
        ended, logged = f["episodes"][...] > 0, f["baseline_bsld"][...]
    assert ended.any() and (logged[ended] >= 1).all() and np.isnan(logged[~ended]).all()
    # Evaluation plays the policy on the observation it trained on (the ranks included).
    evaluate = [sys.executable, "-m", "ddppo_hpc.evaluate", "--windows", "2", "--jobs", "64"]
    out = subprocess.run([*evaluate, "--checkpoint", str(straight), "--policies", "ddppo"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[2].split()[:3] == ["ddppo", "easy", "2"]
