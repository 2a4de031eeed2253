"""`env.order_picks` (docs/environment.md, "Order picks"): the mask keeps only the visible
jobs that some order picks first; by hand, against each order's own pick, and the teacher's
pick always among them."""

import numpy as np
import pytest
from reference_sim import Job
from simhelpers import trace_of

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.sim import POLICIES

WINDOW = 100


@pytest.fixture(scope="module")
def trace():
    return generate(3000, machine_procs=64, seed=5)


def test_a_job_no_order_picks_first_is_masked():
    # 4 procs, no backfilling: A runs from 0 to 100, X (4 procs) is committed at 0; B, C, D
    # and E wait, and at the decision at t = 100 have waited 90, 80, 70 and 60 s.
    # FCFS, F1 and UNICEP pick B, SJF and WFP3 D, SJBF C (test_best_heuristic.py's ranks by
    # hand). E (4 procs, request 400, no history): SJF 400 > D's 100; WFP3 -(60/400)^3 x 4 =
    # -0.0135 > D's -1.372; UNICEP -60 / (2 x 400) = -0.075 > B's -2.25e14; SJBF 400 > C's
    # 100; F1 log10(400) x 4 + 870 log10(40) = 1404.1 > B's 872.6: nobody's first.
    jobs = [
        Job(1, 0, 100, 2, 100, 7),  # A
        Job(2, 0, 10, 4, 10, 9),  # X
        Job(3, 10, 50, 1, 400, 5),  # B
        Job(4, 20, 50, 2, 400, 7),  # C
        Job(5, 30, 50, 4, 100, 6),  # D
        Job(6, 40, 50, 4, 400, 8),  # E
    ]
    masks = {}
    for picks in (False, True):
        env = VecSchedulingEnv(
            trace_of(jobs, 4), 1, 6, 4, "none", heuristic_ranks=True, order_picks=picks
        )
        env.reset()
        env.step(np.array([0]))  # A starts
        masks[picks] = env.step(np.array([0]))[0]["action_mask"][0].tolist()  # X, then t = 100
    assert masks == {False: [True] * 4, True: [True, True, True, False]}


@pytest.mark.parametrize("history, wait", [(False, False), (True, False), (True, True)])
def test_the_mask_holds_exactly_the_orders_picks(trace, history, wait):
    # Without backfilling the order only names the teacher: one environment per order, driven
    # by the same actions, shows each order's pick; their union is the mask (the wait slot
    # kept as it is).
    options = dict(window_jobs=WINDOW, max_queue=16, backfill="none", seed=4, wait=wait)
    options.update(history=history, heuristic_ranks=True)
    picking = VecSchedulingEnv(trace, 2, order_picks=True, **options)
    orders = [VecSchedulingEnv(trace, 2, policy=p, **options) for p in POLICIES]
    obs = picking.reset()[0]
    for env in orders:
        env.reset()
    rng = np.random.default_rng(1)
    narrowed = 0
    for _ in range(400):
        picks = np.zeros_like(obs["action_mask"])
        for env in orders:
            picks[np.arange(2), env.heuristic_actions()] = True
        plain = orders[0].mask.view(bool)
        if wait:
            picks[:, -1] = plain[:, -1]
        assert np.array_equal(obs["action_mask"], picks & plain)
        narrowed += int((plain.sum(axis=1) > picks.sum(axis=1)).sum())
        actions = picking.random_actions(rng)
        obs = picking.step(actions)[0]
        for env in orders:
            env.step(actions)
    assert narrowed > 100


SETTINGS = [
    dict(backfill="none", policy="fcfs"),
    dict(backfill="easy", policy="sjf", teacher="best"),
    dict(backfill="easy", policy="unicep", estimate="predicted", history=True),
    dict(backfill="conservative", policy="f1", estimate="predicted", history=True, teacher="best"),
    dict(backfill="conservative", policy="sjbf", wait=True),
    dict(backfill="easy", policy="wfp3", teacher="rollout"),
]


@pytest.mark.parametrize("setting", SETTINGS)
def test_the_teachers_pick_is_always_in_the_mask(trace, setting):
    # Driven half by the teacher and half at random, every step's teacher pick is a job the
    # narrowed mask keeps.
    env = VecSchedulingEnv(
        trace, 3, 64, 16, seed=6, heuristic_ranks=True, order_picks=True, **setting
    )
    obs = env.reset()[0]
    rng = np.random.default_rng(2)
    for step in range(300):
        teacher = env.heuristic_actions()
        assert obs["action_mask"][np.arange(3), teacher].all()
        obs = env.step(teacher if step % 2 else env.random_actions(rng))[0]


def test_order_picks_needs_the_ranks(trace):
    with pytest.raises(ValueError, match="order_picks needs heuristic_ranks"):
        VecSchedulingEnv(trace, 1, WINDOW, order_picks=True)
    with pytest.raises(ValueError, match="and agent_backfill off"):
        VecSchedulingEnv(
            trace, 1, WINDOW, heuristic_ranks=True, agent_backfill=True, order_picks=True
        )
    with pytest.raises(ConfigError, match="'env.order_picks' needs 'env.heuristic_ranks' true"):
        load_config(None, ["env.order_picks=true"])
    with pytest.raises(ConfigError, match="'env.order_picks' cannot be used with 'env.agent_b"):
        load_config(
            None, ["env.order_picks=true", "env.heuristic_ranks=true", "env.agent_backfill=true"]
        )
    assert load_config(None, ["env.order_picks=true", "env.heuristic_ranks=true"]).env.order_picks
