"""Evaluation into HDF5 and its analysis, end to end on a tiny trained checkpoint: the file
follows docs/results.md, its numbers agree with the simulator and with each other, and the
analysis writes its table, plots and README block."""

import hashlib
import json
import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from simhelpers import TINY_TRAINING

from ddppo_hpc import evaluate
from ddppo_hpc.data import read_swf
from ddppo_hpc.evaluate import windows_of
from ddppo_hpc.results import read_results, t_quantile
from ddppo_hpc.sim import simulate

ROOT = Path(__file__).resolve().parent.parent
PYTHON = [sys.executable, "-m"]
SCHEDULERS = ["ddppo", "fcfs", "sjf", "wfp3", "unicep", "f1", "sjbf"]
WINDOWS = [(5600, 1024), (6624, 376)]  # the test part of 7000 jobs, RLScheduler protocol


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """A 2-update run, evaluated on a 7,000-job SWF with the default windows: the RLScheduler
    protocol in the test part (jobs 5600 .. 6999): 1024 jobs, then the clipped rest, 376;
    under none and easy, backfilling with the requests."""
    tmp = tmp_path_factory.mktemp("evaluate")
    swf, run, results = tmp / "held-out.swf", tmp / "run", tmp / "results.h5"
    subprocess.run([*PYTHON, "ddppo_hpc.data.synthetic", "--jobs", "7000", "--seed", "3",
                    "--out", str(swf)], check=True, timeout=300)  # fmt: skip
    subprocess.run(
        [*PYTHON, "ddppo_hpc.train", "--run-dir", str(run), *TINY_TRAINING, "ppo.updates=2"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    out = subprocess.run(
        [*PYTHON, "ddppo_hpc.evaluate", "--checkpoint", str(run), "--trace", str(swf),
         "--backfill", "none,easy", "--estimate", "request", "--out", str(results)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return {"swf": swf, "run": run, "results": results, "stdout": out.stdout, "tmp": tmp}


def documented(group: str) -> dict[str, str]:
    """name -> type of a table of docs/results.md, under the heading that starts with group."""
    text = (ROOT / "docs" / "results.md").read_text()
    section = text.split(f"\n## {group}", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section, flags=re.M))


def test_results_file_follows_the_documented_schema(evaluated):
    with h5py.File(evaluated["results"], "r") as f:
        assert set(f) == {"jobs", "windows", "summary"}
        for group in f:
            expected = documented(f"/{group}")
            assert {k: str(f[group][k].dtype).lstrip("|") for k in f[group]} == expected
            assert len({len(f[group][k]) for k in f[group]}) == 1  # columns of one table
        assert set(f.attrs) == set(documented("Root attributes"))


def test_attributes_describe_the_run_and_the_trace(evaluated):
    attrs = read_results(evaluated["results"]).attrs
    checkpoint = torch.load(evaluated["run"] / "checkpoint.pt", weights_only=False)
    assert json.loads(attrs["config"]) == checkpoint["config"]
    assert attrs["checkpoint"] == str((evaluated["run"] / "checkpoint.pt").resolve())
    assert attrs["trace"] == str(evaluated["swf"].resolve())
    assert attrs["trace_sha256"] == hashlib.sha256(evaluated["swf"].read_bytes()).hexdigest()
    spec = {"kind": "rlscheduler", "windows": 10, "jobs": 1024, "start": 5600}
    assert json.loads(attrs["window_spec"]) == spec
    part = {"part": "test", "fractions": [0.7, 0.1, 0.2], "first_job": 5600, "stop_job": 7000}
    assert json.loads(attrs["split"]) == {**part, "trace_jobs": 7000}
    assert attrs["estimates"] == ["request"]
    assert attrs["policies"] == SCHEDULERS and attrs["backfills"] == ["none", "easy"]
    assert {"ddppo_hpc", "python", "torch", "numpy", "h5py"} <= set(json.loads(attrs["versions"]))
    assert attrs["ranks"] == 1 and "--backfill none,easy" in attrs["command"]


def test_heuristic_schedules_are_the_simulators(evaluated):
    r, trace = read_results(evaluated["results"]), read_swf(evaluated["swf"])
    j = r.jobs
    for policy in SCHEDULERS[1:]:
        for backfill in ("none", "easy"):
            for window, (first, jobs) in enumerate(WINDOWS):
                rows = (j["policy"] == policy) & (j["backfill"] == backfill)
                rows &= j["window"] == window
                expected = simulate(trace, policy, backfill, first, jobs)
                assert np.array_equal(j["start"][rows], expected.start_time)
                assert np.array_equal(j["job_id"][rows], trace.id[first : first + jobs])


def test_windows_agree_with_their_jobs_and_schedules_fit_the_machine(evaluated):
    r = read_results(evaluated["results"])
    j, w = r.jobs, r.windows
    assert len(w["policy"]) == 7 * 2 * 2 and list(w["jobs"][:2]) == [1024, 376]
    assert list(w["first_job"][:2]) == [5600, 6624]
    for row in range(len(w["policy"])):
        rows = (j["policy"] == w["policy"][row]) & (j["backfill"] == w["backfill"][row])
        rows &= j["window"] == w["window"][row]
        assert rows.sum() == w["jobs"][row]
        assert j["bsld"][rows].mean() == pytest.approx(w["avg_bsld"][row], rel=1e-12)
        assert j["wait"][rows].mean() == pytest.approx(w["avg_wait"][row], rel=1e-12)
        assert (j["wait"][rows] >= 0).all()
        # Busy processors never exceed the machine (ends before starts at equal times).
        times = np.concatenate([j["end"][rows], j["start"][rows]])
        change = np.concatenate([-j["procs"][rows], j["procs"][rows]])
        busy = np.cumsum(change[np.lexsort((change, times))])
        assert busy.max() <= r.attrs["machine_procs"]


def test_summary_is_the_mean_and_t_interval_over_windows(evaluated):
    r = read_results(evaluated["results"])
    s, w = r.summary, r.windows
    assert list(zip(s["policy"], s["backfill"])) == [
        (p, b) for p in SCHEDULERS for b in ("none", "easy")
    ]
    for row in range(len(s["policy"])):
        chosen = (w["policy"] == s["policy"][row]) & (w["backfill"] == s["backfill"][row])
        a, b = w["avg_bsld"][chosen]
        half = 12.706204736 * abs(a - b) / 2  # t(0.975, 1) x s / sqrt(2), s = |a - b| / sqrt(2)
        assert s["avg_bsld_mean"][row] == pytest.approx((a + b) / 2)
        assert s["avg_bsld_high"][row] - s["avg_bsld_mean"][row] == pytest.approx(half, rel=1e-5)
        assert s["avg_bsld_mean"][row] - s["avg_bsld_low"][row] == pytest.approx(half, rel=1e-5)


def test_t_quantiles_match_the_tables():
    # Student-t two-sided 95% quantiles (any statistics table), and the normal limit.
    for df, value in ((1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423)):
        assert t_quantile(df) == pytest.approx(value, abs=1e-4)
    assert t_quantile(100_000) == pytest.approx(1.9600, abs=1e-3)


def test_window_choices_stay_inside_the_part():
    def part(first, stop):
        return {"part": "test", "first_job": first, "stop_job": stop}

    spans = windows_of(part(0, 10_000), Namespace(full=False, windows=None))[0]
    assert spans == [(k * 1024, 1024) for k in range(9)] + [(9216, 784)]
    spans = windows_of(part(8000, 10_000), Namespace(full=False, windows=None))[0]
    assert spans == [(8000, 1024), (9024, 976)]
    assert windows_of(part(100, 600), Namespace(full=True, windows=None)) == (
        [(100, 500)],
        {"kind": "full", "jobs": 500, "start": 100},
    )
    random = Namespace(full=False, windows=4, jobs=100, seed=7)
    spans, spec = windows_of(part(1000, 2000), random)
    assert spans == windows_of(part(1000, 2000), random)[0] and len(spans) == 4
    assert all(1000 <= first <= 1900 and jobs == 100 for first, jobs in spans)
    assert spec == {"kind": "random", "windows": 4, "jobs": 100, "seed": 7, "start": 1000}


def test_table_printed_without_out(evaluated):
    lines = evaluated["stdout"].splitlines()
    assert lines[0] == (
        f"scored: {evaluated['swf']}, test part: jobs 5600 .. 6999 of 7000 (split 0.7/0.1/0.2);"
        " windows: RLScheduler protocol"
    )
    assert [line.split()[:3] for line in lines[2:]] == [
        [p, b, "2"] for p in SCHEDULERS for b in ("none", "easy")
    ]


def test_analyze_writes_table_plots_and_readme_block(evaluated):
    tmp = evaluated["tmp"]
    published = tmp / "published.csv"
    published.write_text("scheduler,backfill,avg_bsld,source\nsjf,easy,73.31,A paper\n")
    readme = tmp / "README.md"
    readme.write_text("# x\n<!-- results-table:begin -->\nSTALE\n<!-- results-table:end -->\nend\n")
    out = subprocess.run(
        [*PYTHON, "ddppo_hpc.analyze", str(evaluated["results"]), "--out", str(tmp / "an"),
         "--published", str(published), "--readme", str(readme)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    names = ["bsld_windows", "wait_cdf", "utilization", "user_bsld", "learning_curve"]
    for name in names:
        assert (tmp / "an" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = [line for line in (tmp / "an" / "results.md").read_text().splitlines()
             if line.startswith("| ")][1:]  # fmt: skip
    assert len(table) == 14 and table[0].startswith("| ddppo | none | 2 |")
    assert "Published: A paper." in (tmp / "an" / "results.md").read_text()
    summary = read_results(evaluated["results"]).summary
    # Bold: the lowest mean bsld among the easy-backfill rows (odd rows), and only it.
    best = 2 * int(np.argmin(summary["avg_bsld_mean"][1::2])) + 1
    bsld_cells = [row.split(" | ")[3] for row in table]
    assert [k for k in range(1, 14, 2) if bsld_cells[k].startswith("**")] == [best]
    sjf_easy = next(row for row in table if row.startswith("| sjf | easy |"))
    assert sjf_easy.endswith("| 73.31 |")
    text = readme.read_text()
    assert "STALE" not in text and text.startswith("# x\n") and text.endswith("end\n")
    assert "| sjf | easy |" in text


def test_bad_input_is_one_line_and_exit_2(evaluated, tmp_path):
    cases = [
        ([*PYTHON, "ddppo_hpc.evaluate", "--checkpoint", str(tmp_path)], "no checkpoint"),
        ([*PYTHON, "ddppo_hpc.evaluate", "--policies", "ddppo"], "needs --checkpoint"),
        ([*PYTHON, "ddppo_hpc.evaluate", "--trace", str(evaluated["swf"]), "--windows", "2",
          "--jobs", "5000"], "within the test part's 1400 jobs"),
        ([*PYTHON, "ddppo_hpc.analyze", str(evaluated["swf"])], "cannot read results"),
        ([*PYTHON, "ddppo_hpc.evaluate", "--checkpoint", str(evaluated["swf"])],
         "not a ddppo-hpc training checkpoint"),
        ([*PYTHON, "ddppo_hpc.evaluate", "--checkpoint", str(evaluated["run"]), "--trace",
          str(evaluated["swf"]), "--split", "train"],
         "--split train scores the trained policy on jobs it trained on (train part: jobs 0 .. "
         "4899 of 7000 (split 0.7/0.1/0.2)); add --allow-train-jobs"),
    ]  # fmt: skip
    for command, message in cases:
        out = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and message in out.stderr


def test_train_jobs_only_when_asked(evaluated):
    out = subprocess.run(
        [*PYTHON, "ddppo_hpc.evaluate", "--checkpoint", str(evaluated["run"]), "--trace",
         str(evaluated["swf"]), "--split", "train", "--allow-train-jobs", "--policies",
         "ddppo,fcfs", "--windows", "2", "--jobs", "100"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "train part: jobs 0 .. 4899 of 7000" in out.stdout.splitlines()[0]


def test_an_empty_part_is_one_line_and_exit_2(evaluated, tmp_path):
    run = tmp_path / "run"
    checkpoint = torch.load(evaluated["run"] / "checkpoint.pt", weights_only=False)
    checkpoint["config"]["data"]["split"] = [0.9, 0.1, 0.0]
    run.mkdir()
    torch.save(checkpoint, run / "checkpoint.pt")
    out = subprocess.run(
        [*PYTHON, "ddppo_hpc.evaluate", "--checkpoint", str(run), "--trace", str(evaluated["swf"])],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "nothing to score in the test part: no jobs of 7000 (split 0.9/0.1/0)" in out.stderr


def without_first(weights: dict) -> None:
    del weights[next(iter(weights))]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["config"]["policy"].update(hidden=64), "(mlp, hidden 64) on this version's "
         "observation (11 job, 3 cluster features): encode.0.weight is [32, 14] in the weights, "
         "[64, 14] in the policy"),
        (lambda c: without_first(c["model"]), "hidden 32) on this version's observation (11 job, "
         "3 cluster features): no encode.0.weight in the weights"),
        (lambda c: c["model"].update(extra=torch.zeros(1)), "extra in the weights is not in the"),
        (lambda c: c["config"]["policy"].update(hidden="wide"), "pt: 'policy.hidden' must be int"),
        (lambda c: c["config"]["ppo"].update(lr=-1.0), "pt: 'ppo.lr' must be positive"),
    ],
)  # fmt: skip
def test_a_checkpoint_whose_config_and_weights_disagree_is_one_line(
    evaluated, tmp_path, change, message, capsys
):
    checkpoint = torch.load(evaluated["run"] / "checkpoint.pt", weights_only=False)
    change(checkpoint)
    torch.save(checkpoint, tmp_path / "checkpoint.pt")
    argv = ["--trace", str(evaluated["swf"]), "--windows", "1", "--jobs", "10"]
    assert evaluate.main(["--checkpoint", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"evaluate: error: {tmp_path / 'checkpoint.pt'}: " in err[0]
    assert message in err[0]


def test_evaluate_does_not_write_over_its_checkpoint(evaluated, capsys):
    checkpoint = evaluated["run"] / "checkpoint.pt"
    before = checkpoint.read_bytes()
    argv = ["--checkpoint", str(evaluated["run"]), "--out", str(checkpoint)]
    assert evaluate.main([*argv, "--windows", "1", "--jobs", "10"]) == 2
    assert f"{checkpoint}: would replace {checkpoint}, an input" in capsys.readouterr().err
    assert checkpoint.read_bytes() == before


def with_recorded_waits(swf: Path, out: Path, wait_of) -> Path:
    """A copy of an SWF file whose field 3 (the recorded wait) is wait_of(line number)."""
    lines = []
    for k, line in enumerate(swf.read_text().splitlines()):
        fields = line.split()
        if line.startswith(";") or not fields:
            lines.append(line)
            continue
        fields[2] = str(wait_of(k))
        lines.append(" ".join(fields))
    out.write_text("\n".join(lines) + "\n")
    return out


def test_the_recorded_row_is_the_logs_schedule_when_every_window_has_it(evaluated, tmp_path):
    swf = with_recorded_waits(evaluated["swf"], tmp_path / "waits.swf", lambda k: 7 * (k % 5))
    argv = ["--trace", str(swf), "--windows", "3", "--jobs", "100", "--backfill", "easy"]
    out = tmp_path / "r.h5"
    assert evaluate.main([*argv, "--out", str(out)]) == 0
    r, trace = read_results(out), read_swf(swf)
    assert r.attrs["policies"][-1] == "recorded"
    assert list(r.summary["policy"][-1:]) == ["recorded"] and r.summary["backfill"][-1] == "-"
    rows = r.jobs["policy"] == "recorded"
    ids = r.jobs["job_id"][rows]
    index = np.searchsorted(trace.id, ids)
    assert np.array_equal(r.jobs["start"][rows], trace.submit[index] + trace.wait_time[index])
    # One job without field 3 in a window: no row by default, refused when asked for.
    holes = with_recorded_waits(
        evaluated["swf"], tmp_path / "holes.swf", lambda k: -1 if k == 6500 else 3
    )
    hole_argv = ["--trace", str(holes), "--full", "--estimate", "request"]
    assert evaluate.main([*hole_argv, "--out", str(tmp_path / "h.h5")]) == 0
    assert "recorded" not in read_results(tmp_path / "h.h5").attrs["policies"]
    refused = subprocess.run(
        [*PYTHON, "ddppo_hpc.evaluate", *hole_argv, "--policies", "fcfs,recorded"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "no recorded schedule (SWF field 3)" in refused.stderr


def test_the_trained_policy_backfills_with_the_estimate_it_trained_with():
    rows = evaluate.schedulers(["ddppo", "f1"], ["none", "easy"], ["request"], "predicted")
    assert rows == [
        ("ddppo", "none", "request"),  # without backfilling the estimate changes nothing
        ("ddppo", "easy", "predicted"),
        ("f1", "none", "request"),
        ("f1", "easy", "request"),
    ]


@pytest.mark.parametrize(
    "option", ["env.history=true", "env.agent_backfill=true", "env.heuristic_ranks=true"]
)
def test_a_checkpoint_is_rebuilt_with_its_configs_observation_widths(option, tmp_path):
    # bench/quality.py and evaluate build the policy from the config alone: an observation
    # with history or backfill-decision features must give the trained widths.
    from ddppo_hpc.config import load_config
    from ddppo_hpc.env.vector import feature_widths
    from ddppo_hpc.policy import build_policy

    config = load_config(None, [option])
    env = config.env
    widths = feature_widths(env.history, env.agent_backfill, env.heuristic_ranks)
    assert widths != feature_widths(False, False, False)
    weights = build_policy(config.policy, *widths).state_dict()
    model = evaluate.trained_policy(({"model": weights}, tmp_path / "c.pt"), config)
    assert all(torch.equal(model.state_dict()[k], weights[k]) for k in weights)
