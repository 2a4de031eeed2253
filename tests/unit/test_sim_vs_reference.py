"""The C++ simulator against the hand-computed cases and the pure-Python reference."""

import pytest
from cases import CASES
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_sim import BACKFILLS, ESTIMATES, POLICIES, Job, metrics, simulate
from simhelpers import trace_of

from ddppo_hpc.sim import simulate as simulate_cpp


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_cpp_matches_hand_computed_case(case):
    jobs = [Job(*row) for row in case["jobs"]]
    trace = trace_of(jobs, case["machine_procs"])
    result = simulate_cpp(
        trace, case["policy"], case["backfill"], estimate=case.get("estimate", "request")
    )
    got = dict(zip(trace.id.tolist(), result.start_time.tolist()))
    assert got == case["expected_start"]


@st.composite
def workloads(draw):
    """Up to 40 jobs of up to 5 users (and unknown ones, -1), under light or heavy load: with
    heavy load most jobs arrive together and queues are long."""
    machine = draw(st.integers(1, 16))
    n = draw(st.integers(1, 40))
    gaps = draw(st.sampled_from([[0, 0, 1, 2, 5, 10, 30], [0, 0, 0, 0, 1, 2]]))
    users = draw(st.integers(1, 5))
    jobs, submit = [], 0
    for i in range(n):
        submit += draw(st.sampled_from(gaps))
        runtime = draw(st.sampled_from([0, 1, 3, 5, 10, 20, 50, 100]))
        requested = draw(st.sampled_from([runtime, runtime, 0, 1, 7, 15, 60, 200]))
        requested = requested if requested > 0 else runtime
        procs = draw(st.integers(1, machine))
        user = draw(st.integers(-1, users - 1))
        jobs.append(Job(i + 1, float(submit), float(runtime), procs, float(requested), user))
    return jobs, machine


@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize("backfill", BACKFILLS)
@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=60, deadline=None)
@given(workload=workloads())
def test_cpp_equals_reference_on_random_workloads(policy, backfill, estimate, workload):
    jobs, machine = workload
    trace = trace_of(jobs, machine)
    result = simulate_cpp(trace, policy, backfill, estimate=estimate)
    expected = simulate(jobs, machine, policy, backfill, estimate=estimate)
    assert dict(zip(trace.id.tolist(), result.start_time.tolist())) == expected
    ref = metrics(jobs, expected, machine)
    for key, value in ref.items():
        assert result.metrics[key] == value, key


@settings(max_examples=40, deadline=None)
@given(workload=workloads(), data=st.data())
def test_windows_equal_reference_on_the_sliced_jobs(workload, data):
    jobs, machine = workload
    trace = trace_of(jobs, machine)
    start = data.draw(st.integers(0, len(jobs) - 1))
    count = data.draw(st.integers(1, len(jobs)))
    result = simulate_cpp(trace, "fcfs", "easy", start=start, jobs=count)
    window = sorted(jobs, key=lambda j: (j.submit, j.id))[start : start + count]
    expected = simulate(window, machine, "fcfs", "easy")
    assert dict(zip(trace.id[start : start + count].tolist(), result.start_time.tolist())) == (
        expected
    )
