"""What the plots of `analyze` show: the learning curve's smoothed mean and the baseline
heuristic's bsld on the same training windows (logged by training), one utilization summary
per scheduler, per-user bsld with users matched across schedulers, hours on time axes and
'lower is better' on bsld and wait axes."""

import h5py
import numpy as np
import pytest

from ddppo_hpc.config import load_config
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.metrics_log import MetricsLog, baseline_bslds


def config(*overrides):
    return load_config(None, ["env.window_jobs=48", "env.backfill=easy", *overrides])


@pytest.mark.parametrize("baseline", ["f1", "sjf"])
def test_baseline_bsld_is_the_environments_baseline_on_the_same_window(baseline):
    """With a sparse bsld reward the episode's reward is the baseline's avg bsld minus the
    policy's: the logged baseline must be exactly that, window by window."""
    c = config(f"env.reward_baseline={baseline}", "env.reward=bsld")
    trace = generate(600, machine_procs=64, seed=5)
    env = VecSchedulingEnv(trace, 3, 48, 16, "easy", "fcfs", "bsld", seed=1, baseline=baseline)
    env.reset()
    rng, checked = np.random.default_rng(0), 0
    while checked < 6:
        _, reward, terminated, _, info = env.step(env.random_actions(rng))
        got = baseline_bslds(env, info, terminated, c)
        expected = info["avg_bsld"][terminated] + reward[terminated]
        np.testing.assert_allclose(got, expected, rtol=1e-6)  # the reward is float32
        checked += int(terminated.sum())


def test_no_baseline_logs_nan():
    env_terminated = np.array([True, False, True])
    got = baseline_bslds(None, {}, env_terminated, config("env.reward_baseline=none"))
    assert len(got) == 2 and np.isnan(got).all()


def test_metrics_row_holds_both_means_and_a_resumed_old_file_gets_nan_before(tmp_path):
    path = tmp_path / "metrics.h5"
    with h5py.File(path, "w") as f:  # a file from before baseline_bsld was logged
        f["update"] = [1.0]
        f["episode_bsld"] = [9.0]
    log = MetricsLog(path, updates=3, resumed=1)
    losses = dict.fromkeys(
        ["policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"], 0.0
    )
    log.record(2, losses, [1.0], [8], 8, [(4.0, 3.0), (6.0, 5.0)], 2)
    with h5py.File(path) as f:
        assert f["episode_bsld"][...].tolist() == [9.0, 5.0]
        assert f["baseline_bsld"][0] != f["baseline_bsld"][0] and f["baseline_bsld"][1] == 4.0
