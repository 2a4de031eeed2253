"""bench/quality.py: the paired bootstrap ratio by hand, its seeded reproducibility, the
test and validation windows, the validation rule and the one rule on hand-made means, the
results files analyze reads, the README block with the three baselines, and bad input."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ddppo_hpc.analyze import report
from ddppo_hpc.config import TrainConfig
from ddppo_hpc.data.synthetic import generate, write_swf
from ddppo_hpc.policy import build_policy
from ddppo_hpc.results import read_results

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import quality  # noqa: E402


def test_the_same_ratio_in_every_window_gives_that_ratio_and_a_zero_width_interval():
    best = np.array([10.0, 20.0, 35.0, 7.5, 1.25])
    assert quality.paired_ratio(2 * best, best) == (2.0, 2.0, 2.0)


def test_the_ratio_is_of_the_means_and_two_windows_resample_to_three_ratios():
    # windows (policy, best): a = (2, 1), b = (2, 3). Ratio of the means: 4 / 4 = 1 (the mean
    # of the per-window ratios would be 4/3). Resamples: aa (1/4) -> 2, ab or ba (1/2) -> 1,
    # bb (1/4) -> 2/3; so percentiles 2.5 and 97.5 are 2/3 and 2.
    ratio, low, high = quality.paired_ratio(np.array([2.0, 2.0]), np.array([1.0, 3.0]))
    assert ratio == 1.0
    assert low == pytest.approx(2 / 3, abs=1e-12) and high == 2.0


def test_the_seeded_interval_is_reproducible_and_the_seed_matters():
    rng = np.random.default_rng(7)
    best = rng.uniform(5, 50, 12)
    policy = best * rng.uniform(0.8, 1.5, 12)
    first = quality.paired_ratio(policy, best, seed=3)
    assert quality.paired_ratio(policy, best, seed=3) == first
    assert quality.paired_ratio(policy, best, seed=4)[1:] != first[1:]
    assert first[1] < first[0] < first[2]


def test_one_window_has_no_interval():
    assert quality.paired_ratio(np.array([3.0]), np.array([2.0])) == (1.5, None, None)


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("KTH-SP2-1996-2.1-cln.swf.gz", "KTH-SP2"),
        ("lublin_256.swf.gz", "lublin_256"),
        ("HPC2N-2002-excerpt-3170.swf.gz", "HPC2N"),
        ("2001-x.swf.gz", "2001"),
    ],
)
def test_short_names(name, short):
    assert quality.short_name(Path(name)) == short


def test_windows_lie_in_the_test_part_and_a_short_part_is_one_whole_window():
    trace = generate(1000, machine_procs=64, seed=1)
    spans, spec, part = quality.part_windows(trace, (0.7, 0.1, 0.2), "test", 3, 80)
    assert spans == [(800, 80), (880, 80), (960, 40)]
    assert spec == {"kind": "consecutive", "windows": 3, "jobs": 80, "start": 800}
    assert (part["first_job"], part["stop_job"], part["trace_jobs"]) == (800, 1000, 1000)
    spans, spec, _ = quality.part_windows(trace, (0.7, 0.1, 0.2), "test", 20, 1024)
    assert spans == [(800, 200)] and spec == {"kind": "full", "jobs": 200, "start": 800}
    with pytest.raises(ValueError, match="nothing to score in the test part"):
        quality.part_windows(trace, (1.0, 0.0, 0.0), "test", 20, 1024)


def test_validation_windows_follow_the_same_spec_from_the_validation_part():
    trace = generate(1000, machine_procs=64, seed=1)
    spans, spec, part = quality.part_windows(trace, (0.7, 0.1, 0.2), "validation", 3, 80)
    assert spans == [(700, 80), (780, 20)] and part["part"] == "validation"
    assert spec == {"kind": "consecutive", "windows": 2, "jobs": 80, "start": 700}
    assert (part["first_job"], part["stop_job"]) == (700, 800)
    spans, spec, _ = quality.part_windows(trace, (0.7, 0.1, 0.2), "validation", 20, 1024)
    assert spans == [(700, 100)] and spec == {"kind": "full", "jobs": 100, "start": 700}
    with pytest.raises(ValueError, match="nothing to score in the validation part"):
        quality.part_windows(trace, (0.8, 0.0, 0.2), "validation", 20, 1024)


def summary(rows: list[tuple]) -> dict:
    """A summary table of (policy, backfill, estimate, mean avg bsld) rows."""
    columns = ("policy", "backfill", "estimate", "avg_bsld_mean")
    return {name: np.array([row[i] for row in rows]) for i, name in enumerate(columns)}


def test_the_validation_rule_is_the_heuristic_row_of_lowest_mean_and_never_the_policy():
    means = quality.heuristic_means(
        summary(
            [
                ("ddppo", "easy", "request", 5.0),
                ("fcfs", "easy", "request", 30.0),
                ("sjf", "easy", "predicted", 12.5),
                ("sjf", "conservative", "predicted", 12.0),
                ("f1", "easy", "request", 40.0),
            ]
        )
    )
    assert means == {
        ("fcfs", "easy", "request"): 30.0,
        ("sjf", "easy", "predicted"): 12.5,
        ("sjf", "conservative", "predicted"): 12.0,
        ("f1", "easy", "request"): 40.0,
    }
    assert quality.best_heuristic(means) == ("sjf", "conservative", "predicted")


def test_the_one_rule_can_be_the_lowest_of_no_set():
    # a is best on the first set and 3x the best on the second; c the reverse; b is 1.1x the
    # best on both: geometric means sqrt(3) = 1.73, 1.1 and 1.73.
    sets = [{"a": 1.0, "b": 1.1, "c": 3.0}, {"a": 30.0, "b": 11.0, "c": 10.0}]
    assert [quality.best_heuristic(s) for s in sets] == ["a", "c"]
    scores = quality.rule_scores(sets)
    assert scores == pytest.approx({"a": 3**0.5, "b": 1.1, "c": 3**0.5})
    assert quality.best_heuristic(scores) == "b"


def test_the_one_rule_is_the_geometric_mean_of_ratios_not_of_means_or_their_sum():
    # ratios to each set's lowest: a (1, 3.2), b (1.9, 1.9), c (4, 1); geometric means 1.79,
    # 1.9, 2: a. The arithmetic mean of the ratios (2.1, 1.9, 2.5) and the sum of the means
    # (4.2, 3.8, 5) would both choose b.
    sets = [{"a": 1.0, "b": 1.9, "c": 4.0}, {"a": 3.2, "b": 1.9, "c": 1.0}]
    scores = quality.rule_scores(sets)
    assert scores == pytest.approx({"a": 3.2**0.5, "b": 1.9, "c": 2.0})
    assert quality.best_heuristic(scores) == "a"


@pytest.fixture
def traces(tmp_path):
    """A folder with one small SWF trace named like the HPC2N excerpt (load factor 0.7)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    write_swf(generate(600, machine_procs=16, seed=2), tmp_path / "t.swf")
    swf = gzip.compress((tmp_path / "t.swf").read_bytes())
    (folder / "HPC2N-2002-tiny.swf.gz").write_bytes(swf)
    return folder


def checkpoint(path: Path, split=(0.7, 0.1, 0.2), gpu_mode="off") -> Path:
    """An untrained checkpoint of the default policy, with `split` and `gpu_mode`."""
    config = TrainConfig().to_dict()
    config["data"]["split"] = list(split)
    config["gpu"]["mode"] = gpu_mode
    model = build_policy(TrainConfig().policy)
    state = {"config": config, "update": 0, "model": model.state_dict()}
    torch.save({**state, "optimizer": {}, "ranks": [{}, {}]}, path)
    return path


def test_every_load_writes_a_results_file_that_analyze_reads(traces, tmp_path, capsys):
    out, readme = tmp_path / "out", tmp_path / "README.md"
    readme.write_text(f"# x\n{quality.BEGIN}\nold\n{quality.END}\nafter\n")
    argv = ["--traces", str(traces), "--windows", "2", "--jobs", "50", "--out", str(out)]
    argv += ["--checkpoint", str(checkpoint(tmp_path / "c.pt")), "--readme", str(readme)]
    assert quality.main(argv) == 0
    for load, factor in (("native", 1.0), ("x0.7", 0.7)):
        results = read_results(out / f"HPC2N-{load}.h5")
        spec = json.loads(results.attrs["window_spec"])
        assert spec == {"kind": "consecutive", "windows": 2, "jobs": 50, "start": 480} | {
            "load_factor": factor
        }
        assert json.loads(results.attrs["split"])["first_job"] == 480
        assert len(results.summary["policy"]) == 26  # 24 heuristic rows and the policy's 2
        assert "Scored:" in report(results, {})
        validation = read_results(out / f"HPC2N-{load}-validation.h5")
        spec = json.loads(validation.attrs["window_spec"])
        assert spec == {"kind": "consecutive", "windows": 2, "jobs": 50, "start": 420} | {
            "load_factor": factor
        }
        assert json.loads(validation.attrs["split"])["part"] == "validation"
        assert len(validation.summary["policy"]) == 24 and "Scored:" in report(validation, {})
    shown = capsys.readouterr().out
    assert "Summary:" in shown and shown.count("/ best heuristic") == 4
    assert shown.count("/ validation rule") == 4 and shown.count("/ one rule") == 4
    text = readme.read_text()
    assert "old" not in text and text.endswith(f"{quality.END}\nafter\n")
    assert "| HPC2N | native |" in text and "Policies:" in text
    assert "validation rule" in text.split("Policies:")[1]
    rows = readme_rows(text)
    assert [(row["load"], row["policy backfill"]) for row in rows] == [
        ("native", "easy"),
        ("x0.7", "easy"),
    ]
    validated = {load: validation_means(out, load) for load in ("native", "x0.7")}
    one = quality.best_heuristic(quality.rule_scores(list(validated.values())))
    for row in rows:
        rule = quality.best_heuristic(validated[row["load"]])
        assert row["validation rule"] == quality.rule_label(rule)
        assert row["vs validation rule"] == ratio_cell(out, row["load"], rule)
        assert row["one rule"] == quality.rule_label(one)
        assert row["vs one rule"] == ratio_cell(out, row["load"], one)
        mine, best = summary_means(out, row["load"])
        assert row["wait ratio"] == f"{mine['avg_wait'] / best['avg_wait']:.2f}"
        points = 100 * (mine["utilization"] - best["utilization"])
        assert row["utilization points"] == f"{points:+.1f}"


def summary_means(out: Path, load: str) -> tuple[dict, dict]:
    """The policy's (easy) and the best heuristic's mean avg wait and utilization, from the
    results file's summary."""
    summary = read_results(out / f"HPC2N-{load}.h5").summary
    best = quality.best_heuristic(quality.heuristic_means(summary))
    keys = [
        tuple(map(str, k)) for k in zip(*(summary[n] for n in ("policy", "backfill", "estimate")))
    ]
    rows = [keys.index(("ddppo", "easy", "request")), keys.index(best)]
    return tuple(
        {m: float(summary[f"{m}_mean"][i]) for m in ("avg_wait", "utilization")} for i in rows
    )


def readme_rows(text: str) -> list[dict]:
    """The quality table's rows, as {column: cell}."""
    lines = [line.strip("|").split(" | ") for line in text.splitlines() if line.startswith("| ")]
    head = [cell.strip() for cell in lines[0]]
    return [dict(zip(head, (cell.strip() for cell in line))) for line in lines[1:]]


def validation_means(out: Path, load: str) -> dict:
    return quality.heuristic_means(read_results(out / f"HPC2N-{load}-validation.h5").summary)


def ratio_cell(out: Path, load: str, rule: tuple) -> str:
    """The policy's (easy) ratio to `rule` on the test windows, as the table writes it."""
    results = read_results(out / f"HPC2N-{load}.h5")
    mine = quality.window_values(results, ("ddppo", "easy", "request"))
    ratio, low, high = quality.paired_ratio(mine, quality.window_values(results, rule))
    return f"{ratio:.3f} [{low:.3f}, {high:.3f}]"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: ["--traces", str(tmp / "none")], "no such trace folder"),
        (lambda tmp: ["--checkpoint", str(tmp / "absent.pt")], "no checkpoint"),
        (
            lambda tmp: ["--checkpoint", str(checkpoint(tmp / "g.pt", gpu_mode="placement"))],
            "trained in GPU mode",
        ),
        (
            lambda tmp: ["--checkpoint", str(checkpoint(tmp / "s.pt", split=(0.8, 0.2, 0.0)))],
            "nothing to score in the test part",
        ),
        (
            lambda tmp: ["--checkpoint", str(checkpoint(tmp / "v.pt", split=(0.8, 0.0, 0.2)))],
            "nothing to score in the validation part",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(make, message, traces, tmp_path, capsys):
    argv = ["--traces", str(traces), "--out", str(tmp_path / "out"), *make(tmp_path)]
    assert quality.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
