"""`python -m ddppo_hpc.sim`: JSON output, windows, the protocol, per-job CSV, bad input."""

import csv
import json
import os
import subprocess
import sys

import pytest


def swf(tmp_path, lines, header="; MaxProcs: 4\n"):
    path = tmp_path / "t.swf"
    rows = [
        f"{i} {s} -1 {r} {p} -1 -1 -1 {q} -1 1 {u} 1 -1 -1 -1 -1 -1" for i, s, r, p, q, u in lines
    ]
    path.write_text(header + "\n".join(rows) + "\n")
    return path


# id, submit, runtime, procs, requested, user: FCFS+EASY on 4 procs starts 1@0, 2@10, 3@0
# (3 ends at 5 <= shadow 10), and 4@20 (it waits for 2).
JOBS = [(1, 0, 10, 3, 10, 1), (2, 1, 10, 4, 10, 2), (3, 2, 3, 1, 3, 1), (4, 2, 5, 2, 5, 7)]


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.sim", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_json_has_the_documented_keys_and_values(tmp_path):
    out = run("--trace", swf(tmp_path, JOBS), "--policy", "fcfs", "--backfill", "easy", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["jobs"] == 4
    assert result["dropped"] == {"negative_runtime": 0, "no_procs": 0, "too_large": 0}
    waits = [0, 9, 0, 18]
    assert result["avg_wait"] == sum(waits) / 4
    assert result["max_wait"] == 18
    assert result["makespan"] == 25
    assert result["utilization"] == (30 + 40 + 3 + 10) / (4 * 25)
    bslds = [1, 19 / 10, 1, 23 / 10]
    assert result["avg_bsld"] == pytest.approx(sum(bslds) / 4, abs=0)
    assert result["max_bsld"] == 2.3
    users = [(1 + 1) / 2, 1.9, 2.3]
    jain = sum(users) ** 2 / (3 * sum(x * x for x in users))
    assert result["jain_user_bsld"] == pytest.approx(jain, rel=1e-15)


def test_window_and_per_job_csv(tmp_path):
    per_job = tmp_path / "jobs.csv"
    out = run("--trace", swf(tmp_path, JOBS), "--start", 1, "--jobs", 2, "--json",
              "--per-job", per_job)  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(per_job.open()))
    assert [(r["id"], r["start"], r["wait"]) for r in rows] == [("2", "1.0", "0.0"),
                                                                ("3", "11.0", "9.0")]  # fmt: skip
    assert json.loads(out.stdout)["jobs"] == 2


def test_protocol_reports_each_window(tmp_path):
    jobs = [(i + 1, 10 * i, 5, 1 + i % 4, 5, 1) for i in range(2100)]
    out = run("--trace", swf(tmp_path, jobs), "--protocol", "rlscheduler", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["jobs"] == 2100  # windows of 1024, 1024 and the last 52
    assert result["windows"] == [1.0, 1.0, 1.0]
    assert result["mean_avg_bsld"] == 1.0


def test_all_policies_and_backfills_print_a_table(tmp_path):
    out = run("--trace", swf(tmp_path, JOBS), "--policy", "all", "--backfill", "all")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip().splitlines()) == 2 + 6 * 3


def test_estimate_all_runs_requests_and_predictions(tmp_path):
    # easy_backfills_on_a_short_prediction (tests/cases.py): J4 starts at 5 with predictions,
    # at 30 with requests.
    jobs = [(1, 0, 4, 1, 100, 1), (2, 0, 20, 6, 20, 2), (3, 1, 10, 8, 10, 3), (4, 5, 3, 4, 30, 1)]
    trace = swf(tmp_path, jobs, header="; MaxProcs: 10\n")
    out = run("--trace", trace, "--policy", "fcfs", "--estimate", "all", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(r["estimate"], r["max_wait"]) for r in rows] == [("request", 25), ("predicted", 19)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace", "absent.swf"], "absent.swf: no such file"),
        (["--policy", "lottery"], "invalid choice: 'lottery'"),
        (["--procs", "0"], "argument --procs: 0 is outside 1..2147483647"),
        (["--start", "9"], "--start 9 is outside the trace's 4 jobs"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    if "--trace" not in args:
        args = ["--trace", swf(tmp_path, JOBS), *args]
    out = run(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_malformed_line_names_file_and_line(tmp_path):
    path = swf(tmp_path, JOBS)
    path.write_text(path.read_text() + "5 30 -1 x 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
    out = run("--trace", path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"python -m ddppo_hpc.sim: error: {path}:6: field 4 (run time) is not a number: 'x'"
    ]


def test_machine_smaller_than_every_job(tmp_path):
    out = run("--trace", swf(tmp_path, [(1, 0, 5, 2, 5, 1), (2, 0, 5, 3, 5, 1)]), "--procs", 1)
    assert out.returncode == 2
    assert "2 larger than the machine (1 procs; the smallest needs 2)" in out.stderr


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    # `sim ... | head -1`: the reader has closed the pipe when the table is printed.
    r, w = os.pipe()
    os.close(r)
    out = subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.sim", "--trace", str(swf(tmp_path, JOBS)),
         "--policy", "all", "--backfill", "all"],
        stdout=w, stderr=subprocess.PIPE, text=True, timeout=120,
    )  # fmt: skip
    os.close(w)
    assert out.returncode == 141 and out.stderr == ""
