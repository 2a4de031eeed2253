"""The rollout teacher (docs/environment.md, "The rollout teacher"): a pick by hand, and every
pick on random windows against a reference that replays each rollout on a fresh environment
and reads each order's pick from the observation's rank features."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_sim import Job
from simhelpers import trace_of

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.env.vector import JOB_FEATURES

# kHeuristics' order, and each one's rank column in the observation (FCFS: the slot itself).
HEURISTICS = ("fcfs", "sjf", "wfp3", "unicep", "f1", "sjbf")
RANK_COLUMN = {"f1": JOB_FEATURES - 1, "sjf": JOB_FEATURES, "wfp3": JOB_FEATURES + 1}
RANK_COLUMN.update(unicep=JOB_FEATURES + 2, sjbf=JOB_FEATURES + 3)
QUEUE = 5  # K of the random windows


def test_the_rollout_teacher_picks_the_job_whose_best_continuation_is_best():
    # 2 procs, no backfilling. A (2 procs) runs 0..100; B (1 proc, 1000 s), C (2 procs, 10 s)
    # and D (1 proc, 10 s) arrive at 1 and are all visible at the decision at 1.
    # FCFS picks B: it starts at 100 and holds a proc until 1100, so C waits ~1100 s whatever
    # follows. SJF picks C (a tie with D, queue order): C 100..110, then B and D at 110:
    # bslds 1 (A), (109 + 1000) / 1000, 109 / 10 (C), 119 / 10 (D): sum 23.909. F1 (870
    # log10(1) = 0: log10(r) n) picks D: D 100..110 with C committed, C 110..120, then B at
    # 120 (B at 100 instead would hold C until 1100): 1 + 1.119 + 10.9 + 11.9 = 23.919.
    jobs = [
        Job(1, 0, 100, 2, 100, 7),  # A
        Job(2, 1, 1000, 1, 1000, 8),  # B
        Job(3, 1, 10, 2, 10, 9),  # C
        Job(4, 1, 10, 1, 10, 9),  # D
    ]
    trace = trace_of(jobs, 2)
    rollout = VecSchedulingEnv(trace, 1, 4, 3, "none", teacher="rollout")
    fcfs = VecSchedulingEnv(trace, 1, 4, 3, "none")
    for env in (rollout, fcfs):
        env.reset()
        env.step(env.heuristic_actions())  # A, the only job
    assert fcfs.heuristic_actions().tolist() == [0]  # B
    assert rollout.heuristic_actions().tolist() == [1]  # C
    while True:
        _, _, terminated, _, info = rollout.step(rollout.heuristic_actions())
        if terminated[0]:
            break
    assert rollout.last_start_times(0).tolist() == [0, 110, 100, 110]
    assert info["avg_bsld"][0] == pytest.approx((1 + 1.109 + 10.9 + 11.9) / 4)


def fresh(trace, spec: dict, start: int, actions: list[int]) -> tuple[VecSchedulingEnv, dict]:
    """An environment on the window at `start` after `actions`, and its observation."""
    env = VecSchedulingEnv(trace, 1, **spec, heuristic_ranks=True)
    env.reset()
    obs = env.begin_at([start])
    for a in actions:
        obs, *_ = env.step(np.array([a]))
    return env, obs


def order_pick(obs: dict, order: str) -> int:
    """The order's pick among the job slots the mask allows (not slot K, the stop): its
    lowest rank, ties by slot."""
    allowed = np.flatnonzero(obs["action_mask"][0][:QUEUE])
    if order == "fcfs":
        return int(allowed[0])
    ranks = obs["jobs"][0][allowed, RANK_COLUMN[order]]
    return int(allowed[np.argmin(ranks)])


def rollout_bsld(trace, spec, start, actions, first: int, order: str) -> float:
    """The window's avg bsld after `actions`, then `first`, then the order's picks."""
    (env, _), action = fresh(trace, spec, start, actions), first
    while True:
        obs, _, terminated, _, info = env.step(np.array([action]))
        if terminated[0]:
            return float(info["avg_bsld"][0])
        action = order_pick(obs, order)


def reference_pick(trace, spec, start, actions) -> int:
    """The rollout teacher's pick, every rollout on a fresh environment."""
    _, obs = fresh(trace, spec, start, actions)
    picks = list(dict.fromkeys(order_pick(obs, o) for o in HEURISTICS))
    if len(picks) == 1:
        return picks[0]
    outcomes = [(rollout_bsld(trace, spec, start, actions, k, o), c) for c, k in
                enumerate(picks) for o in HEURISTICS]  # fmt: skip
    return picks[min(outcomes)[1]]


@st.composite
def busy_jobs(draw, n: int = 12) -> list[Job]:
    """n jobs of 1 to 4 procs on 4, arriving faster than they run: the queue builds up."""
    jobs, t = [], 0.0
    for i in range(n):
        t += draw(st.integers(0, 20))
        runtime = draw(st.integers(1, 120))
        request = runtime * draw(st.sampled_from([1, 2, 5]))
        procs, user = draw(st.integers(1, 4)), draw(st.integers(1, 3))
        jobs.append(Job(i + 1, t, runtime, procs, request, user))
    return jobs


@settings(max_examples=25, deadline=None)
@given(
    jobs=busy_jobs(),
    backfill=st.sampled_from(["none", "easy", "conservative"]),
    estimate=st.sampled_from(["request", "predicted"]),
    agent_backfill=st.booleans(),
)
def test_every_pick_equals_the_replayed_rollouts(jobs, backfill, estimate, agent_backfill):
    trace = trace_of(jobs, 4)
    spec = dict(window_jobs=len(jobs), max_queue=QUEUE, backfill=backfill, estimate=estimate)
    spec.update(agent_backfill=agent_backfill and backfill != "none")
    env = VecSchedulingEnv(trace, 1, **spec, teacher="rollout")
    env.reset()
    actions = []
    while True:
        (pick,) = env.heuristic_actions().tolist()
        assert pick == reference_pick(trace, spec, 0, actions)
        actions.append(pick)
        _, _, terminated, _, _ = env.step(np.array([pick]))
        if terminated[0]:
            break


def test_the_rollout_teacher_is_a_config_choice(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("env:\n  teacher: rollout\n")
    assert load_config(file).env.teacher == "rollout"
    file.write_text("env:\n  teacher: lookahead\n")
    with pytest.raises(ConfigError, match="teacher"):
        load_config(file)
