"""The C++ simulator against the pure-Python reference under heavy load: small machines, many
jobs arriving nearly together, so queues grow long and every backfill scan has many jobs to
pass over (the indexed scans of issue 17 must start exactly the jobs the plain scan does)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_sim import ESTIMATES, POLICIES, Job, simulate
from simhelpers import trace_of

from ddppo_hpc.sim import simulate as simulate_cpp


@st.composite
def heavy_workloads(
    draw, max_jobs: int, max_machine: int = 12, max_sizes: int = 4, many_requests: bool = False
):
    """Up to `max_jobs` jobs on 1 to `max_machine` procs, submitted at most 3 s apart (often
    together), with few distinct sizes (up to `max_sizes`) and requests so that many jobs tie
    on size, request and score; or, with `many_requests`, requests of 1 to 120 s."""
    machine = draw(st.integers(1, max_machine))
    n = draw(st.integers(max_jobs // 2, max_jobs))
    sizes = draw(st.lists(st.integers(1, machine), min_size=1, max_size=max_sizes))
    jobs, submit = [], 0
    for i in range(n):
        submit += draw(st.sampled_from([0, 0, 0, 0, 1, 3]))
        runtime = draw(st.sampled_from([0, 1, 2, 5, 10, 40, 100]))
        requested = draw(st.sampled_from([runtime, runtime, 0, 2, 10, 30, 300]))
        requested = requested if requested > 0 else runtime
        if many_requests:
            requested = draw(st.integers(1, 120))
        procs = draw(st.sampled_from(sizes))
        user = draw(st.integers(-1, 3))
        jobs.append(Job(i + 1, float(submit), float(runtime), procs, float(requested), user))
    return jobs, machine


def check(jobs, machine, policy, backfill, estimate):
    trace = trace_of(jobs, machine)
    result = simulate_cpp(trace, policy, backfill, estimate=estimate)
    expected = simulate(jobs, machine, policy, backfill, estimate=estimate)
    assert dict(zip(trace.id.tolist(), result.start_time.tolist())) == expected


@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize("backfill", ("none", "easy"))
@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=25, deadline=None)
@given(workload=heavy_workloads(max_jobs=160))
def test_long_queues_equal_reference(policy, backfill, estimate, workload):
    check(*workload, policy, backfill, estimate)


@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=15, deadline=None)
@given(workload=heavy_workloads(max_jobs=60))
def test_long_queues_equal_reference_conservative(policy, estimate, workload):
    """Fewer jobs: the reference re-plans every reservation at every scan."""
    check(*workload, policy, "conservative", estimate)


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=25, deadline=None)
@given(workload=heavy_workloads(max_jobs=160, max_machine=64, max_sizes=12))
def test_long_queues_of_many_sizes_equal_reference_easy(policy, workload):
    """More sizes than requests: an EASY scan finds the jobs that end by the shadow time
    among the requests as well as among the sizes (FCFS, SJF, F1), and the groups that may
    start by (procs, request) (WFP3, UNICEP, SJBF)."""
    check(*workload, policy, "easy", "request")


@pytest.mark.parametrize("policy", ("wfp3", "unicep", "sjbf"))
@settings(max_examples=25, deadline=None)
@given(workload=heavy_workloads(max_jobs=160, max_machine=16, max_sizes=3, many_requests=True))
def test_long_queues_of_many_requests_equal_reference_easy(policy, workload):
    """More requests than the groups' request buckets (16): an EASY scan by groups tests each
    group of the bucket where the shadow time falls, and takes the buckets before it whole."""
    check(*workload, policy, "easy", "request")


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=15, deadline=None)
@given(workload=heavy_workloads(max_jobs=80, max_machine=64, max_sizes=12))
def test_long_queues_of_many_sizes_equal_reference_conservative(policy, workload):
    """Many size classes and groups: a conservative scan finds the last job that can start
    now across all of them."""
    check(*workload, policy, "conservative", "request")


@pytest.mark.parametrize("backfill", ("easy", "conservative"))
@pytest.mark.parametrize("policy", ("fcfs", "sjf", "f1"))
@settings(max_examples=15, deadline=None)
@given(workload=heavy_workloads(max_jobs=80, max_machine=64, max_sizes=12), data=st.data())
def test_windows_of_long_queues_equal_reference(policy, backfill, workload, data):
    """A window from job K > 0: the rank index classifies the window's jobs alone (sizes by a
    table of their procs, requests by search), its classes listing ranks within the window."""
    jobs, machine = workload
    start = data.draw(st.integers(1, len(jobs) - 1))
    window = jobs[start:]
    result = simulate_cpp(trace_of(jobs, machine), policy, backfill, start=start)
    expected = simulate(window, machine, policy, backfill)
    assert dict(zip([j.id for j in window], result.start_time.tolist())) == expected


@st.composite
def queues_of_many_groups(draw):
    """200 to 400 jobs of random sizes and requests (1 to 1,000 s) on 1 to 4 procs, submitted
    at most 2 s apart from time 0 or 1e9: queues of hundreds of groups (of equal procs and
    request) whose keys cross as they wait."""
    machine = draw(st.integers(1, 4))
    submit = draw(st.sampled_from([0.0, 1e9]))
    jobs = []
    for i in range(draw(st.integers(200, 400))):
        submit += draw(st.sampled_from([0, 0, 1, 2]))
        runtime, request = draw(st.integers(0, 30)), draw(st.integers(1, 1000))
        jobs.append(Job(i + 1, submit, float(runtime), draw(st.integers(1, machine)), request, -1))
    return jobs, machine


@pytest.mark.parametrize("policy", ("wfp3", "unicep"))
@settings(max_examples=20, deadline=None)
@given(workload=queues_of_many_groups())
def test_picks_of_moving_keys_equal_reference_without_backfilling(policy, workload):
    """Without backfilling, WFP3's and UNICEP's picks come from a tournament of the groups'
    heads where more than 128 groups wait (src/head_tournament.hpp), which finds again only
    the nodes whose order may have changed."""
    check(*workload, policy, "none", "request")


@pytest.mark.parametrize("policy", ("wfp3", "unicep"))
def test_picks_follow_keys_that_cross(policy):
    """Job 1 fills the 8 procs until t = 100, when job 2 (runtime 0) and job 3 start and job 4
    (job 3's twin) is picked to wait until 130. Job 5 (request 40, waiting since 0) comes
    before job 6 (request 10, since 90) until their keys cross at t = 120 (WFP3: 2 / 40 t =
    2 / 10 (t - 90); UNICEP: t / 120 = (t - 90) / 30): the pick at 130 takes job 6. 140 jobs
    of long requests wait behind them, so that the picks come from the tournament of
    src/head_tournament.hpp, where the groups of jobs 5 and 6 are neighbours and no head beside
    them changed since t = 100, when they were compared."""
    rows = [(0, 8, 100, 100), (0, 1, 1, 0), (50, 8, 5, 30), (50, 8, 5, 30), (0, 8, 40, 10)]
    rows += [(90, 8, 10, 10)] + [(0, 8, 1e6 + k, 1) for k in range(140)]
    jobs = [
        Job(i + 1, float(submit), float(runtime), procs, float(request), 0)
        for i, (submit, procs, request, runtime) in enumerate(rows)
    ]
    trace = trace_of(jobs, 8)
    result = simulate_cpp(trace, policy, "none")
    starts = dict(zip(trace.id.tolist(), result.start_time.tolist()))
    assert {j: starts[j] for j in range(1, 7)} == {1: 0, 2: 100, 3: 100, 4: 130, 5: 170, 6: 160}
    assert starts == simulate(jobs, 8, policy, "none")
