"""ppo.imitation_rollout: who acts while the first updates copy the teacher. `teacher`
(behaviour cloning): the teacher's picks step and are learnt; `policy` (DAgger): the policy's
sampled actions step, and the teacher's picks at the states they reach are learnt."""

import numpy as np
import pytest
from simhelpers import TINY_TRAINING

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.dist import context
from ddppo_hpc.train import Trainer

# A machine small enough for queues to form, and a teacher (SJF) that does not always take
# the oldest job.
QUEUED = ["data.machine_procs=32", "env.backfill_order=sjf"]


def recorded_rollout(tmp_path, rollout: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stepped actions, teacher picks, stored actions), each [T, B], of one imitation rollout
    on the real environment (its step and heuristic_actions are only recorded)."""
    overrides = [
        *TINY_TRAINING,
        *QUEUED,
        "ppo.imitation_updates=1",
        f"ppo.imitation_rollout={rollout}",
    ]
    trainer = Trainer(load_config(None, overrides), context.init("cpu"), tmp_path)
    env, stepped, picks = trainer.env, [], []
    step, heuristic = env.step, env.heuristic_actions
    env.step = lambda actions: (stepped.append(np.array(actions)), step(actions))[1]
    env.heuristic_actions = lambda: (picks.append(heuristic()), picks[-1])[1]
    trainer.rollout()
    stored = trainer.storage.actions[: trainer.storage.used].numpy()
    return np.array(stepped), np.array(picks), stored


def test_behaviour_cloning_steps_and_learns_the_teacher(tmp_path):
    stepped, picks, stored = recorded_rollout(tmp_path, "teacher")
    assert np.array_equal(stepped, picks) and np.array_equal(stored, picks)


def test_dagger_steps_the_policy_and_learns_the_teacher(tmp_path):
    stepped, picks, stored = recorded_rollout(tmp_path, "policy")
    assert np.array_equal(stored, picks)  # the labels are the teacher's picks
    assert not np.array_equal(stepped, picks)  # the untrained policy's samples differ somewhere


def test_an_unknown_imitation_rollout_is_refused():
    with pytest.raises(ConfigError, match="'ppo.imitation_rollout' must be one of teacher, policy"):
        load_config(None, ["ppo.imitation_rollout=expert"])
