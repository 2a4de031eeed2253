"""What the plots of `analyze` show: the learning curve's smoothed mean and the baseline
heuristic's bsld on the same training windows (logged by training), one utilization summary
per scheduler, per-user bsld with users matched across schedulers, hours on time axes and
'lower is better' on bsld and wait axes."""

import json

import h5py
import numpy as np
import pytest

from ddppo_hpc import analyze
from ddppo_hpc.config import load_config
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.metrics_log import MetricsLog, baseline_bslds
from ddppo_hpc.results import METRICS, Results, summarize


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
        got = baseline_bslds(env, terminated, c)
        expected = info["avg_bsld"][terminated] + reward[terminated]
        np.testing.assert_allclose(got, expected, rtol=1e-6)  # the reward is float32
        checked += int(terminated.sum())


def test_no_baseline_logs_nan():
    env_terminated = np.array([True, False, True])
    got = baseline_bslds(None, env_terminated, config("env.reward_baseline=none"))
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


def test_trailing_mean_by_hand():
    values = np.array([1.0, 3.0, np.nan, 5.0, 7.0])
    got = analyze.trailing_mean(values, 2)
    np.testing.assert_allclose(got, [1.0, 2.0, 3.0, 5.0, 6.0])  # a NaN is skipped


def tiny_results() -> Results:
    """Two users, three schedulers under easy: f1 is the best heuristic (lowest mean avg
    bsld), sjf+predicted the worst; window metrics set by hand."""
    keys = [("ddppo", "easy", "request"), ("f1", "easy", "request"), ("sjf", "easy", "predicted")]
    bslds = {keys[0]: [4.0, 2.0], keys[1]: [1.0, 3.0], keys[2]: [8.0, 6.0]}  # users 7, 9
    jobs = {name: [] for name in ("policy", "backfill", "estimate", "user", "bsld", "wait")}
    windows = {name: [] for name in ("policy", "backfill", "estimate", *METRICS)}
    for key in keys:
        for user, bsld in zip((7, 9), bslds[key]):
            for name, value in zip(("policy", "backfill", "estimate"), key):
                jobs[name].append(value)
            jobs["user"].append(user), jobs["bsld"].append(bsld), jobs["wait"].append(60.0)
        for w in range(2):
            for name, value in zip(("policy", "backfill", "estimate"), key):
                windows[name].append(value)
            windows["avg_bsld"].append(np.mean(bslds[key]) + w)
            windows["avg_wait"].append(60.0)
            windows["utilization"].append(0.5 + 0.1 * w)
            windows["jain_user_bsld"].append(1.0)
    windows = {k: np.array(v) for k, v in windows.items()}
    split = {"part": "test", "fractions": [0.7, 0.1, 0.2], "first_job": 70, "stop_job": 100}
    attrs = {"split": json.dumps({**split, "trace_jobs": 100}), "trace": "/x/kth.swf"}
    attrs["window_spec"] = json.dumps({"kind": "rlscheduler"})
    attrs["config"] = json.dumps({"env": {"backfill": "easy", "reward_baseline": "f1"}})
    summary = {
        k: v.astype(str) if v.dtype.kind == "S" else v for k, v in summarize(windows).items()
    }
    return Results(attrs, {k: np.array(v) for k, v in jobs.items()}, windows, summary)


def test_best_heuristic_skips_the_policy_and_labels_the_estimate():
    results = tiny_results()
    assert analyze.best_heuristic(results, "easy") == (("f1", "easy", "request"), "f1")
    assert [label for _, label in analyze.schedulers(results, "easy")] == [
        "ddppo",
        "f1",
        "sjf+predicted",
    ]
    assert analyze.scored(results) == (
        "Scored: `kth.swf`, test part: jobs 70 .. 99 of 100 (split 0.7/0.1/0.2); "
        "windows: RLScheduler protocol."
    )


def test_user_bsld_matches_users_sorted_by_the_best_heuristic():
    fig = analyze.plot_user_bsld(tiny_results())
    lines = {line.get_label(): line.get_ydata().tolist() for line in fig.axes[0].lines}
    # f1: user 9 (3.0) before user 7 (1.0); the other schedulers in that same user order
    assert lines["f1 (best heuristic)"] == [3.0, 1.0]
    assert lines["ddppo"] == [2.0, 4.0]
    assert [8.0, 6.0][::-1] in lines.values()  # sjf+predicted, grey
    assert "lower is better" in fig.axes[0].get_ylabel()


def test_utilization_bars_are_the_tables_means_with_intervals():
    results = tiny_results()
    ax = analyze.plot_utilization(results).axes[0]
    widths = [bar.get_width() for bar in ax.patches]
    np.testing.assert_allclose(widths, results.summary["utilization_mean"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ddppo", "f1", "sjf+predicted"]


def test_learning_curve_draws_the_same_windows_baseline_or_says_other_windows():
    results = tiny_results()
    curve = {"update": np.arange(1.0, 41), "episode_bsld": np.full(40, 5.0)}
    labels = [x.get_label() for x in analyze.plot_learning_curve(curve, "r", results).axes[0].lines]
    assert (
        labels[-1]
        == "f1 + easy: best heuristic of the evaluation (test part, not the training windows)"
    )
    curve["baseline_bsld"] = np.full(40, 4.0)
    ax = analyze.plot_learning_curve(curve, "r", results).axes[0]
    assert ax.lines[-1].get_label() == "f1 + easy, same windows, mean of 2"
    assert ax.lines[-1].get_ydata().tolist() == [4.0] * 40
    assert ax.lines[1].get_label() == "policy, mean of the last 2"
