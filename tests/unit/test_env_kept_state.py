"""What the environment keeps from one observation to the next instead of computing it again
at every decision (the heuristic ranks' orders, the users' history features) gives the
observation built from scratch: under a queue longer than K, with random actions, an
environment restored to the same point by replaying the episode's actions (which observes
only once, at the end, with nothing kept) shows the same arrays."""

import numpy as np
import pytest

from ddppo_hpc.data.source import at_load
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import VecSchedulingEnv

K, WINDOW = 16, 300


@pytest.mark.parametrize(
    "options",
    [
        dict(heuristic_ranks=True, history=True),
        dict(heuristic_ranks=True, history=True, policy="wfp3", wait=True),
        dict(
            heuristic_ranks=True,
            history=True,
            backfill="conservative",
            policy="f1",
            estimate="predicted",
        ),
        dict(heuristic_ranks=True, history=True, agent_backfill=True, policy="unicep"),
        dict(fit_times=True, wait=True),
        dict(order_actions=True, fit_times=True),
    ],
)
def test_the_kept_observation_is_the_one_from_scratch(options):
    trace = at_load(generate(2000, machine_procs=64, seed=3), 0.3)  # the queue grows past K

    def make():
        return VecSchedulingEnv(trace, 2, WINDOW, K, seed=1, **options)

    env = make()
    obs, _ = env.reset()
    rng = np.random.default_rng(0)
    compared = long_queues = 0
    for step in range(500):
        obs, *_ = env.step(env.random_actions(rng))
        long_queues += np.count_nonzero(obs["cluster"][:, 2] == 1)  # queue length >= K
        if step % 20 == 0:
            fresh = make().load_state(env.state())
            for key, array in obs.items():
                assert np.array_equal(fresh[key], array), (step, key)
            compared += 1
    assert compared == 25 and long_queues > 20
