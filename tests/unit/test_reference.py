"""Tests of the pure-Python reference simulator (tests/reference_sim.py)."""

import pytest
from cases import CASES
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_sim import BACKFILLS, ESTIMATES, POLICIES, Job, metrics, score, simulate

COMBOS = [(p, b) for p in POLICIES for b in BACKFILLS]


def _jobs(case):
    return [Job(*row) for row in case["jobs"]]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_hand_computed_case(case):
    estimate = case.get("estimate", "request")
    starts = simulate(
        _jobs(case), case["machine_procs"], case["policy"], case["backfill"], estimate=estimate
    )
    assert starts == case["expected_start"]


@pytest.mark.parametrize(
    "case", [c for c in CASES if c["policy"] != "fcfs"], ids=lambda c: c["name"]
)
def test_policy_cases_differ_from_fcfs(case):
    starts = simulate(_jobs(case), case["machine_procs"], "fcfs", case["backfill"])
    assert starts != case["expected_start"]


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.get("estimate") == "predicted"], ids=lambda c: c["name"]
)
def test_prediction_cases_differ_from_requests(case):
    starts = simulate(_jobs(case), case["machine_procs"], case["policy"], case["backfill"])
    assert starts != case["expected_start"]


def test_scores():
    job = Job(id=1, submit=2, runtime=10, procs=3, requested_time=40)
    assert score("fcfs", job, 10) == 2
    assert score("sjf", job, 10) == 40
    assert score("wfp3", job, 10) == pytest.approx(-0.024)
    assert score("unicep", job, 10) == pytest.approx(-8 / (1.584962500721156 * 40))
    assert score("f1", job, 10) == pytest.approx(3 * 1.6020599913279623 + 870 * 0.3010299956639812)
    tiny = Job(id=2, submit=0.5, runtime=0, procs=1, requested_time=0)
    assert score("fcfs", tiny, 5.5) == 0.1  # s below 1 taken as 0.1
    assert score("sjf", tiny, 5.5) == 0.1  # r below 1 taken as 0.1
    assert score("unicep", tiny, 5.5) == pytest.approx(-5 / (1e-15 * 0.1))
    assert score("f1", tiny, 5.5) == pytest.approx(-1 * 1 - 870)


def test_metrics():
    # workload_w_fcfs_none: waits 0 9 18 27 26; bsld 1 1.9 2.8 1.9 3.1; ends 10 20 30 60 35.
    case = CASES[0]
    users = [1, 1, 2, 2, 2]
    jobs = [Job(*row, user=u) for row, u in zip(case["jobs"], users)]
    m = metrics(jobs, case["expected_start"], case["machine_procs"])
    assert m["jobs"] == 5
    assert m["avg_wait"] == pytest.approx(16)
    assert m["max_wait"] == 27
    assert m["avg_bsld"] == pytest.approx(2.14)
    assert m["max_bsld"] == pytest.approx(3.1)
    assert m["makespan"] == 60
    assert m["utilization"] == pytest.approx(295 / 600)
    # user 1: 1.45, user 2: 2.6
    assert m["jain_user_bsld"] == pytest.approx(4.05**2 / (2 * (1.45**2 + 2.6**2)))


@st.composite
def workloads(draw, requests_cover_runtime=False):
    """(jobs, machine_procs): small random cleaned workloads, ordered by (submit, id)."""
    machine = draw(st.integers(1, 16))
    n = draw(st.integers(1, 40))
    submit, jobs = 0, []
    for i in range(n):
        submit += draw(st.sampled_from([0, 0, 0, 1, 2, 5, 13]))
        runtime = draw(st.sampled_from([0, 1, 3, 5, 10, 20, 40]))
        if requests_cover_runtime:
            request = runtime + draw(st.sampled_from([0, 0, 1, 7, 30]))
        else:
            request = draw(st.one_of(st.just(runtime), st.integers(1, 50)))
        procs = draw(st.integers(1, machine))
        jobs.append(Job(i + 1, submit, runtime, procs, request, user=draw(st.integers(0, 3))))
    return jobs, machine


def _check_basic_invariants(jobs, machine, starts):
    assert set(starts) == {j.id for j in jobs}
    for j in jobs:
        assert starts[j.id] >= j.submit
    for j in jobs:  # usage only rises at start instants: check there, counting [start, end)
        t = starts[j.id]
        assert sum(k.procs for k in jobs if starts[k.id] <= t < starts[k.id] + k.runtime) <= machine
        # A runtime-0 job holds its procs for its start instant; jobs started at that same
        # instant may come after it, so only count those started before.
        earlier = sum(k.procs for k in jobs if starts[k.id] < t < starts[k.id] + k.runtime)
        assert j.runtime > 0 or earlier + j.procs <= machine


@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize(("policy", "backfill"), COMBOS)
@settings(max_examples=60, deadline=None)
@given(workloads())
def test_random_workload_invariants(policy, backfill, estimate, workload):
    jobs, machine = workload
    starts = simulate(jobs, machine, policy, backfill, estimate=estimate)
    _check_basic_invariants(jobs, machine, starts)
    metrics(jobs, starts, machine)


@settings(max_examples=200, deadline=None)
@given(workloads())
def test_fcfs_none_starts_in_queue_order(workload):
    jobs, machine = workload
    starts = simulate(jobs, machine, "fcfs", "none")
    times = [starts[j.id] for j in jobs]
    assert times == sorted(times)


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=100, deadline=None)
@given(workloads(requests_cover_runtime=True))
def test_easy_head_starts_by_its_commit_shadow_time(policy, workload):
    # With requests >= runtimes, EASY's reservation of the committed job is never broken.
    jobs, machine = workload
    commit_shadow = {}
    starts = simulate(
        jobs,
        machine,
        policy,
        "easy",
        on_shadow=lambda t, head, s: commit_shadow.setdefault(head, s),
    )
    _check_basic_invariants(jobs, machine, starts)
    for head, shadow in commit_shadow.items():
        assert starts[head] <= shadow
