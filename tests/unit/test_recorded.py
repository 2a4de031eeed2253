"""The recorded schedule (start = submit + SWF field 3): `sim.recorded`, `has_recorded`, the
metrics from start times, `--policy recorded`, and the recorded wait through the store."""

import csv
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_sim import BACKFILLS, POLICIES, metrics
from simhelpers import trace_of, traces_dir
from test_cli import run
from test_sim_vs_reference import workloads

from ddppo_hpc.data import convert, read_swf
from ddppo_hpc.data.manifest import CORE_COLUMNS
from ddppo_hpc.data.store import TraceStore
from ddppo_hpc.data.swf import parse_swf
from ddppo_hpc.data.synthetic import generate
from ddppo_hpc.data.trace import TraceError
from ddppo_hpc.data.writer import StoreWriter
from ddppo_hpc.sim import has_recorded, recorded, schedule_metrics, simulate

# id, submit, wait (field 3), runtime, procs, user on 4 procs: 1 runs 0..100, 3 runs
# 25..45 beside it, 2 (all 4 procs) 100..105 after 1.
HAND = [(1, 0, 0, 100, 2, 1), (2, 10, 90, 5, 4, 2), (3, 20, 5, 20, 2, 1)]


def swf(tmp_path, rows, name="t.swf"):
    path = tmp_path / name
    lines = [
        f"{i} {s} {w} {r} {p} -1 -1 {p} {r} -1 1 {u} 1 -1 1 -1 -1 -1" for i, s, w, r, p, u in rows
    ]
    path.write_text("; MaxProcs: 4\n" + "\n".join(lines) + "\n")
    return path


def test_hand_case_metrics(tmp_path):
    trace = read_swf(swf(tmp_path, HAND))
    assert trace.wait_time.tolist() == [0, 90, 5]
    result = recorded(trace)
    assert result.start_time.tolist() == [0, 100, 25]
    m = result.metrics
    # waits 0, 90, 5; bsld 100/100 = 1, 95/10 = 9.5, 25/20 = 1.25; user 1: jobs 1 and 3
    assert (m["jobs"], m["avg_wait"], m["max_wait"]) == (3, 95 / 3, 90)
    assert (m["avg_bsld"], m["max_bsld"]) == (11.75 / 3, 9.5)
    assert m["makespan"] == 105  # last end (job 2) - first submit
    assert m["utilization"] == (2 * 100 + 4 * 5 + 2 * 20) / (4 * 105)
    assert m["users"].tolist() == [1, 2]
    assert m["user_avg_wait"].tolist() == [2.5, 90]
    assert m["user_avg_bsld"].tolist() == [1.125, 9.5]
    assert m["jain_user_bsld"] == 10.625**2 / (2 * (1.125**2 + 9.5**2))


def test_window_and_argument_checks_are_simulates(tmp_path):
    trace = read_swf(swf(tmp_path, HAND))
    window = recorded(trace, start=1, jobs=5)  # clipped at the end
    assert (window.begin, window.end, window.start_time.tolist()) == (1, 3, [100, 25])
    assert window.metrics["makespan"] == 105 - 10  # the clock starts at job 1's submit
    for start, jobs in ((3, None), (-1, None), (0, 0)):
        with pytest.raises(ValueError) as cpp:
            simulate(trace, start=start, jobs=jobs)
        with pytest.raises(ValueError) as ours:
            recorded(trace, start=start, jobs=jobs)
        assert str(ours.value) == str(cpp.value)


def test_a_job_without_field_3_is_named_and_only_its_windows_refused(tmp_path):
    trace = read_swf(swf(tmp_path, [HAND[0], (7, 10, -1, 5, 4, 2), HAND[2]]))
    assert not has_recorded(trace, 0, 3) and not has_recorded(trace, 1, 2)
    assert has_recorded(trace, 0, 1) and has_recorded(trace, 2, 3)
    with pytest.raises(
        TraceError, match=r"t\.swf: no recorded schedule \(SWF field 3\) for job 7 "
    ):
        recorded(trace)
    assert recorded(trace, start=2).start_time.tolist() == [25]


def test_sources_without_a_recorded_schedule_read_as_minus_one():
    trace = generate(50, machine_procs=16)
    assert trace.wait_time.tolist() == [-1] * 50 and not has_recorded(trace)
    with pytest.raises(TraceError, match="not in this log"):
        recorded(trace, 10, 5)


def test_slice_carries_the_recorded_waits(tmp_path):
    trace = read_swf(swf(tmp_path, HAND))
    assert trace.slice(1, 3).wait_time.tolist() == [90, 5]


@pytest.mark.parametrize("backfill", BACKFILLS)
@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=40, deadline=None)
@given(workload=workloads())
def test_metrics_of_simulated_start_times_equal_the_cores(policy, backfill, workload):
    """Exact, not approximately: both add in job order and users in order of appearance."""
    jobs, machine = workload
    trace = trace_of(jobs, machine)
    result = simulate(trace, policy, backfill)
    ours = schedule_metrics(trace, 0, result.start_time)
    assert ours.keys() == result.metrics.keys()
    for key, value in result.metrics.items():
        assert np.array_equal(ours[key], value), key
        assert np.asarray(ours[key]).dtype == np.asarray(value).dtype, key


@settings(max_examples=100, deadline=None)
@given(workload=workloads(), data=st.data())
def test_recorded_equals_the_reference_metrics_of_submit_plus_wait(workload, data):
    jobs, machine = workload
    waits = data.draw(st.lists(st.sampled_from([-1.0, 0.0, 1.0, 7.5, 300.0]), min_size=len(jobs),
                               max_size=len(jobs)))  # fmt: skip
    trace = trace_of(jobs, machine)
    trace = type(trace)(**{**trace.__dict__, "wait_time": np.array(waits)})
    start = data.draw(st.integers(0, len(jobs) - 1))
    if not has_recorded(trace, start):
        with pytest.raises(TraceError, match="not in this log"):
            recorded(trace, start)
        return
    result = recorded(trace, start)
    window = sorted(jobs, key=lambda j: (j.submit, j.id))[start:]
    starts = {j.id: j.submit + w for j, w in zip(window, waits[start:])}
    assert result.start_time.tolist() == [starts[j.id] for j in window]
    for key, value in metrics(window, starts, machine).items():
        assert result.metrics[key] == value, key


def test_store_round_trip_keeps_the_recorded_waits(tmp_path):
    log = swf(tmp_path, [(4, 30, -1, 1, 1, 3), *HAND])
    convert.convert([log], tmp_path / "ds", partitions=2)
    store = TraceStore(tmp_path / "ds")
    assert store.manifest["columns"]["wait_time"] == "float64"
    direct, stored = read_swf(log), store.trace()
    assert stored.wait_time.tolist() == direct.wait_time.tolist() == [0, 90, 5, -1]
    assert store.trace(1, 2).wait_time.tolist() == [90, 5]
    assert recorded(stored, 0, 3).metrics["avg_bsld"] == recorded(direct, 0, 3).metrics["avg_bsld"]


def test_a_store_without_the_column_reads_as_minus_one(tmp_path):
    columns = {name: (1 + np.arange(6)).astype(dtype) for name, dtype in CORE_COLUMNS.items()}
    with StoreWriter(tmp_path / "ds", 6, 2, CORE_COLUMNS) as w:
        w.append(columns)
        w.finish(kind="synthetic", machine={"kind": "procs", "procs": 8})
    store = TraceStore(tmp_path / "ds")
    assert store.validate() == []
    assert store.trace().wait_time.tolist() == [-1] * 6
    assert not has_recorded(store.trace(2, 3))


def test_a_manifest_with_a_wrong_wait_dtype_is_refused(tmp_path):
    convert.convert([swf(tmp_path, HAND)], tmp_path / "ds")
    manifest = tmp_path / "ds" / "manifest.json"
    document = json.loads(manifest.read_text())
    document["columns"]["wait_time"] = "int64"
    manifest.write_text(json.dumps(document))
    with pytest.raises(TraceError, match="columns.wait_time is 'int64', expected 'float64'"):
        TraceStore(tmp_path / "ds")


def test_cli_recorded_json_table_and_per_job(tmp_path):
    log = swf(tmp_path, HAND)
    out = run("--trace", log, "--policy", "recorded", "--json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    assert (row["policy"], row["backfill"], row["estimate"]) == ("recorded", None, None)
    assert row["avg_wait"] == 95 / 3 and "not empty" in row["note"]
    out = run("--trace", log, "--policy", "recorded", "--start", 1, "--per-job", tmp_path / "j.csv")
    assert out.returncode == 0, out.stderr
    assert "reservations or down nodes" in out.stdout
    with open(tmp_path / "j.csv") as f:
        assert [(r["id"], r["wait"]) for r in csv.DictReader(f)] == [("2", "90.0"), ("3", "5.0")]
    out = run("--trace", log, "--policy", "recorded", "--protocol", "rlscheduler", "--json")
    assert json.loads(out.stdout)["windows"] == [11.75 / 3]


def test_cli_refuses_a_window_without_field_3_in_one_line(tmp_path):
    log = swf(tmp_path, [HAND[0], (7, 10, -1, 5, 4, 2), HAND[2]])
    out = run("--trace", log, "--policy", "recorded")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "no recorded schedule (SWF field 3) for job 7" in out.stderr
    assert "not in this log" in out.stderr
    assert run("--trace", log, "--policy", "recorded", "--start", 2).returncode == 0


@pytest.mark.parametrize("option", [("--backfill", "easy"), ("--estimate", "request")])
def test_cli_says_backfill_and_estimate_do_not_apply(tmp_path, option):
    out = run("--trace", swf(tmp_path, HAND), "--policy", "recorded", *option)
    assert out.returncode == 2
    assert "do not apply to --policy recorded" in out.stderr


def test_kth_first_window_equals_a_direct_computation_from_the_swf_columns():
    """Field 3 of KTH-SP2 as numpy computes it, within 1e-12: np.mean adds pairwise."""
    path = traces_dir() / "KTH-SP2-1996-2.1-cln.swf.gz"
    if not path.exists():
        pytest.skip(f"{path} is not here (set DDPPO_TRACES)")
    c = parse_swf(path).columns
    procs = np.maximum(c["allocated_procs"], c["requested_procs"])
    keep = np.flatnonzero((c["runtime"] >= 0) & (procs > 0))
    rows = keep[np.lexsort((c["id"][keep], c["submit"][keep]))][:1024]
    submit, wait, runtime, procs = (
        c["submit"][rows],
        c["wait_time"][rows],
        c["runtime"][rows],
        procs[rows],
    )
    bsld = np.maximum(1, (wait + runtime) / np.maximum(runtime, 10))
    makespan = np.max(submit + wait + runtime) - submit[0]
    per_user = [bsld[c["user"][rows] == u].mean() for u in np.unique(c["user"][rows])]
    expected = {
        "avg_wait": wait.mean(),
        "max_wait": wait.max(),
        "avg_bsld": bsld.mean(),
        "max_bsld": bsld.max(),
        "makespan": makespan,
        "utilization": np.sum(procs * runtime) / (100 * makespan),
        "jain_user_bsld": np.sum(per_user) ** 2 / (len(per_user) * np.sum(np.square(per_user))),
    }
    got = recorded(read_swf(path), 0, 1024).metrics
    assert got["jobs"] == 1024
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12), key
