"""`env.order_actions` (docs/environment.md, "Order actions"): an action is a rule, a heuristic
order with a backfill of `env.action_backfills`, whose order's pick starts or is committed and
whose backfill scans follow until the next decision. By hand; following one rule is that
rule's run; random rules per decision against the pure-Python reference; slot k shows rule k's
pick."""

import subprocess
import sys

import numpy as np
import pytest
import reference_sim
from reference_sim import Job
from simhelpers import TINY_TRAINING, random_jobs, trace_of, train_run

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.env.vector import ORDER_ACTIONS, feature_widths
from ddppo_hpc.sim import ESTIMATES, POLICIES, simulate

WINDOW = 100
MACHINE = 8


@pytest.fixture(scope="module")
def trace():
    return generate(3000, machine_procs=64, seed=5)


@pytest.mark.parametrize(
    "order, backfill, starts",
    [
        ("fcfs", "easy", [0, 100, 2, 52]),
        ("sjf", "easy", [0, 100, 22, 2]),
        ("sjf", "none", [0, 100, 110, 110]),
    ],
)
def test_the_scans_follow_the_rule_of_the_decision(order, backfill, starts):
    # 4 procs, requests = runtimes. A (2 procs) runs 0..100; H (4 procs) comes alone at 1 and
    # is committed: EASY's shadow 100. B (request 50) and C (request 20), 2 procs each, come at
    # 2, where one of them fits: FCFS's EASY scan starts B (C at 52, when B ends: 52 + 20 <=
    # 100), SJF's starts C (B at 22: 22 + 50 <= 100); without backfilling both wait for H
    # (100 .. 110).
    jobs = [
        Job(1, 0, 100, 2, 100, 1),  # A
        Job(2, 1, 10, 4, 10, 2),  # H
        Job(3, 2, 50, 2, 50, 3),  # B
        Job(4, 2, 20, 2, 20, 4),  # C
    ]
    backfills = ("easy", "none")
    env = VecSchedulingEnv(trace_of(jobs, 4), 1, 4, 4, "easy", "f1", order_actions=True,
                           action_backfills=backfills)  # fmt: skip
    obs, _ = env.reset()
    assert obs["action_mask"][0].tolist() == [True] * 12
    env.step(np.array([0]))  # A starts at 0
    rule = ORDER_ACTIONS.index(order) + 6 * backfills.index(backfill)
    _, _, terminated, _, _ = env.step(np.array([rule]))  # H, at 1
    if backfill == "none":  # a decision is left at 110, for B and C (FCFS: B, then C)
        assert not terminated[0]
        env.step(np.array([rule]))
        _, _, terminated, _, _ = env.step(np.array([rule]))
    assert terminated[0]
    assert env.last_start_times(0).tolist() == starts


BACKFILLS = ("none", "easy", "conservative")


@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize("backfills", [("none",), ("easy",), ("conservative",), BACKFILLS])
def test_following_one_rule_is_that_rules_run(trace, backfills, estimate):
    # Every job visible (K = window): the env's scans are the simulator's own.
    for rule in range(6 * len(backfills)):
        order, backfill = POLICIES[rule % 6], backfills[rule // 6]
        env = VecSchedulingEnv(trace, 1, WINDOW, WINDOW, backfills[-1], "fcfs", seed=3,
                               estimate=estimate, order_actions=True,
                               action_backfills=backfills)  # fmt: skip
        env.reset()
        begin = int(env.episode_start[0])
        terminated = [False]
        while not terminated[0]:
            _, _, terminated, _, _ = env.step(np.array([rule], np.int32))
        expected = simulate(trace, order, backfill, begin, WINDOW, estimate).start_time
        np.testing.assert_array_equal(env.last_start_times(0), expected, err_msg=rule)


@pytest.mark.parametrize("backfills", [(), ("easy", "conservative")])
def test_the_best_teacher_gets_the_best_rules_score(trace, backfills):
    env = VecSchedulingEnv(trace, 4, WINDOW, WINDOW, "conservative", "f1", seed=7,
                           estimate="predicted", teacher="best", order_actions=True,
                           action_backfills=backfills)  # fmt: skip
    env.reset()
    bests = {  # every rule's avg bsld on each environment's first window
        i: min(simulate(trace, o, b, int(env.episode_start[i]), WINDOW, "predicted").metrics[
            "avg_bsld"] for o in POLICIES for b in backfills or ("conservative",))
        for i in range(4)
    }  # fmt: skip
    scored = {}
    while len(scored) < 4:
        actions = env.heuristic_actions()
        assert [POLICIES[a % 6] for a in actions] == [env.teacher(i) for i in range(4)]
        _, _, terminated, _, info = env.step(actions)
        for i in np.flatnonzero(terminated):
            scored.setdefault(i, (info["avg_bsld"][i], env.last_best(i)[1]))
    for i, (bsld, best) in scored.items():
        assert bsld == best == bests[i]


class OrderReference(reference_sim._Sim):
    """The reference that draws the order at each decision: its pick, and its order for
    the backfill scans until the next decision."""

    draw = None  # () -> the order of the next decision

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.choose, self.now = self.pick_by_drawn_order, None

    def decide(self, t: float) -> None:
        self.now = t
        super().decide(t)

    def pick_by_drawn_order(self, ordered):
        self.policy, self.backfill = self.draw()
        return self.ordered(self.now)[0]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize("backfills", [("easy",), ("conservative",), BACKFILLS])
# 64 procs: some 40 sizes, where FCFS's conservative scans (with requests) plan by groups.
@pytest.mark.parametrize("machine", (MACHINE, 64))
def test_random_rules_match_the_reference(machine, backfills, estimate, seed, monkeypatch):
    rng = np.random.default_rng(seed)
    jobs = random_jobs(rng, 60, machine)
    drawn = []

    def draw():
        drawn.append(int(rng.integers(6 * len(backfills))))
        return POLICIES[drawn[-1] % 6], backfills[drawn[-1] // 6]

    monkeypatch.setattr(OrderReference, "draw", staticmethod(draw))
    monkeypatch.setattr(reference_sim, "_Sim", OrderReference)
    starts = reference_sim.simulate(jobs, machine, "fcfs", backfills[0], estimate=estimate)
    assert len(set(drawn)) > 5
    n = len(jobs)  # every waiting job visible
    env = VecSchedulingEnv(trace_of(jobs, machine), 1, n, n, backfills[0], "fcfs",
                           estimate=estimate, order_actions=True,
                           action_backfills=backfills)  # fmt: skip
    env.reset()
    for step, rule in enumerate(drawn):
        _, _, terminated, _, _ = env.step(np.array([rule], np.int32))
        assert terminated[0] == (step == len(drawn) - 1)
    assert env.last_start_times(0).tolist() == [starts[j.id] for j in jobs]


@pytest.mark.parametrize("wait, backfills", [(False, ()), (True, ()), (True, ("none", "easy"))])
def test_slot_k_shows_rule_ks_pick(trace, wait, backfills):
    # Without backfilling the scans' order does not matter: an environment that picks the job
    # order k ranks first (the ranks: F1's feature 10, then SJF, WFP3, UNICEP, SJBF; FCFS's
    # is slot 0) stays in the same state as the one that takes rule k (order k, no backfill).
    options = dict(history=True, heuristic_ranks=True, wait=wait, seed=11)
    rules = VecSchedulingEnv(trace, 1, WINDOW, 32, "none", order_actions=True,
                             action_backfills=backfills, **options)  # fmt: skip
    jobs = VecSchedulingEnv(trace, 1, WINDOW, 32, "none", **options)
    seen, _ = rules.reset()
    shown, _ = jobs.reset()
    width, _ = feature_widths(True, heuristic_ranks=True)
    n = 6 * max(1, len(backfills))  # rules
    tags = 6 + (len(backfills) if len(backfills) > 1 else 0)  # one-hot columns
    assert seen["jobs"].shape[1:] == (n + wait, width + tags)
    ranks = [10, *range(width - 4, width)]  # F1's and the rank features, in the order below
    rng = np.random.default_rng(0)
    for _ in range(300):
        rows = shown["jobs"][0]
        visible = int(shown["action_mask"][0][:32].sum())
        picks = {"fcfs": 0}
        for order, column in zip(["f1", "sjf", "wfp3", "unicep", "sjbf"], ranks):
            picks[order] = int(np.flatnonzero(rows[:visible, column] == 0)[0])
        for k in range(n):
            np.testing.assert_array_equal(seen["jobs"][0, k, :width], rows[picks[POLICIES[k % 6]]])
            tagged = [float(k % 6 == o) for o in range(6)]
            if len(backfills) > 1:
                tagged += [float(k // 6 == b) for b in range(len(backfills))]
            assert seen["jobs"][0, k, width:].tolist() == tagged
        assert seen["action_mask"][0][:n].all()
        if wait:  # the wait slot is the same, after the rules' slots
            np.testing.assert_array_equal(seen["jobs"][0, n, :width], shown["jobs"][0, 32])
            assert not seen["jobs"][0, n, width:].any()
            assert seen["action_mask"][0][n] == shown["action_mask"][0][32]
        k = int(rng.integers(6 + wait))
        waits = k == 6
        seen = rules.step(np.array([n if waits else k], np.int32))[0]
        shown = jobs.step(np.array([32 if waits else picks[POLICIES[k]]], np.int32))[0]


def test_order_actions_refuse_what_they_replace(trace):
    for options in (dict(agent_backfill=True), dict(heuristic_ranks=True, order_picks=True),
                    dict(teacher="rollout")):  # fmt: skip
        with pytest.raises(ValueError, match="order_actions"):
            VecSchedulingEnv(trace, 1, WINDOW, 32, "easy", order_actions=True, **options)
    for backfills, message in ((("conservative",), "must hold"), (("easy",) * 2, "twice")):
        with pytest.raises(ValueError, match=message):
            VecSchedulingEnv(trace, 1, WINDOW, 32, "easy", order_actions=True,
                             action_backfills=backfills)  # fmt: skip


@pytest.mark.parametrize(
    "lines, message",
    [
        (["  agent_backfill: true"], "'env.order_actions' cannot be used with 'env.agent_"),
        (["  heuristic_ranks: true", "  order_picks: true"], "with 'env.order_picks'"),
        (["  teacher: rollout"], "with 'env.teacher' rollout"),
        (["  action_backfills: [conservative]"], r"\(conservative\) must hold 'env.backfill'"),
        (["  action_backfills: [easy, easy]"], "lists a backfill twice"),
        (["  action_backfills: [fast]"], "must be a list of backfills"),
    ],
)
def test_the_config_refuses_them_too(tmp_path, lines, message):
    file = tmp_path / "c.yaml"
    file.write_text("\n".join(["env:", "  backfill: easy", "  order_actions: true", *lines]))
    with pytest.raises(ConfigError, match=message):
        load_config(file)


@pytest.mark.parametrize(
    "text, message",
    [
        ("env:\n  action_backfills: [easy, conservative]\n", "'env.action_backfills' needs"),
        ("ppo:\n  imitation_loss: costs\n", "'ppo.imitation_loss: costs' needs"),  # rule costs
    ],
)
def test_what_needs_order_actions(tmp_path, text, message):
    file = tmp_path / "c.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError, match=f"{message} 'env.order_actions'"):
        load_config(file)


def test_a_run_with_rule_actions_trains_and_evaluates(tmp_path):
    # The teacher's rules are cloned, then PPO; evaluation plays the policy on the same 12
    # rule slots (its widths from the checkpoint's config).
    run = tmp_path / "run"
    train_run(run, *TINY_TRAINING, "env.order_actions=true", "env.teacher=best",
              "env.action_backfills=[easy, conservative]", "ppo.imitation_updates=2",
              "ppo.updates=3")  # fmt: skip
    evaluate = [sys.executable, "-m", "ddppo_hpc.evaluate", "--windows", "2", "--jobs", "64"]
    out = subprocess.run([*evaluate, "--checkpoint", str(run), "--policies", "ddppo"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[2].split()[:3] == ["ddppo", "easy", "2"]
