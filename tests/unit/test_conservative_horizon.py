"""Conservative backfilling with requests under FCFS, WFP3, UNICEP and SJBF plans only near
now: the jobs that could not start before now + a third of the longest request, or would run
past the start of one left out, are passed over by size class (FCFS on at most 16 sizes, as
here) or group (the others) and stay out of the profile, and a scan that cannot tell from
that plan whether a job starts is planned again whole (by size class), or (by group) near now
up to twice, then eight times the longest request, then whole where that cannot tell either
(issue 17). A hand case for each bound, and long queues against the reference. Long queues on
a small machine put most reservations far from now, and early completions move them: the
start times must be those of the reference, which plans every reservation at every scan."""

import pytest
from hypothesis import given, settings
from reference_sim import Job, simulate
from simhelpers import cpp_starts, far_plans


@pytest.mark.parametrize("policy", ("fcfs", "wfp3", "unicep"))
@pytest.mark.parametrize(("request_6", "start_6"), [(25.0, 0.0), (75.0, 70.0)])
def test_the_reservations_left_out_bound_what_the_plan_near_now_can_tell(
    policy, request_6, start_6
):
    # 8 procs, all jobs at 0 but the last, whose request (180) is the longest: the plan near
    # now reaches a third of it, to 60. Job 1 (6 procs to 20) runs; job 2 (4 procs) is committed
    # on [20, 30); job 3 (5 procs) is reserved on [30, 60); job 4 (8 procs) would start at
    # 60, so it is left out. Job 5 (3 procs, 40.5 s) fits from 20 in the profile without job
    # 4, but its run crosses 60, where job 4 holds every proc: it must be left out too (it
    # starts at 70), not reserved on [20, 60.5), which would keep job 6 (2 procs, 25 s) from
    # starting now beside job 2's reservation. With a request of 75 s, job 6 fits now in the
    # profile without jobs 4 and 5 but not beside job 4 on [60, 70): the plan near now cannot
    # tell, and the whole plan (FCFS) or the one up to twice the longest request (360 s: WFP3,
    # UNICEP) starts it at 70, after job 4 (FCFS). Nobody has waited at 0, so
    # WFP3 and UNICEP order the jobs as FCFS does there, by groups of equal size and request
    # (their later scans differ).
    jobs = [
        Job(1, 0.0, 20.0, 6, 20.0, 0),
        Job(2, 0.0, 10.0, 4, 10.0, 0),
        Job(3, 0.0, 30.0, 5, 30.0, 0),
        Job(4, 0.0, 10.0, 8, 10.0, 0),
        Job(5, 0.0, 40.5, 3, 40.5, 0),
        Job(6, 0.0, request_6, 2, request_6, 0),
        Job(7, 1000.0, 1.0, 1, 180.0, 0),
    ]
    # FCFS plans near now where the queue holds over 4 jobs per size: 120 more whole-machine
    # jobs after job 6 (in submit order, before job 7), reserved far off.
    jobs[-1:-1] = [Job(i, 0.0, 10.0, 8, 10.0, 0) for i in range(8, 128)]
    expected = simulate(jobs, 8, policy, "conservative")
    if policy == "fcfs" or start_6 == 0.0:
        assert expected[6] == start_6
    if policy == "fcfs":
        assert {j: expected[j] for j in range(1, 6)} == {1: 0.0, 2: 20.0, 3: 30.0, 4: 60.0, 5: 70.0}
    assert cpp_starts(jobs, 8, policy, "conservative") == expected


@pytest.mark.parametrize("policy", ("fcfs", "sjf", "f1", "wfp3", "unicep", "sjbf"))
@settings(max_examples=30, deadline=None)
@given(workload=far_plans(max_jobs=70))
def test_plans_near_now_start_what_the_whole_plan_starts(policy, workload):
    jobs, machine = workload
    expected = simulate(jobs, machine, policy, "conservative")
    assert cpp_starts(jobs, machine, policy, "conservative") == expected


def test_a_job_of_estimate_0_needs_its_procs_where_a_left_out_reservation_begins_now():
    # F1 with EASY++ predictions on a window of more than 16 sizes: the ranked walk near now
    # (on at most 16 the plan by index, whole under F1, would not leave anything out). 29
    # procs, 17 of them held by job 8 (no user, its request 7 s, runtime 1000 s) from 0 past
    # every time that matters here; jobs 9-18 (10 more sizes, no user) come at 100. Job 1
    # (runtime 0) gives user 0 a mean of 0 from the next event on; jobs 2 (8 procs, predicted
    # 7) and 3 (3 procs, predicted 1) run to 3, and from 1 on job 3 has outrun its prediction:
    # its procs count as back now. At 2, 1 proc is free and the profile holds 4 from 2, all
    # 29 from 7. Job 5 (2 procs, predicted 0) is committed; in F1 order job 4 (5 procs,
    # predicted 0) starts no earlier than 7, past the plan near now (2 + 7 / 3): left out, down
    # to 7; job 6 (no user: its request, 7 s, 4 procs) would start at 2 but run past 7: left
    # out, down to 2. Job 7 (1 proc, predicted 0) fits the free proc and that profile, but in
    # the whole plan job 6 holds all 4 of the profile's procs at 2, and a job of estimate 0
    # needs its procs at the instant it starts (docs/simulation.md): it waits to 3. The plan
    # near now took its run of no length as ending by 2 and started it at 2.
    jobs = [
        Job(1, 0.0, 0.0, 1, 0.0, 0),
        Job(2, 0.0, 3.0, 8, 7.0, 0),
        Job(3, 0.0, 3.0, 3, 1.0, 0),
        Job(8, 0.0, 1000.0, 17, 7.0, -1),
        Job(4, 1.0, 0.0, 5, 1.0, 0),
        Job(5, 1.0, 0.0, 2, 0.0, 0),
        Job(6, 1.0, 0.0, 4, 7.0, -1),
        Job(7, 2.0, 0.0, 1, 0.0, 0),
    ]
    sizes = (6, 7, 9, 10, 11, 12, 13, 14, 15, 16)
    jobs += [Job(9 + k, 100.0, 1.0, procs, 1.0, -1) for k, procs in enumerate(sizes)]
    expected = simulate(jobs, 29, "f1", "conservative", estimate="predicted")
    assert {k: expected[k] for k in range(1, 9)} == {
        1: 0.0, 2: 0.0, 3: 0.0, 4: 3.0, 5: 3.0, 6: 3.0, 7: 3.0, 8: 0.0
    }  # fmt: skip
    assert cpp_starts(jobs, 29, "f1", "conservative", "predicted") == expected


def test_a_scan_that_the_plan_up_to_twice_the_longest_request_cannot_tell_is_planned_further():
    # 11 procs, all jobs at 0, runtimes their requests, the longest 100 s. The scan at 100 under
    # WFP3 (waits of 100 s: -7 for jobs 3, 6 and 7, -3.9 for job 5, -3, -2 and -1 for jobs 8, 11
    # and 12): job 4 (3 procs) runs to 140, job 3 starts; job 6 is committed on [200, 300). The
    # plan near now (to 133.3) and the one up to 300 both leave out job 7 (7 procs, from 300),
    # reserve job 5 (2 procs) on [140, 220), then leave out job 8 (3 procs, from 220, past 300)
    # and job 11 (2 procs, from 140, past 220): job 12 (1 proc) fits now, to 200, past 140, so
    # neither can tell. The plan up to 900, as the whole plan, reserves job 7 on [300, 400), job
    # 8 on [220, 320), job 11 from 320, and starts job 12 at 100 (a plan that gave up there would
    # start it at 140, after job 5).
    sizes = [(7, 100), (2, 30), (7, 100), (3, 80), (2, 80), (7, 100), (7, 100), (3, 100),
             (1, 100), (3, 30), (2, 100), (1, 100)]  # fmt: skip
    jobs = [Job(i + 1, 0.0, float(r), p, float(r), 0) for i, (p, r) in enumerate(sizes)]
    expected = simulate(jobs, 11, "wfp3", "conservative")
    starts = {3: 100.0, 5: 140.0, 6: 200.0, 7: 300.0, 8: 220.0, 11: 320.0, 12: 100.0}
    assert {j: expected[j] for j in starts} == starts
    assert cpp_starts(jobs, 11, "wfp3", "conservative") == expected


def test_a_scan_that_the_plan_up_to_eight_times_the_longest_request_cannot_tell_is_planned_whole():
    # 30 procs, FCFS on 22 sizes (by group), all jobs at 0, runtimes their requests. Job 1 (29
    # procs, 80 s) starts; jobs 2 to 11 (28 down to 19 procs, 80 s) are reserved one after the
    # other on [80, 160), [160, 240), ..., [800, 880), the k-th leaving k + 1 procs free. Jobs 12
    # to 21 (11 down to 2 procs, 100 s, the longest request) each fit first where as many are
    # free, and job 22 (1 proc, 100 s) fits now. The plan up to 800 (eight times 100) leaves out
    # job 11 (from 800) and job 12 (11 procs, from 800), then job 13 (10 procs, from 720, past
    # 800), job 14 (9 procs, from 640, past 720), and so on to job 21 (2 procs, from 80, past
    # 160): job 22 runs to 100, past 80, so it cannot tell, nor can the plans to 33.3 and 200.
    # The whole plan reserves job 12 on [800, 900), job 13 from 880, job 14 on [640, 740), and
    # so on, every other one of jobs 12 to 21 in its own step: job 21 goes to 900 and job 22
    # starts at 0 (a scan that gave up would start nothing at 0; job 22 would wait to 980).
    jobs = [Job(1, 0.0, 80.0, 29, 80.0, 0)]
    jobs += [Job(1 + k, 0.0, 80.0, 29 - k, 80.0, 0) for k in range(1, 11)]
    jobs += [Job(23 - p, 0.0, 100.0, p, 100.0, 0) for p in range(11, 1, -1)]
    jobs += [Job(22, 0.0, 100.0, 1, 100.0, 0)]
    expected = simulate(jobs, 30, "fcfs", "conservative")
    starts = {2: 80.0, 11: 800.0, 12: 800.0, 13: 880.0, 14: 640.0, 21: 900.0, 22: 0.0}
    assert {j: expected[j] for j in starts} == starts
    assert cpp_starts(jobs, 30, "fcfs", "conservative") == expected


# WFP3 keys a scan by w^3 * (n / r^3), not by its score -pow(w / r, 3) * n: job 5 (300 s,
# waited 321 s) and job 6 (100 s, waited 107 s) tie on the score, and job 5 comes first by
# index, but job 6's key is 1 ulp ahead. At 1024 job 1 ends and frees 5 procs; job 3 (the
# whole machine) is committed for 5000, after job 2, and whichever of jobs 5 and 6 comes first
# starts now.
_TIE = [
    Job(1, 0.0, 1024.0, 5, 1024.0, 0),
    Job(2, 0.0, 5000.0, 5, 5000.0, 0),
    Job(3, 1.0, 10.0, 10, 10.0, 0),
    Job(5, 703.0, 300.0, 5, 300.0, 0),
    Job(6, 917.0, 100.0, 5, 100.0, 0),
]


def test_a_scan_orders_wfp3_keys_that_tie_on_the_score_by_the_score():
    expected = simulate(_TIE, 10, "wfp3", "conservative")
    assert (expected[5], expected[6]) == (1024.0, 1324.0)
    assert cpp_starts(_TIE, 10, "wfp3", "conservative") == expected


def test_close_wfp3_keys_on_both_sides_of_a_bucket_bound_are_ordered_by_the_score():
    # Job 4 (the whole machine, 1200 s, from 4.888521330748232) waits and its key is 2^26
    # doubles ahead of job 5's, exactly: the scan's buckets of keys, 2^26 doubles wide from
    # job 4's, put job 6 in the first and job 5 in the second. Job 4 is reserved after job 3.
    jobs = _TIE[:3] + [Job(4, 4.888521330748232, 1200.0, 10, 1200.0, 0)] + _TIE[3:]
    expected = simulate(jobs, 10, "wfp3", "conservative")
    assert (expected[4], expected[5], expected[6]) == (5010.0, 1024.0, 1324.0)
    assert cpp_starts(jobs, 10, "wfp3", "conservative") == expected
