"""The agent's backfill decisions (env.agent_backfill; docs/environment.md, "Agent
backfilling"): the mask and features by hand on 4-proc machines for EASY and conservative,
the heuristic's scan through the environment against the simulator, the pick decisions
against the environment without them, with env.wait, resume, evaluation and training."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from reference_sim import Job
from simhelpers import TINY_TRAINING, assert_restored_alike, trace_of, train_run

from ddppo_hpc import evaluate
from ddppo_hpc.advise import cli as advise_cli
from ddppo_hpc.config import ConfigError, EnvConfig, load_config
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.dist import context
from ddppo_hpc.env import EPISODE_METRICS, SchedulingEnv, VecSchedulingEnv
from ddppo_hpc.env.vector import (
    CLUSTER_FEATURES,
    HISTORY_CLUSTER_FEATURES,
    JOB_FEATURES,
    feature_widths,
)
from ddppo_hpc.sim import ESTIMATES, POLICIES, simulate
from ddppo_hpc.train import train

K = 4
STOP = K  # slot K follows the K job slots
T = 12 * 3600


def env_of(jobs, backfill, **options):
    return VecSchedulingEnv(
        trace_of(jobs, 4), 1, len(jobs), K, backfill=backfill, agent_backfill=True, **options
    )


def play(env, actions):
    """Steps `actions`; returns the last step's (observation, terminated)."""
    for action in actions:
        obs, _, terminated, _, _ = env.step(np.array([action], dtype=np.int32))
    return obs, terminated


def decision(obs):
    """(mask, the backfill cluster features) of environment 0."""
    return obs["action_mask"][0].tolist(), obs["cluster"][0, CLUSTER_FEATURES:].tolist()


def stop_row(gap, freed):
    """Slot K's features: the time to the next event and the procs that free up then."""
    row = np.zeros(JOB_FEATURES, dtype=np.float32)
    row[[0, 2, 6, 8]] = [min(gap / T, 1), freed, -1, min(np.log10(1 + gap) / 6, 1)]
    return row


# J1 (2 procs) runs 0..10; J2 (3 procs) is committed at 0: S = 10, extra = 4 - 3 = 1.
# J3 and J4 (1 proc, 100 s) fit only in the extra proc, J5 (1 proc, 5 s) ends by S.
EASY = [
    Job(1, 0, 10, 2, 10, 1),
    Job(2, 0, 10, 3, 10, 1),
    Job(3, 0, 100, 1, 100, 1),
    Job(4, 0, 100, 1, 100, 1),
    Job(5, 0, 5, 1, 5, 1),
]


def test_easy_backfill_decisions_by_hand():
    env = env_of(EASY, "easy")
    obs, _ = env.reset()
    assert obs["jobs"].shape == (1, K + 1, JOB_FEATURES) and obs["cluster"].shape == (1, 7)
    assert decision(obs) == ([True] * K + [False], [0, 0, 0, 0])  # a pick: no stop
    obs, _ = play(env, [0, 0])  # J1 starts; J2 is committed: a backfill decision at 0
    assert decision(obs) == (
        [True, True, True, False, True],
        pytest.approx([1, 10 / T, 1 / 4, 3 / 4]),
    )
    assert np.array_equal(obs["jobs"][0, STOP], stop_row(10, 0.5))  # J1 ends at 10
    assert env.heuristic_actions().tolist() == [0]  # the FCFS scan starts J3 first
    obs, _ = play(env, [1])  # J4 takes the extra proc: J3 no longer fits, J5 still does
    assert decision(obs) == ([False, True, False, False, True], pytest.approx([1, 10 / T, 0, 0.75]))
    assert env.heuristic_actions().tolist() == [1]
    obs, _ = play(env, [STOP])  # to 10: J1 ends, J2 starts; a pick between J3 and J5
    assert decision(obs) == ([True, True, False, False, False], [0, 0, 0, 0])
    _, terminated = play(env, [1, 0])  # J5 is committed (nothing free) and starts at 20
    assert terminated[0]
    assert env.last_start_times(0).tolist() == [0, 10, 20, 0, 20]
    # The scan itself: J3 in the extra proc and J5 by S at 0, J4 after J2 at 20.
    assert simulate(trace_of(EASY, 4), "fcfs", "easy").start_time.tolist() == [0, 10, 0, 20, 0]


# J1 (2 procs) runs 0..10; J2 (4 procs) is committed at 0 and reserved over 10..20. J3
# (1 proc, 100 s) would delay it; J4 (2 procs, 5 s) fits now and is reserved over 0..5, so
# J5 (1 proc, 3 s), which ends by 10, would delay J4; J6 (2 procs, 10 s) fits nowhere now.
CONSERVATIVE = [
    Job(1, 0, 10, 2, 10, 1),
    Job(2, 0, 10, 4, 10, 1),
    Job(3, 0, 100, 1, 100, 1),
    Job(4, 0, 5, 2, 5, 1),
    Job(5, 0, 3, 1, 3, 1),
    Job(6, 0, 10, 2, 10, 1),
]


@pytest.mark.parametrize(
    "backfill, allowed, extra",
    [("conservative", [False, True, False, False], 0), ("easy", [False, True, True, True], 0)],
)
def test_conservative_allows_only_what_delays_no_job_ahead(backfill, allowed, extra):
    env = env_of(CONSERVATIVE, backfill)
    env.reset()
    obs, _ = play(env, [0, 0])
    assert decision(obs) == ([*allowed, True], pytest.approx([1, 10 / T, extra, 1]))


def test_conservative_decisions_follow_the_plan_at_each_event():
    env = env_of(CONSERVATIVE, "conservative")
    env.reset()
    obs, _ = play(env, [0, 0, 1])  # J4 runs 0..5; nothing else may start: the scan ends
    # At 5, J4's end: J5 (5..8) fits before J2's reservation; J3 and J6 still do not.
    assert decision(obs)[0] == [False, True, False, False, True]
    assert np.array_equal(obs["jobs"][0, STOP], stop_row(5, 0.5))  # J1 ends at 10
    assert obs["jobs"][0, :3, 0].tolist() == [np.float32(5 / T)] * 3  # J3, J5, J6 waited 5 s
    obs, _ = play(env, [STOP])  # to 10: J1 ends, J2 starts
    assert decision(obs) == ([True, True, True, False, False], [0, 0, 0, 0])


def test_a_slot_the_mask_does_not_allow_stops_the_scan():
    for action in (0, 2, 99, -1):  # J3 (no extra proc left), padding, out of range
        env = env_of(EASY, "easy")
        env.reset()
        obs, _ = play(env, [0, 0, 1])  # J4 took the extra proc: only J5 is allowed
        obs, _ = play(env, [action])
        # A pick at 10 (J1 ended, J2 started) between J3 and J5, which waited 10 s.
        assert decision(obs) == ([True, True, False, False, False], [0, 0, 0, 0])
        assert obs["jobs"][0, :2, 0].tolist() == [np.float32(10 / T)] * 2


def test_slot_k_waits_at_a_pick_and_stops_a_scan_with_env_wait():
    env = env_of(EASY, "easy", wait=True)
    obs, _ = env.reset()
    assert decision(obs)[0] == [True] * K + [False]  # nothing runs, nothing is to come
    obs, _ = play(env, [0])  # J1 runs: the wait is allowed at this pick
    assert decision(obs) == ([True] * K + [True], [0, 0, 0, 0])
    obs, _ = play(env, [0])  # J2 committed: slot K is the stop
    assert decision(obs)[0] == [True, True, True, False, True]
    obs, _ = play(env, [STOP])  # to 10: J2 runs until 20, so one may wait
    assert decision(obs) == ([True, True, True, False, True], [0, 0, 0, 0])


@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize("wait", [False, True])
@pytest.mark.parametrize("backfill", ["easy", "conservative"])
@pytest.mark.parametrize("policy", POLICIES)
def test_the_heuristic_scan_through_env_equals_the_simulator(policy, backfill, wait, estimate):
    trace = generate(3000, machine_procs=64, seed=5)
    window = 150  # K = window: every waiting job is visible
    options = dict(seed=11, wait=wait, estimate=estimate, agent_backfill=True)
    env = VecSchedulingEnv(trace, 3, window, window, backfill, policy, **options)
    env.reset()
    checked = decisions = 0
    while checked < 6:
        decisions += int(env.cluster[:, CLUSTER_FEATURES].sum())
        _, _, terminated, _, info = env.step(env.heuristic_actions())
        for i in np.flatnonzero(terminated):
            expected = simulate(
                trace, policy, backfill, int(info["episode_start"][i]), window, estimate
            )
            assert {m: info[m][i] for m in EPISODE_METRICS} == {
                m: expected.metrics[m] for m in EPISODE_METRICS
            }
            assert np.array_equal(env.last_start_times(i), expected.start_time)
            checked += 1
    assert decisions > 100


def observations(history, agent_backfill, steps=300):
    """(jobs, cluster, mask, backfilling) of a heuristic-driven run on EASY; K = window, as
    the scan may start any waiting job, and agent backfilling only the visible ones."""
    trace = generate(1500, machine_procs=64, seed=3)
    env = VecSchedulingEnv(
        trace, 1, 200, 200, seed=4, history=history, agent_backfill=agent_backfill
    )
    obs, _ = env.reset()
    seen = []
    for _ in range(steps):
        jobs, cluster, mask = obs["jobs"][0, :200], obs["cluster"][0], obs["action_mask"][0]
        backfilling = agent_backfill and cluster[-4] == 1  # the first backfill feature
        seen.append((jobs.copy(), cluster.copy(), mask.copy(), backfilling))
        obs = env.step(env.heuristic_actions())[0]
    return seen


@pytest.mark.parametrize("history", [False, True])
def test_picks_see_what_they_see_without_agent_backfilling(history):
    plain, agent = observations(history, False), observations(history, True, 600)
    picks = [o for o in agent if not o[3]][: len(plain)]
    assert len(picks) == len(plain) and len(agent) - len(picks) > 100  # backfill decisions
    width = CLUSTER_FEATURES + HISTORY_CLUSTER_FEATURES * history
    assert feature_widths(history, True)[1] == width + 4
    for (jobs, cluster, mask, _), (jobs_b, cluster_b, mask_b, _) in zip(plain, picks):
        assert np.array_equal(jobs, jobs_b)
        assert np.array_equal(cluster, cluster_b[:width]) and not cluster_b[width:].any()
        assert np.array_equal(mask, mask_b[:200]) and not mask_b[200]


def test_random_backfills_and_restore_mid_episode():
    trace = generate(3000, machine_procs=64, seed=5)
    options = dict(seed=5, backfill="conservative", agent_backfill=True, history=True)
    env = VecSchedulingEnv(trace, 3, 120, 16, **options)
    env.reset()
    rng = np.random.default_rng(2)
    stops = backfills = 0
    for _ in range(200):
        actions = env.random_actions(rng)
        assert env.mask[np.arange(3), actions].all()
        backfilling = env.cluster[:, -4] == 1  # the first backfill feature
        stops += int((backfilling & (actions == 16)).sum())
        backfills += int((backfilling & (actions < 16)).sum())
        env.step(actions)
    assert stops > 0 and backfills > 0
    assert_restored_alike(env, VecSchedulingEnv(trace, 3, 120, 16, **options), rng, 200)


def test_gymnasium_env_has_the_stop_action():
    env = SchedulingEnv(trace_of(EASY, 4), window_jobs=5, max_queue=K, agent_backfill=True)
    assert env.action_space.n == K + 1
    obs, _ = env.reset()
    assert env.observation_space.contains(obs)


def test_config_env_agent_backfill():
    assert load_config(None, ["env.agent_backfill=true"]).env.agent_backfill
    assert not load_config(None, []).env.agent_backfill
    with pytest.raises(ConfigError, match="'env.agent_backfill' is for the HPC queue"):
        load_config(None, ["env.agent_backfill=true", "gpu.mode=placement"])
    with pytest.raises(ConfigError, match="needs 'env.backfill' easy or conservative"):
        load_config(None, ["env.agent_backfill=true", "env.backfill=none"])


class AlwaysStop(torch.nn.Module):
    """Prefers slot K (its feature 6 is -1, a job's 1), else the first job slot."""

    def forward(self, jobs, cluster, mask):
        return -jobs[..., 6], jobs.new_zeros(len(jobs))


@pytest.mark.parametrize("agent_backfill", [False, True])
def test_evaluation_plays_agent_backfilling_as_the_run_trained(agent_backfill):
    options = EnvConfig(max_queue=K, agent_backfill=agent_backfill)
    [(_, start, _)] = evaluate.run_policy(
        AlwaysStop(), trace_of(EASY, 4), {0: (0, 5)}, options, "easy"
    )
    # Stopping every scan backfills nothing: FCFS without backfilling.
    expected = simulate(trace_of(EASY, 4), "fcfs", "none" if agent_backfill else "easy")
    assert start.tolist() == expected.start_time.tolist()


def test_an_agent_backfilling_run_trains_and_resumes(tmp_path):
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    ctx = context.init("cpu")
    options = [*TINY_TRAINING, "env.agent_backfill=true", "env.backfill=conservative"]
    train(load_config(None, [*options, "ppo.updates=4"]), ctx, straight, resume=False)
    first = train(load_config(None, [*options, "ppo.updates=2"]), ctx, stopped, resume=False)
    assert first.env.cluster.shape[1] == CLUSTER_FEATURES + 4
    resumed = train(load_config(None, [*options, "ppo.updates=4"]), ctx, stopped, resume=True)
    assert resumed.update == 4
    a = torch.load(straight / "checkpoint.pt", weights_only=False)["model"]
    b = torch.load(stopped / "checkpoint.pt", weights_only=False)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_an_agent_backfilling_checkpoint_evaluates(tmp_path):
    swf, run, results = tmp_path / "trace.swf", tmp_path / "run", tmp_path / "results.h5"
    python = [sys.executable, "-m"]
    subprocess.run([*python, "ddppo_hpc.data.synthetic", "--jobs", "3000", "--seed", "3",
                    "--out", str(swf)], check=True, timeout=300)  # fmt: skip
    train_run(run, *TINY_TRAINING, "env.agent_backfill=true", "ppo.updates=2")
    out = subprocess.run(
        [*python, "ddppo_hpc.evaluate", "--checkpoint", str(run), "--trace", str(swf),
         "--policies", "ddppo,fcfs", "--backfill", "easy,conservative", "--out", str(results)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "ddppo" in out.stdout


def test_advise_refuses_an_agent_backfilling_checkpoint(tmp_path, capsys):
    run = tmp_path / "run"
    config = load_config(None, [*TINY_TRAINING, "env.agent_backfill=true", "ppo.updates=1"])
    train(config, context.init("cpu"), run, resume=False)
    capsys.readouterr()  # the training's log
    snapshot = Path(__file__).parent.parent / "data" / "advise" / "busy.json"
    args = ["--checkpoint", str(run), "--from-json", str(snapshot)]
    assert advise_cli.main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "env.agent_backfill: advise orders the queue" in err
