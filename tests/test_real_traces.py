"""The real logs of ../shared/traces parse with the documented job and drop counts."""

import pytest
from reference_sim import metrics, simulate
from simhelpers import jobs_of, trace_of, traces_dir

from ddppo_hpc.data import convert, read_swf
from ddppo_hpc.data.store import TraceStore
from ddppo_hpc.sim import BACKFILLS, POLICIES
from ddppo_hpc.sim import simulate as simulate_cpp

# file: (job lines, machine procs, kept jobs, drops by reason)
EXPECTED = {
    "lublin_256.swf.gz": (10_000, 256, 10_000, (0, 0, 0)),
    "KTH-SP2-1996-2.1-cln.swf.gz": (28_476, 100, 28_475, (0, 1, 0)),
    "LANL-CM5-1994-4.1-cln.swf.gz": (122_060, 1024, 122_057, (0, 3, 0)),
    "HPC2N-2002-excerpt-3170.swf.gz": (3_170, 240, 3_145, (25, 0, 0)),
}


def load(name):
    path = traces_dir() / name
    if not path.exists():
        pytest.skip(f"{path} is not here (set DDPPO_TRACES)")
    return read_swf(path)


@pytest.mark.parametrize("name", EXPECTED)
def test_trace_parses_with_documented_counts(name):
    lines, machine, kept, drops = EXPECTED[name]
    trace = load(name)
    assert len(trace) + sum(trace.dropped.values()) == lines
    assert trace.machine_procs == machine
    assert len(trace) == kept
    assert tuple(trace.dropped.values()) == drops
    assert (trace.procs >= 1).all() and (trace.procs <= machine).all()
    assert (trace.requested_time >= 0).all()


@pytest.mark.parametrize("backfill", BACKFILLS)
@pytest.mark.parametrize("policy", POLICIES)
def test_cpp_equals_reference_on_a_real_window(policy, backfill):
    """300 jobs of HPC2N: real sizes, real estimates, ids with gaps."""
    trace = load("HPC2N-2002-excerpt-3170.swf.gz")
    begin, end = 1000, 1300
    jobs = jobs_of(trace, begin, end)
    result = simulate_cpp(trace, policy, backfill, start=begin, jobs=end - begin)
    expected = simulate(jobs, trace.machine_procs, policy, backfill)
    assert dict(zip(trace.id[begin:end].tolist(), result.start_time.tolist())) == expected
    ref = metrics(jobs, expected, trace.machine_procs)
    assert all(result.metrics[k] == v for k, v in ref.items())


@pytest.mark.parametrize(
    ("policy", "backfill"), [("sjbf", "easy"), ("fcfs", "conservative"), ("sjbf", "conservative")]
)
def test_predicted_estimates_equal_reference_on_kth_windows(policy, backfill):
    """EASY++ predictions on KTH-SP2 (214 users with real histories and requests): three
    windows of 1000 jobs, job by job; the predictions change the schedules."""
    trace = load("KTH-SP2-1996-2.1-cln.swf.gz")
    for begin in (0, 10_000, 20_000):
        jobs = jobs_of(trace, begin, begin + 1000)
        result = simulate_cpp(trace, policy, backfill, begin, 1000, estimate="predicted")
        expected = simulate(jobs, trace.machine_procs, policy, backfill, estimate="predicted")
        assert dict(zip(trace.id[begin : begin + 1000].tolist(), result.start_time.tolist())) == (
            expected
        )
        requests = simulate_cpp(trace, policy, backfill, begin, 1000)
        assert result.start_time.tolist() != requests.start_time.tolist()


def test_window_clock_starts_at_first_job_and_is_independent_of_earlier_jobs():
    trace = load("lublin_256.swf.gz")
    jobs = jobs_of(trace, 500, 600)
    window = simulate_cpp(trace, "sjf", "easy", start=500, jobs=100)
    alone = simulate_cpp(trace_of(jobs, 256), "sjf", "easy")
    assert window.start_time.tolist() == alone.start_time.tolist()
    assert window.start_time.min() >= trace.submit[500]


@pytest.mark.parametrize("name", ["KTH-SP2-1996-2.1-cln.swf.gz", "HPC2N-2002-excerpt-3170.swf.gz"])
def test_store_round_trip_gives_the_same_metrics(name, tmp_path):
    trace = load(name)
    manifest = convert.convert([traces_dir() / name], tmp_path / "ds", partitions=3)
    assert manifest["jobs"] == len(trace)
    assert {k: manifest["dropped"][k] for k in trace.dropped} == trace.dropped
    stored = TraceStore(tmp_path / "ds").trace()
    assert TraceStore(tmp_path / "ds").validate() == []
    for policy, backfill in (("fcfs", "easy"), ("sjf", "conservative")):
        direct, again = (
            simulate_cpp(trace, policy, backfill),
            simulate_cpp(stored, policy, backfill),
        )
        assert direct.metrics["avg_bsld"] == again.metrics["avg_bsld"]
        assert direct.start_time.tolist() == again.start_time.tolist()


@pytest.mark.parametrize(
    ("files", "jobs", "gpus"),
    [
        (["philly-2017-jobs.csv.gz"], 82_247, 128),
        (["alibaba-gpu-v2023-pods.csv.gz", "alibaba-gpu-v2023-gpu-nodes.csv.gz"], 6_203, 6_212),
    ],
)
def test_gpu_traces_convert_into_the_store(files, jobs, gpus, tmp_path):
    paths = [traces_dir() / f for f in files]
    if not all(p.exists() for p in paths):
        pytest.skip("GPU traces are not here")
    manifest = convert.convert(paths, tmp_path / "ds", partitions=2)
    store = TraceStore(tmp_path / "ds")
    assert len(store) == jobs and store.machine_procs == gpus
    window = store.trace(0, 2000)
    assert simulate_cpp(window, "fcfs", "easy").metrics["jobs"] == 2000
    assert manifest["machine"]["gpus"] == gpus
