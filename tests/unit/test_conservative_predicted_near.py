"""Conservative backfilling on EASY++ predictions plans only near now: the reservations that
would start at or after now + a third of the longest request, or run past the start of one left
out, stay out of the profile, and a scan that cannot tell from that plan whether a job starts is
planned again whole (issue 17: the best heuristic's teacher runs). A hand case for the bound,
and long queues with users' histories against the reference, which plans every reservation
at every scan."""

import pytest
from hypothesis import given, settings
from reference_sim import Job, simulate
from simhelpers import far_plans, trace_of

from ddppo_hpc.sim import simulate as simulate_cpp


def _starts(jobs, machine, policy):
    trace = trace_of(jobs, machine)
    result = simulate_cpp(trace, policy, "conservative", estimate="predicted")
    return dict(zip(trace.id.tolist(), result.start_time.tolist()))


@pytest.mark.parametrize("policy", ("fcfs", "sjf", "f1", "wfp3", "unicep", "sjbf"))
def test_a_start_that_runs_past_a_reservation_left_out_waits_for_the_whole_plan(policy):
    # 10 procs, one user per job and no job ends before 100, so every prediction is the
    # request. Job 1 (6 procs) runs to 100; job 2 (5 procs) is committed on [100, 150); job 3
    # (7 procs) is reserved on [150, 200). Job 4 (4 procs, 200 s, the longest request: the
    # plan near now reaches 66.7 s past now) arrives at 3: job 3's start, 150, is past 69.7,
    # so it is left out, and job 4 fits now in the profile without it, but its run crosses
    # 150, where job 3 leaves 3 procs: the whole plan keeps it waiting until job 3 ends, at
    # 200, and starts job 5 (1 proc, 10 s), after it under FCFS, now.
    jobs = [
        Job(1, 0.0, 100.0, 6, 100.0, 1),
        Job(2, 1.0, 50.0, 5, 50.0, 2),
        Job(3, 2.0, 50.0, 7, 50.0, 3),
        Job(4, 3.0, 200.0, 4, 200.0, 4),
        Job(5, 3.0, 10.0, 1, 10.0, 5),
    ]
    expected = simulate(jobs, 10, policy, "conservative", estimate="predicted")
    if policy == "fcfs":
        assert expected == {1: 0.0, 2: 100.0, 3: 150.0, 4: 200.0, 5: 3.0}
    assert _starts(jobs, 10, policy) == expected


@pytest.mark.parametrize("policy", ("fcfs", "sjf"))
def test_a_size_class_passed_over_whole_bounds_the_plan_near_now(policy):
    # 10 procs, one user per job, every runtime its request: predictions are requests. Job 1
    # (6 procs) runs to 100; job 2 (6 procs, 1 s) is committed on [100, 101); jobs 3-53 (7
    # procs, 100 s each) are reserved one after another from 101 to 5201. Job 54 (4 procs,
    # 150 s, the longest request: the plan near now reaches 50 s past now) arrives at 3 and
    # fits now beside jobs 1 and 2, but its run crosses 101, where job 3 leaves 3 procs. The
    # queue (52 jobs on 3 sizes) is long enough for the plan by size classes (FCFS's and, on
    # predictions, SJF's), which passes over the class of 7 procs whole (none of its jobs can
    # start before 100): that must bring the plan's bound down to 101 and send the scan to the
    # whole plan, where job 54 waits until 5201.
    jobs = [Job(1, 0.0, 100.0, 6, 100.0, 1), Job(2, 1.0, 1.0, 6, 1.0, 2)]
    jobs += [Job(k, 1.0, 100.0, 7, 100.0, k) for k in range(3, 54)]
    jobs.append(Job(54, 3.0, 150.0, 4, 150.0, 54))
    expected = simulate(jobs, 10, policy, "conservative", estimate="predicted")
    assert expected[54] == 5201.0
    assert _starts(jobs, 10, policy) == expected


@pytest.mark.parametrize("policy", ("fcfs", "sjf", "f1"))
def test_a_job_of_infinite_request_waits_for_its_users_mean(policy):
    # 4 procs. Jobs 1 (user 1) and 2 (user 3) take 2 procs each from 0, to 10 and 100; job 3
    # (4 procs) is committed at 100. Job 4 (user 1, 2 procs, an infinite request) is predicted
    # at its request until job 1 ends at 10; then at user 1's mean, 10 s: it fits before 100
    # and starts at 10. The index of waiting jobs by size (FCFS, SJF and F1 on at most 16
    # sizes) holds the predictions: an infinite one is no prediction there, so only the list
    # of user 1's jobs, which user 1's new mean walks, still knows job 4 waits.
    inf = float("inf")
    jobs = [
        Job(1, 0.0, 10.0, 2, 10.0, 1),
        Job(2, 0.0, 100.0, 2, 100.0, 3),
        Job(3, 1.0, 50.0, 4, 50.0, 2),
        Job(4, 2.0, 5.0, 2, inf, 1),
    ]
    expected = simulate(jobs, 4, policy, "conservative", estimate="predicted")
    assert expected == {1: 0.0, 2: 0.0, 3: 100.0, 4: 10.0}
    assert _starts(jobs, 4, policy) == expected


@pytest.mark.parametrize("policy", ("fcfs", "sjf", "f1", "wfp3", "unicep", "sjbf"))
@settings(max_examples=30, deadline=None)
@given(workload=far_plans(max_jobs=70, users=3))
def test_plans_near_now_start_what_the_whole_plan_starts(policy, workload):
    jobs, machine = workload
    expected = simulate(jobs, machine, policy, "conservative", estimate="predicted")
    assert _starts(jobs, machine, policy) == expected
