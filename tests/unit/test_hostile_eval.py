"""Hostile input to evaluate, analyze and the GPU simulator's command line (issue 14): one
line that names the file, key or option, exit code 2, and nothing written (or the old
outputs kept), checked before any long work starts."""

import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from ddppo_hpc import analyze, evaluate
from ddppo_hpc.gpu import cli as gpu_cli
from ddppo_hpc.results import read_results

# A heuristics-only evaluation of a second on the embedded workload.
SMALL_EVALUATION = ["--policies", "fcfs", "--estimate", "request", "--windows", "2", "--jobs", "50"]
ANALYZE_OUTPUTS = ["results.md", "bsld_windows.png", "wait_cdf.png", "utilization.png"]
ANALYZE_OUTPUTS += ["user_bsld.png"]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("results") / "results.h5"
    assert evaluate.main([*SMALL_EVALUATION, "--out", str(path)]) == 0
    return path


def refusal(main, argv: list, capsys) -> str:
    """The error line of a command line that refuses its input with exit code 2: main's
    one line on stderr, or argparse's usage and one line while parsing."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
        lines = capsys.readouterr().err.strip().splitlines()
        usage = lines[:-1]  # "usage: prog ..." and its indented continuation lines
        assert usage[0].startswith("usage: ") and all(u.startswith(" ") for u in usage[1:])
    else:
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
    assert code == 2 and lines[-1].startswith("python -m ddppo_hpc."), lines
    assert ": error: " in lines[-1] and not any("Traceback" in line for line in lines)
    return lines[-1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--racks", "0"], "argument --racks: 0 is outside 1.."),
        (["--racks", "99999999999"], "argument --racks: 99999999999 is outside"),
        (["--racks", "65536", "--machines-per-rack", "65536"], "GPUs, more than"),
        (["--machines-per-rack", "-1"], "argument --machines-per-rack"),
        (["--gpus-per-machine", "2147483648"], "argument --gpus-per-machine"),
        (["--synthetic-jobs", "99999999999"], "argument --synthetic-jobs"),
        (["--load", "nan"], "argument --load: nan is outside"),
        (["--load", "inf"], "argument --load: inf is outside"),
        (["--load", "0"], "argument --load: 0 is outside"),
        (["--comm-penalty", "inf"], "argument --comm-penalty"),
        (["--comm-penalty", "-1"], "argument --comm-penalty"),
        (["--speed-noise", "inf"], "argument --speed-noise"),
        (["--speed-seed", "-1"], "argument --speed-seed"),
        (["--seed", "99999999999999999999999"], "argument --seed"),
        (["--start", "-1"], "argument --start"),
        (["--jobs", "0"], "argument --jobs"),
        (["--link-costs", "inf,inf,inf"], "argument --link-costs: inf is outside"),
        (["--link-costs", "1,2"], "argument --link-costs: three numbers"),
    ],
)
def test_gpu_numbers_are_refused_while_parsing(argv, message, capsys):
    assert message in refusal(gpu_cli.main, argv, capsys)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--windows", "2147483648", "--jobs", "10"], "argument --windows: 2147483648 is outside"),
        (["--windows", "0", "--jobs", "10"], "argument --windows: 0 is outside"),
        (["--windows", "2", "--jobs", "-3"], "argument --jobs: -3 is outside"),
        (["--windows", "2", "--jobs", "10", "--seed", "-1"], "argument --seed: -1 is outside"),
        (["--windows", "2", "--jobs", "10", "--seed", str(2**64)], "argument --seed"),
    ],
)
def test_evaluate_numbers_are_refused_while_parsing(argv, message, capsys):
    assert message in refusal(evaluate.main, argv, capsys)


def test_more_windows_than_jobs_is_refused(capsys):
    # The embedded workload holds 60,000 jobs; its test part 12,000.
    err = refusal(
        evaluate.main, ["--policies", "fcfs", "--windows", "12001", "--jobs", "5"], capsys
    )
    assert "--windows 12001" in err and "the test part's 12000 jobs" in err


def not_evaluated(*args):
    raise AssertionError("evaluated before the output was checked")


def unwritable_outputs(tmp_path, small_disk) -> dict[str, tuple[Path, str]]:
    """name -> (an --out that cannot be written, the reason expected)."""
    (tmp_path / "a-file").write_text("")
    read_only = small_disk(64)
    subprocess.run(["mount", "-o", "remount,ro", str(read_only)], check=True)
    return {
        "missing folder": (tmp_path / "missing" / "r.h5", "no such file or directory"),
        "under a file": (tmp_path / "a-file" / "r.h5", "not a directory"),
        "a directory": (tmp_path, "is a directory"),
        "read-only": (read_only / "r.h5", "read-only file system"),
    }


def test_evaluate_checks_its_output_before_evaluating(tmp_path, small_disk, monkeypatch, capsys):
    monkeypatch.setattr(evaluate, "run_rank", not_evaluated)
    for target, reason in unwritable_outputs(tmp_path, small_disk).values():
        err = refusal(evaluate.main, [*SMALL_EVALUATION, "--out", target], capsys)
        assert f"error: {target}: cannot write: {reason}" in err


def test_evaluate_does_not_write_over_its_trace(tmp_path, capsys):
    trace = tmp_path / "one-job.swf"
    trace.write_text("1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n")
    before = trace.read_bytes()
    argv = ["--trace", trace, "--full", "--policies", "fcfs", "--out", trace]
    err = refusal(evaluate.main, argv, capsys)
    assert f"error: {trace}: would replace {trace}, an input" in err
    assert trace.read_bytes() == before


def test_evaluate_on_a_full_disk_keeps_the_old_results(results, small_disk):
    disk = small_disk(100)
    target = disk / "results.h5"
    target.write_bytes(results.read_bytes())  # about 45 KiB; the new file needs more
    out = subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.evaluate", "--policies", "fcfs,sjf",
         "--backfill", "none,easy", "--out", str(target)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-2000:]  # a segfault is -11
    assert out.stderr.splitlines() == [
        f"python -m ddppo_hpc.evaluate: error: {target}: cannot write: no space left on device"
    ]
    assert [p.name for p in disk.iterdir()] == ["results.h5"]  # no temp file left
    assert read_results(target).attrs == read_results(results).attrs


def test_analyze_on_a_full_disk_keeps_every_old_output(results, small_disk, capsys):
    out = small_disk(64)  # the new outputs take about 100 KiB
    for name in ANALYZE_OUTPUTS:
        (out / name).write_text("old")
    err = refusal(analyze.main, [results, "--out", out], capsys)
    assert "cannot write: no space left on device" in err and str(out) in err
    assert sorted(p.name for p in out.iterdir()) == sorted(ANALYZE_OUTPUTS)
    assert all((out / name).read_text() == "old" for name in ANALYZE_OUTPUTS)


def damaged_copy(results: Path, where: Path, damage) -> Path:
    copy = where / "damaged.h5"
    copy.write_bytes(results.read_bytes())
    with h5py.File(copy, "a") as f:
        damage(f)
    return copy


def shorten(f: h5py.File, name: str) -> None:
    values = f[name][...]
    del f[name]
    f[name] = values[:-1]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: f.__delitem__("summary/avg_bsld_mean"), "no summary/avg_bsld_mean"),
        (lambda f: f.__delitem__("windows"), "no windows"),
        (lambda f: f.__delitem__("jobs/wait"), "no jobs/wait"),
        (lambda f: f.attrs.__delitem__("window_spec"), "no attribute window_spec"),
        (lambda f: shorten(f, "jobs/bsld"), "jobs/bsld has 99 rows, jobs/policy 100"),
        (lambda f: f.attrs.__setitem__("config", "{bad"), "attribute config is not JSON"),
    ],
)
def test_analyze_names_what_a_results_file_lacks(results, tmp_path, damage, message, capsys):
    damaged = damaged_copy(results, tmp_path, damage)
    err = refusal(analyze.main, [damaged, "--out", tmp_path / "out"], capsys)
    assert f"error: {damaged}: " in err and message in err
    assert not (tmp_path / "out").exists()


def bad_analyze_inputs(tmp_path: Path) -> dict[str, tuple[list, str]]:
    """name -> (analyze's options besides the results file, what the error must name)."""
    (tmp_path / "garbage.h5").write_text("not HDF5")
    with h5py.File(tmp_path / "no-bsld.h5", "w") as f:
        f["update"] = [1.0, 2.0]
    (tmp_path / "latin1.csv").write_bytes(b"scheduler,backfill,avg_bsld,source\nsj\xe9,,1,x\n")
    (tmp_path / "README.md").write_text("# no results-table block\n")
    (tmp_path / "a-file").write_text("")
    return {
        "metrics not HDF5": (["--metrics", tmp_path / "garbage.h5"], "garbage.h5: "),
        "metrics without bsld": (["--metrics", tmp_path / "no-bsld.h5"], "episode_bsld"),
        "published not UTF-8": (["--published", tmp_path / "latin1.csv"], "latin1.csv: "),
        "readme without markers": (["--readme", tmp_path / "README.md"], "README.md: no"),
        "readme missing": (["--readme", tmp_path / "absent.md"], "absent.md: "),
        "out is a file": (["--out", tmp_path / "a-file"], "a-file: cannot write"),
    }


def test_analyze_checks_every_input_before_writing(results, tmp_path, capsys):
    for options, message in bad_analyze_inputs(tmp_path).values():
        out = tmp_path / "out"
        argv = [results, "--out", out, *options] if "--out" not in options else [results, *options]
        err = refusal(analyze.main, argv, capsys)
        assert message in err and not out.exists(), err
