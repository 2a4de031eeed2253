"""Rule costs and cost-sensitive imitation (`ppo.imitation_loss: costs`, docs/environment.md
"Rule costs"): rule k's cost is the window's avg bsld if the environment follows rule k from
now on, and the wait's (with `env.wait`) that of waiting, then the best rule. By hand; equal to
playing it out; the loss. With less foresight (no later arrivals, the estimates for runtimes):
by hand, and equal to the full foresight of a trace cut to what the rollouts see."""

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_sim import Job
from simhelpers import TINY_TRAINING, trace_of, train_run

from ddppo_hpc.config import load_config
from ddppo_hpc.data.source import at_load
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.dist import context
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.rl import cost_loss
from ddppo_hpc.train import Trainer


def test_costs_by_hand():
    # One proc, three jobs of three users at 0 (requests = runtimes 100, 10, 50), no
    # backfilling. FCFS, WFP3 and UNICEP (every wait 0: ties in queue order) start the 100 s
    # job, then (at 100, WFP3 and UNICEP by wait / request) the 10 s one: starts 0, 100, 110,
    # bsld 1, 110/10, 160/50: avg 5.0667. SJF, F1 (every submit alike) and SJBF (no history:
    # the requests) go 10, 50, 100 s: starts 60, 0, 10, bsld 160/100, 1, 60/50: avg 1.2667.
    jobs = [Job(1, 0, 100, 1, 100, 1), Job(2, 0, 10, 1, 10, 2), Job(3, 0, 50, 1, 50, 3)]
    env = VecSchedulingEnv(trace_of(jobs, 1), 1, 3, 3, "none", "fcfs", order_actions=True)
    env.reset()
    slow, fast = (1 + 11 + 3.2) / 3, (1.6 + 1 + 1.2) / 3
    np.testing.assert_allclose(env.rule_costs()[0], [slow, fast, slow, slow, fast, fast])
    # With the wait: nothing runs and nothing is to arrive, so it is masked: rule 0's (FCFS).
    env = VecSchedulingEnv(trace_of(jobs, 1), 1, 3, 3, "none", "fcfs", order_actions=True,
                           wait=True)  # fmt: skip
    env.reset()
    assert not env.mask[0, 6]
    np.testing.assert_allclose(env.rule_costs()[0], [slow, fast, slow, slow, fast, fast, slow])


def test_costs_with_less_foresight_by_hand():
    # test_costs_by_hand's three jobs, the 100 s request's job running 20 s, and a fourth job
    # (1 s) at 5 s. Rules: FCFS, SJF, WFP3, UNICEP, F1, SJBF.
    jobs = [Job(1, 0, 20, 1, 100, 1), Job(2, 0, 10, 1, 10, 2), Job(3, 0, 50, 1, 50, 3),
            Job(4, 5, 1, 1, 1, 4)]  # fmt: skip
    env = VecSchedulingEnv(trace_of(jobs, 1), 1, 4, 4, "none", "fcfs", order_actions=True)
    env.reset()
    slow, fast = (1 + 11 + 3.2) / 3, (1.6 + 1 + 1.2) / 3
    # Knowing neither: the three jobs on their requests, as in test_costs_by_hand.
    present = env.rule_costs(arrivals=False, runtimes=False)[0]
    np.testing.assert_allclose(present, [slow, fast, slow, slow, fast, fast])
    # The runtimes but not the arrival: FCFS (and WFP3, UNICEP, as before) start 0, 20, 30,
    # bsld 1, 30/10, 80/50; SJF, F1 and SJBF 60, 0, 10, bsld 80/20, 1, 60/50.
    runtimes = env.rule_costs(arrivals=False, runtimes=True)[0]
    first, shortest = (1 + 3 + 1.6) / 3, (4 + 1 + 1.2) / 3
    np.testing.assert_allclose(runtimes, [first, shortest, first, first, shortest, shortest])
    # The arrival but not the runtimes: FCFS starts 0, 100, 110, 160 (bsld 1, 11, 3.2, 15.6);
    # SJF starts the 10 s job and picks the 50 s one at 0 (it waits for it: pick and wait),
    # so the 1 s job starts at 60 after it, then the 100 s one: bsld 1, 1.2, 56/10, 161/100.
    arrivals = env.rule_costs(arrivals=True, runtimes=False)[0]
    assert arrivals[0] == pytest.approx((1 + 11 + 3.2 + 15.6) / 4)
    assert arrivals[1] == pytest.approx((1 + 1.2 + 5.6 + 1.61) / 4)
    # All of it: FCFS starts 0, 20, 30, 80 (bsld 1, 3, 1.6, 75/10).
    assert env.rule_costs()[0][0] == pytest.approx((1 + 3 + 1.6 + 7.6) / 4)


def first_decision_costs(jobs, backfill, estimate, **foresight) -> np.ndarray:
    """rule_costs() of a window of all `jobs` on 4 procs at its first decision, every job
    visible."""
    env = VecSchedulingEnv(trace_of(jobs, 4), 1, len(jobs), len(jobs), backfill, "fcfs",
                           estimate=estimate, order_actions=True,
                           action_backfills=("easy", "conservative"))  # fmt: skip
    env.reset()
    return env.rule_costs(**foresight)[0]


job_spec = st.tuples(st.integers(1, 4), st.integers(1, 100), st.floats(0.05, 1.0))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(job_spec, min_size=1, max_size=7),
    st.lists(job_spec, max_size=4),
    st.sampled_from(["easy", "conservative"]),
    st.sampled_from(["request", "predicted"]),
)
def test_less_foresight_is_the_full_foresight_of_what_it_sees(now, later, backfill, estimate):
    # Jobs at 0 and later ones, (procs, request, runtime / request) each, of two users; at
    # the first decision every job at 0 waits and none has ended. A rollout that does not see
    # the arrivals sees the jobs at 0 alone. One that does not see the runtimes sees jobs
    # whose runtimes are their estimates as of now (no history yet: their requests), which
    # stay so: as jobs whose users have no history (-1), on their requests.
    def jobs(specs, first_id, submit, known):
        def job(k, procs, request, fraction):
            runtime = max(1.0, round(request * fraction)) if known else float(request)
            return Job(
                first_id + k, submit + k, runtime, procs, request, 1 + k % 2 if known else -1
            )

        return [job(k, *spec) for k, spec in enumerate(specs)]

    def at_zero(js):
        return [dataclasses.replace(j, submit=0.0) for j in js]

    def costs(*parts, **foresight):
        return first_decision_costs(sum(parts, []), backfill, estimate, **foresight)

    true_now, estimated_now = at_zero(jobs(now, 1, 0, True)), at_zero(jobs(now, 1, 0, False))
    true_later, estimated_later = jobs(later, 100, 10, True), jobs(later, 100, 10, False)
    np.testing.assert_allclose(
        costs(true_now, true_later, arrivals=False, runtimes=False),
        costs(estimated_now),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        costs(true_now, true_later, arrivals=False, runtimes=True), costs(true_now), rtol=1e-12
    )
    np.testing.assert_allclose(
        costs(true_now, true_later, arrivals=True, runtimes=False),
        costs(estimated_now, estimated_later),
        rtol=1e-12,
    )


def decision_at_50(jobs, backfill, estimate="request", steps=1, **env_options):
    """An environment over all `jobs` on 4 procs, every job visible, after `steps` steps of
    rule 0."""
    env = VecSchedulingEnv(trace_of(jobs, 4), 1, len(jobs), len(jobs), backfill, "fcfs",
                           estimate=estimate, order_actions=True,
                           action_backfills=("easy", "conservative"), **env_options)  # fmt: skip
    env.reset()
    for _ in range(steps):
        env.step(np.zeros(1, dtype=np.int32))
    return env


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 3),
    st.booleans(),
    st.lists(job_spec, min_size=1, max_size=5),
    st.lists(job_spec, max_size=3),
    st.sampled_from(["easy", "conservative"]),
)
def test_less_foresight_mid_episode(procs, overdue, now, later, backfill):
    # Job A starts alone at 0: request 200 s, runtime 150 s, or request 30 s, runtime 100 s
    # (past its request at the decision); the jobs `now` arrive at 50, `later` after them.
    # Without the arrivals and the runtimes, the rollouts at 50 see A end at 200, or at 50 if
    # past its estimate, and the jobs `now` run for their requests: the full foresight of A
    # and the jobs `now` on their requests from 0 (A starts at 0: bsld 1), or of the jobs
    # `now` alone. With the runtimes, that of A and the jobs `now` as they are.
    a = Job(1, 0, 100.0 if overdue else 150.0, procs, 30.0 if overdue else 200.0, 1)

    def jobs(specs, first_id, submit):  # submit(k): job k's submit time
        return [Job(first_id + k, submit(k), max(1.0, round(r * f)), p, r, 2 + k % 2)
                for k, (p, r, f) in enumerate(specs)]  # fmt: skip

    def requested(js):
        return [dataclasses.replace(j, runtime=j.requested_time, user=-1) for j in js]

    arriving, to_come = jobs(now, 10, lambda k: 50.0), jobs(later, 50, lambda k: 60.0 + k)
    env = decision_at_50([a, *arriving, *to_come], backfill)
    n = len(arriving)

    def queue_only(full):  # the jobs `now` of a window whose first job, A, has bsld 1
        return (full * (n + 1) - 1) / n

    seen = decision_at_50(requested(arriving if overdue else [a, *arriving]), backfill, steps=0)
    expected = seen.rule_costs()[0] if overdue else queue_only(seen.rule_costs()[0])
    present = env.rule_costs(arrivals=False, runtimes=False)[0]
    np.testing.assert_allclose(present, expected, rtol=1e-9)
    known = decision_at_50([a, *arriving], backfill, steps=0).rule_costs()[0]
    np.testing.assert_allclose(env.rule_costs(arrivals=False)[0], queue_only(known), rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(job_spec, min_size=1, max_size=5),
    st.lists(job_spec, max_size=3),
    st.lists(st.floats(0.05, 1.0), min_size=9, max_size=9),
    st.sampled_from(["easy", "conservative"]),
    st.sampled_from(["request", "predicted"]),
)
def test_less_foresight_does_not_see_the_true_runtimes(now, later, other, backfill, estimate):
    # Users 1 and 2 complete a job each before the decision at 50 (their EASY++ history) and
    # job A of user 1 runs through it; the jobs `now` of both users arrive at 50. Traces that
    # differ only in the runtimes of A (past 50) and of the jobs waiting or to come give the
    # same costs to rollouts that do not see the runtimes, with the arrivals or without.
    def trace(fractions):
        head = [Job(1, 0, 5.0, 1, 50.0, 1), Job(2, 0, 8.0, 1, 40.0, 2),
                Job(3, 0, 60.0 + 300 * fractions[0], 2, 400.0, 1)]  # fmt: skip
        tail = [
            Job(10 + k, 50 + k, max(1.0, round(r * fractions[1 + k % 8])), p, r, 1 + k % 2)
            for k, (p, r, _) in enumerate(now + later)
        ]
        return head + tail

    mine = [f for _, _, f in now + later] + [0.5] * 9
    costs = {}
    for name, fractions in (("given", mine), ("other", other)):
        env = decision_at_50(trace(fractions), backfill, estimate, steps=3)
        costs[name] = [env.rule_costs(arrivals=a, runtimes=False)[0] for a in (False, True)]
    for seen, unseen in zip(costs["given"], costs["other"]):
        np.testing.assert_allclose(seen, unseen, rtol=1e-12)


def test_a_rollout_that_sees_no_arrival_cannot_wait_where_nothing_runs():
    # Nothing runs at the first decision; without the arrivals at 5 and 6 a rollout could not
    # wait, so the wait is masked there and costs what rule 0 does. (Taken as rule 0 now and
    # then rule k, the wait cost 1.93 here, below every rule's 2.20 to 2.52.)
    jobs = [Job(1, 0, 38, 2, 38, 1), Job(2, 0, 95, 2, 95, 2), Job(3, 0, 84, 2, 84, 3),
            Job(4, 0, 70, 1, 70, 1), Job(5, 0, 87, 1, 87, 2), Job(100, 5, 58, 2, 58, 1),
            Job(101, 6, 84, 2, 84, 2)]  # fmt: skip
    env = VecSchedulingEnv(trace_of(jobs, 2), 1, 7, 7, "easy", "fcfs", order_actions=True,
                           wait=True)  # fmt: skip
    env.reset()
    assert env.mask[0, 6]  # the environment itself may wait for the arrival
    for runtimes in (True, False):
        costs = env.rule_costs(arrivals=False, runtimes=runtimes)[0]
        assert costs[6] == costs[0] > costs[:6].min()
    with_arrivals = env.rule_costs(arrivals=True, runtimes=False)[0]
    assert with_arrivals[6] != with_arrivals[0]


def played_out(trace, options, actions, rule) -> float:
    """The avg bsld of the episode that takes `actions`, then `rule` at every decision."""
    env = VecSchedulingEnv(trace, 1, 50, 16, "conservative", "f1", seed=7, **options)
    env.reset()
    for a in actions:
        env.step(np.array([a]))
    terminated = [False]
    while not terminated[0]:
        _, _, terminated, _, info = env.step(np.array([rule]))
    return float(info["avg_bsld"][0])


def test_a_cost_is_the_episode_played_out():
    # K = 16 of 50 jobs: hidden jobs, both backfills, the EASY++ estimates, random rules first.
    trace = at_load(generate(3000, machine_procs=64, seed=5), 0.2)  # queues to choose from
    options = dict(estimate="predicted", order_actions=True,
                   action_backfills=("easy", "conservative"))  # fmt: skip
    env = VecSchedulingEnv(trace, 1, 50, 16, "conservative", "f1", seed=7, **options)
    env.reset()
    rng, actions, differ, terminated = np.random.default_rng(3), [], 0, [False]
    while not terminated[0]:  # every decision of the episode
        costs = env.rule_costs()[0]
        differ += len(set(costs)) > 1
        for rule in rng.choice(12, 3, replace=False):
            assert costs[rule] == played_out(trace, options, actions, rule)
        actions.append(int(rng.integers(12)))
        _, _, terminated, _, _ = env.step(np.array([actions[-1]]))
    assert differ >= 3  # states where the rules' costs differ


def test_the_wait_costs_waiting_then_the_best_rule():
    trace = at_load(generate(3000, machine_procs=64, seed=5), 0.2)
    options = dict(estimate="predicted", order_actions=True, wait=True,
                   action_backfills=("easy", "conservative"))  # fmt: skip
    env = VecSchedulingEnv(trace, 1, 50, 16, "conservative", "f1", seed=7, **options)
    env.reset()
    rng, actions, cheapest, terminated = np.random.default_rng(4), [], 0, [False]
    while not terminated[0]:  # every decision of the episode, a random rule or wait after it
        costs = env.rule_costs()[0]
        assert len(costs) == 13  # 12 rules and the wait
        if env.mask[0, 12]:
            then = [played_out(trace, options, actions + [12], rule) for rule in range(12)]
            assert costs[12] == min(then)
            cheapest += costs[12] < costs[:12].min()
        actions.append(int(rng.integers(13)))
        _, _, terminated, _, _ = env.step(np.array([actions[-1]]))
    assert cheapest >= 1  # states where waiting is cheaper than any rule now


def test_rule_costs_need_order_actions():
    trace = generate(300, machine_procs=32, seed=1)
    env = VecSchedulingEnv(trace, 1, 50, 16, "easy", "f1")
    env.reset()
    with pytest.raises(ValueError, match="rule costs need order actions"):
        env._core.rule_costs(np.zeros((1, env._core.slots)))


class Fixed(torch.nn.Module):
    """A policy of fixed logits (and values 0) whatever it observes."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.tensor(logits))

    def forward(self, jobs, cluster, mask):
        return self.logits.expand(len(jobs), -1), torch.zeros(len(jobs))


def test_the_loss_weighs_each_state_by_what_a_random_slot_loses():
    policy = Fixed([0.0, np.log(3.0), 0.0])  # probabilities 0.2, 0.6, 0.2 over 3 slots
    batch = {
        "jobs": torch.zeros(3, 3, 1),
        "cluster": torch.zeros(3, 1),
        "mask": torch.tensor([[True, True, True], [True, True, False], [True] * 3]),
        "actions": torch.zeros(3, dtype=torch.long),
        "returns": torch.zeros(3),
        "costs": torch.tensor([[0.0, 2.0, 2.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    }
    loss, stats = cost_loss(policy, batch, value_coef=0.5, entropy_coef=0.0)
    # Row 0: slot 0 is cheapest, a random slot loses 4/3; row 1 (slot 2 masked): slot 1, 1/2;
    # row 2: every slot alike, weight 0. Weights over their mean 11/18: 24/11, 9/11, 0.
    expected = (24 / 11 * -np.log(0.2) + 9 / 11 * -np.log(0.75) + 0) / 3
    assert stats.policy_loss == pytest.approx(expected)
    loss.backward()
    assert policy.logits.grad[1] > 0 > policy.logits.grad[0]  # away from slot 1, to slot 0


def test_tied_cheapest_slots_share_the_target():
    policy = Fixed([0.0, 0.0, 0.0])
    batch = {
        "jobs": torch.zeros(1, 3, 1),
        "cluster": torch.zeros(1, 1),
        "mask": torch.ones(1, 3, dtype=torch.bool),
        "actions": torch.zeros(1, dtype=torch.long),
        "returns": torch.zeros(1),
        "costs": torch.tensor([[0.0, 0.0, 3.0]]),
    }
    cost_loss(policy, batch, value_coef=0.5, entropy_coef=0.0)[0].backward()
    grad = policy.logits.grad
    assert grad[0] == grad[1] < 0 < grad[2]


def test_a_run_learns_from_the_costs_not_the_teachers_picks(tmp_path):
    weights = {}
    for loss in ("costs", "cross_entropy"):
        train_run(tmp_path / loss, *TINY_TRAINING, "env.order_actions=true", "env.teacher=best",
                  "env.action_backfills=[easy, conservative]", "ppo.imitation_updates=2",
                  "ppo.imitation_rollout=policy", f"ppo.imitation_loss={loss}",
                  "ppo.updates=2")  # fmt: skip
        model = torch.load(tmp_path / loss / "checkpoint.pt", weights_only=False)["model"]
        weights[loss] = torch.cat([w.flatten() for w in model.values()])
    # The same seed, rollouts and first states: only the loss differs.
    assert not torch.equal(weights["costs"], weights["cross_entropy"])


@pytest.mark.parametrize("imitation_wait", [False, True])
def test_every_stored_state_has_a_cheapest_slot_to_clone(tmp_path, imitation_wait):
    # With env.wait, the costs are relative to the cheapest slot that imitation clones: the
    # wait too with ppo.imitation_wait, else the rules alone, even where waiting costs least
    # (at submit times x 0.3 waiting costs least in some states).
    overrides = [*TINY_TRAINING, "data.machine_procs=32", "env.order_actions=true",
                 "env.wait=true", "env.teacher=best", "ppo.imitation_updates=1",
                 "ppo.imitation_rollout=policy", "ppo.imitation_loss=costs",
                 f"ppo.imitation_wait={imitation_wait}", "data.load_scale=[0.3, 0.3]"]  # fmt: skip
    trainer = Trainer(load_config(None, overrides), context.init("cpu"), tmp_path)
    trainer.rollout()
    used = trainer.storage.used
    costs, mask = trainer.storage.costs[:used], trainer.storage.mask[:used]
    assert mask[..., 6].any() == imitation_wait  # the wait slot (6 rules) is cloned or not
    cheapest = torch.where(mask, costs, torch.inf).amin(dim=2)
    assert torch.equal(cheapest, torch.zeros_like(cheapest))
