"""Fit times (docs/environment.md, "Fit times"): each visible job's time until it fits, by
hand, after the history and rank features."""

import numpy as np
import pytest
from reference_sim import Job
from simhelpers import trace_of

from ddppo_hpc.config import ConfigError, load_config
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.env.vector import JOB_FEATURES, feature_widths


def observed_at_10(**options) -> np.ndarray:
    """4 procs, no backfilling. A (2 procs, request 200) and B (1 proc, request 60) start at
    0; C (1 proc), D (2) and E (4) arrive at 10, when 1 proc is free."""
    jobs = [
        Job(1, 0, 100, 2, 200, 7),  # A
        Job(2, 0, 50, 1, 60, 8),  # B
        Job(3, 10, 5, 1, 10, 9),  # C
        Job(4, 10, 5, 2, 10, 9),  # D
        Job(5, 10, 5, 4, 10, 9),  # E
    ]
    env = VecSchedulingEnv(trace_of(jobs, 4), 1, 5, 4, "none", fit_times=True, **options)
    env.reset()
    env.step(np.array([0]))  # A starts
    obs, *_ = env.step(np.array([0]))  # B starts; the next decision is at 10
    return obs["jobs"][0]


def test_fit_times_by_hand():
    jobs = observed_at_10()
    assert jobs.shape == (4, JOB_FEATURES + 1)
    # C fits in the free proc; D fits once B ends at its request (60); E once A ends (200).
    expected = [0, np.log10(1 + 50) / 6, np.log10(1 + 190) / 6, 0]  # the last slot: padding
    assert jobs[:, -1] == pytest.approx(expected)


def test_fit_times_follow_the_history_and_the_ranks():
    plain = observed_at_10()
    both = observed_at_10(history=True, heuristic_ranks=True)
    assert both.shape[1] == feature_widths(True, False, True, True)[0]
    assert both[:, -1] == pytest.approx(plain[:, -1])
    assert both[:, :JOB_FEATURES] == pytest.approx(plain[:, :JOB_FEATURES])


def test_fit_times_are_an_hpc_option(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("env:\n  fit_times: true\n")
    assert load_config(file).env.fit_times
    file.write_text("env:\n  fit_times: true\ngpu:\n  mode: placement\n")
    with pytest.raises(ConfigError, match="fit_times"):
        load_config(file)
