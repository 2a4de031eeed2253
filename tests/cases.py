"""Small schedules computed by hand from docs/simulation.md.

Jobs are tuples (id, submit, runtime, procs, requested_time[, user]); a case runs with the
users' requests as estimates unless it says `"estimate": "predicted"`. In the comments, "free"
is the real number of free procs, H the committed job, S the EASY shadow time, "extra" the
EASY extra procs, [a, b) a conservative reservation and p(J) the EASY++ prediction of J;
profiles are written as `time:level` steps; uN is user N.
"""

# Workload W, run under the three backfill modes: J1 fills 6 of 10 procs until 10, J2 (8 procs)
# is committed at 1, J3 (9 procs) queues behind it, J4 is long and small, J5 is short and small.
_W = [
    (1, 0, 10, 6, 10),
    (2, 1, 10, 8, 10),
    (3, 2, 10, 9, 10),
    (4, 3, 30, 2, 30),
    (5, 4, 5, 1, 5),
]

# The F1/UNICEP/WFP3 cases share this shape: J1 fills the machine until 10, J2 is committed at
# 1 and starts at 10, J3 (submit 2) and J4 (submit 5) are both waiting at the pick of t=10.
# FCFS would start J3 at 20 and J4 at 30.

CASES = [
    {
        # t=0 J1 starts (free 4). t=1 J2 committed (8 > 4). t=10 J1 ends: J2 starts (free 2),
        # J3 committed. t=20 J2 ends: J3 starts (free 1), J4 committed (2 > 1).
        # t=30 J3 ends: J4 starts (free 8), then J5 (1 <= 8).
        "name": "workload_w_fcfs_none",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "none",
        "jobs": _W,
        "expected_start": {1: 0, 2: 10, 3: 20, 4: 30, 5: 30},
    },
    {
        # t=1 H=J2, S=10 (J1), extra 4+6-8=2. t=2 J3: 9 > free 4, skipped.
        # t=3 J4: 2 <= 4, 3+30 > S=10 but 2 <= extra 2: starts through extra (free 2, extra 0).
        # t=4 scan: S=10, extra=2+6-8=0; J3 skipped; J5: 4+5 <= 10, starts (free 1).
        # t=9 J5 ends. t=10 J1 ends (free 8): J2 starts (free 0); H=J3: running ends 20 (8),
        # 33 (2): S=33. t=20 free 8 < 9. t=33 J4 ends: J3 starts.
        "name": "workload_w_fcfs_easy",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "easy",
        "jobs": _W,
        "expected_start": {1: 0, 2: 10, 3: 33, 4: 3, 5: 4},
    },
    {
        # t=3: J2 at [10,20) (profile 3:4 10:2 20:10); J3 at its first rise 20, [20,30)
        # (3:4 10:2 20:1 30:10). J4 (2 procs, d=30) does not fit at 3 (level 1 at 20): it would
        # delay J3, so unlike EASY it is reserved at 30 and waits.
        # t=4: same reservations, J4 at [30,60) (4:4 10:2 20:1 30:8 60:10); J5 (1, d=5) fits on
        # [4,9) and 1 <= free 4: starts. t=10 J2 starts, H=J3 reserved at 20, J4 at 30.
        # t=20 J3 starts (free 1), H=J4. t=30 J4 starts.
        "name": "workload_w_fcfs_conservative",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "conservative",
        "jobs": _W,
        "expected_start": {1: 0, 2: 10, 3: 20, 4: 30, 5: 4},
    },
    {
        # All submitted at 0, 4 procs each. SJF order by request: J2 (10), J3 (20), J1 (30).
        # t=0 J2 starts, H=J3. t=10 J3 starts, H=J1. t=20 J1 starts.
        "name": "sjf_none_same_submit",
        "machine_procs": 4,
        "policy": "sjf",
        "backfill": "none",
        "jobs": [(1, 0, 10, 4, 30), (2, 0, 10, 4, 10), (3, 0, 10, 4, 20)],
        "expected_start": {1: 20, 2: 0, 3: 10},
    },
    {
        # Pick at t=10: J3 -(8/40)^3*3 = -0.024, J4 -(5/5)^3*2 = -2: J4 first.
        # t=10 J2 starts (free 0), H=J4. t=20 J4 starts (free 2), H=J3 (3 > 2). t=30 J3 starts.
        "name": "wfp3_none_wait_ratio_first",
        "machine_procs": 4,
        "policy": "wfp3",
        "backfill": "none",
        "jobs": [(1, 0, 10, 4, 10), (2, 1, 10, 4, 10), (3, 2, 10, 3, 40), (4, 5, 10, 2, 5)],
        "expected_start": {1: 0, 2: 10, 3: 30, 4: 20},
    },
    {
        # Pick at t=10: J3 -8/(log2(4)*10) = -0.4, J4 (1 proc, log2 taken as 1e-15)
        # -5/(1e-15*10) = -5e14: J4 first. t=20 J4 starts (free 3), H=J3 (4 > 3).
        # t=30 J3 starts.
        "name": "unicep_none_single_proc_first",
        "machine_procs": 4,
        "policy": "unicep",
        "backfill": "none",
        "jobs": [(1, 0, 10, 4, 10), (2, 1, 10, 4, 10), (3, 2, 10, 4, 10), (4, 5, 10, 1, 10)],
        "expected_start": {1: 0, 2: 10, 3: 30, 4: 20},
    },
    {
        # Pick at t=10: J3 log10(1e5)*100 + 870*log10(2) = 500 + 261.9 = 761.9,
        # J4 log10(10)*60 + 870*log10(5) = 60 + 608.1 = 668.1: J4 first.
        # t=20 J4 starts (free 40), H=J3 (100 > 40). t=30 J3 starts.
        "name": "f1_none_small_request_first",
        "machine_procs": 100,
        "policy": "f1",
        "backfill": "none",
        "jobs": [
            (1, 0, 10, 100, 10),
            (2, 1, 10, 100, 10),
            (3, 2, 10, 100, 100000),
            (4, 5, 10, 60, 10),
        ],
        "expected_start": {1: 0, 2: 10, 3: 30, 4: 20},
    },
    {
        # t=1 H=J2, S=10, extra 2. t=2 scan in SJF order: J4 (r=6) 2+6 <= 10 starts (free 0);
        # J3 (r=8) 4 > 0. t=7 J4 ends (free 4): J3 7+8 > 10 and 4 > extra 2: refused.
        # t=10 J2 starts (free 2), H=J3. t=20 J3 starts. (FCFS would start J3 at 2, J4 at 20.)
        "name": "sjf_easy_scan_in_policy_order",
        "machine_procs": 10,
        "policy": "sjf",
        "backfill": "easy",
        "jobs": [(1, 0, 10, 6, 10), (2, 1, 10, 8, 10), (3, 2, 5, 4, 8), (4, 2, 5, 4, 6)],
        "expected_start": {1: 0, 2: 10, 3: 20, 4: 2},
    },
    {
        # t=1 H=J2, S=10, extra 4+6-8=2. t=2 J3: 3 <= free 4 but 2+20 > 10 and 3 > extra 2:
        # it would delay J2, refused. t=3 J3 refused again; J4: 3+5 <= 10, starts (free 0).
        # t=8 J4 ends, J3 refused. t=10 J2 starts (free 2), H=J3. t=20 J3 starts.
        "name": "easy_refuses_job_delaying_head",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "easy",
        "jobs": [(1, 0, 10, 6, 10), (2, 1, 10, 8, 10), (3, 2, 20, 3, 20), (4, 3, 5, 4, 5)],
        "expected_start": {1: 0, 2: 10, 3: 20, 4: 3},
    },
    {
        # J1 (4 procs) and J2 (2 procs) both end at 10; free 4. t=1 H=J3 (8): S=10 and both
        # count as free at S: extra = 4+4+2-8 = 2. t=2 J4: 2+30 > 10, 2 <= extra: starts
        # (free 2). t=3 extra = 2+4+2-8 = 0: J5 (1 proc, 3+30 > 10) refused.
        # t=10 J1, J2 end (free 8): J3 starts (free 0), H=J5. t=20 J3 ends: J5 starts.
        "name": "easy_extra_counts_all_ends_at_shadow",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "easy",
        "jobs": [
            (1, 0, 10, 4, 10),
            (2, 0, 10, 2, 10),
            (3, 1, 10, 8, 10),
            (4, 2, 30, 2, 30),
            (5, 3, 30, 1, 30),
        ],
        "expected_start": {1: 0, 2: 0, 3: 10, 4: 2, 5: 20},
    },
    {
        # t=0 J1 (runtime 0) starts and gives its 4 procs back at once; J2 starts (free 2).
        # t=1 H=J3: S=10, extra 0. J4 (runtime 0, request 7): 1+7 <= 10, starts and gives its
        # procs back (free 2); J5: 1+5 <= 10, starts (free 0). t=6 J5 ends. t=10 J3 starts.
        "name": "runtime_zero_easy",
        "machine_procs": 4,
        "policy": "fcfs",
        "backfill": "easy",
        "jobs": [
            (1, 0, 0, 4, 0),
            (2, 0, 10, 2, 10),
            (3, 1, 10, 4, 10),
            (4, 1, 0, 2, 7),
            (5, 1, 5, 2, 5),
        ],
        "expected_start": {1: 0, 2: 0, 3: 10, 4: 1, 5: 1},
    },
    {
        # t=1 H=J2 (profile 1:2 10:4) reserved [10,20) (1:2 10:0 20:4). J3 (runtime 0, d=5)
        # fits at 1 and 2 <= free 2: starts, not subtracted from the profile or from free.
        # J4 (d=5) then fits at 1 (level 2 on [1,6)) and 2 <= free 2: starts. t=10 J2 starts.
        "name": "runtime_zero_conservative",
        "machine_procs": 4,
        "policy": "fcfs",
        "backfill": "conservative",
        "jobs": [(1, 0, 10, 2, 10), (2, 1, 10, 4, 10), (3, 1, 0, 2, 5), (4, 1, 5, 2, 5)],
        "expected_start": {1: 0, 2: 10, 3: 1, 4: 1},
    },
    {
        # J1 requests 5 but runs 20 (free 4 while it runs). t=1 H=J2: S=5, extra 2.
        # t=6 J1 is overdue: estimated end max(5, 6) = 6 = S, extra = 4+6-8 = 2.
        # J3 (runtime 0, request 0): 6+0 <= S, starts by the time rule (extra stays 2).
        # J4: 6+10 > 6, 2 <= extra: starts (free 2). t=16 J4 ends (free 4 < 8).
        # t=20 J1 ends: J2 starts.
        "name": "overdue_job_easy",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "easy",
        "jobs": [(1, 0, 20, 6, 5), (2, 1, 10, 8, 10), (3, 6, 0, 2, 0), (4, 6, 10, 2, 10)],
        "expected_start": {1: 0, 2: 20, 3: 6, 4: 6},
    },
    {
        # J1 (3 procs) requests 5 but runs 100; J2 (6 procs) ends at 50; free 1.
        # t=1 H=J3 (6): profile 1:1 5:4 50:10, reserved [50,60).
        # t=6 J1 overdue, estimated end 6: profile 6:4 50:10, J3 [50,60) (6:4 50:4 60:10).
        # J4 (3, d=10): earliest start 6 but 3 > free 1: reserved [6,16) (6:1 16:4 ...).
        # J5 (1, d=10): fits at 6 and 1 <= free 1: starts (free 0). t=16 J5 ends: J4 again
        # reserved at 16 but 3 > free 1. t=50 J2 ends (free 7): J3 starts (free 1), H=J4.
        # t=60 J3 ends: J4 starts.
        "name": "overdue_job_conservative",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "conservative",
        "jobs": [
            (1, 0, 100, 3, 5),
            (2, 0, 50, 6, 50),
            (3, 1, 10, 6, 10),
            (4, 6, 10, 3, 10),
            (5, 6, 10, 1, 10),
        ],
        "expected_start": {1: 0, 2: 0, 3: 50, 4: 60, 5: 6},
    },
    {
        # J1 and J2 end at 5, when J3 and J4 arrive: all four events are applied before the
        # pick (free 4, both waiting). SJF picks J4 (r=5): starts 5, H=J3. t=10 J3 starts.
        "name": "simultaneous_arrivals_and_completions",
        "machine_procs": 4,
        "policy": "sjf",
        "backfill": "none",
        "jobs": [(1, 0, 5, 2, 5), (2, 0, 5, 2, 5), (3, 5, 5, 4, 10), (4, 5, 5, 4, 5)],
        "expected_start": {1: 0, 2: 0, 3: 10, 4: 5},
    },
]

# EASY++: the sjbf order and estimate "predicted" (docs/simulation.md, "Runtime predictions").
CASES += [
    {
        # One proc: each pick follows the start of the committed job, after the events at t.
        # t=1 no history, p = requests: J4 (7). t=10 J1 ends, u1's history [10]: p(J2)=10,
        # p(J3)=15 (u2: no history, the request), p(J5)=min(10, 8)=8 (capped): J5.
        # t=12 J4 ends, u1 [10, 2], mean 6: p(J2)=6 < p(J3)=15: J2 (SJF would take J3).
        # t=18 J5 ends: u1's last two [2, 6], mean 4 (with J1's 10 it would be 6):
        # p(J6)=4 < p(J7)=5 (u3): J6. t=48 J7, t=53 J3.
        "name": "sjbf_predictions_from_0_1_2_completed_jobs",
        "machine_procs": 1,
        "policy": "sjbf",
        "backfill": "none",
        "jobs": [
            (1, 0, 10, 1, 100, 1),
            (2, 1, 30, 1, 40, 1),
            (3, 1, 20, 1, 15, 2),
            (4, 1, 2, 1, 7, 1),
            (5, 1, 6, 1, 8, 1),
            (6, 15, 5, 1, 100, 1),
            (7, 15, 5, 1, 5, 3),
        ],
        "expected_start": {1: 0, 2: 18, 3: 58, 4: 10, 5: 12, 6: 48, 7: 53},
    },
    {
        # J1..J3 of u1 all end at 10 (runtimes 10, 8, 6). The two most recent are the later
        # in (submit, id) order, J2 and J3: mean 7, so p(J5)=7 < p(J4)=8 (u2: the request) and
        # J5 runs first at 10 (with J1 and J2 it would be 9 and J4 first). J4 at 15.
        "name": "sjbf_same_end_later_submit_is_more_recent",
        "machine_procs": 3,
        "policy": "sjbf",
        "backfill": "none",
        "jobs": [
            (1, 0, 10, 1, 100, 1),
            (2, 2, 8, 1, 100, 1),
            (3, 4, 6, 1, 100, 1),
            (4, 10, 5, 3, 8, 2),
            (5, 10, 5, 3, 100, 1),
        ],
        "expected_start": {1: 0, 2: 2, 3: 4, 4: 15, 5: 10},
    },
    {
        # Unknown users (-1) have no history: at t=2 J1 (runtime 2) has ended, but p(J2)=50,
        # its request, so J3 (p=20) runs first; J2 at 7.
        "name": "sjbf_unknown_user_has_no_history",
        "machine_procs": 1,
        "policy": "sjbf",
        "backfill": "none",
        "jobs": [(1, 0, 2, 1, 100, -1), (2, 2, 5, 1, 50, -1), (3, 2, 5, 1, 20, 1)],
        "expected_start": {1: 0, 2: 7, 3: 2},
    },
    {
        # t=0 J1 (u1, p=1) starts and ends (runtime 0) but joins u1's history only at the next
        # event time: p(J2)=30 stays the request, J3 (p=20) starts (free 0), H=J2.
        # t=5 J3 ends, J2 starts; u1's history [0]: p(J4)=0 (score 0.1) < p(J5)=5, H=J4.
        # t=10 J4 starts, H=J5. t=15 J5 starts.
        "name": "sjbf_runtime_zero_job_joins_history_at_next_event",
        "machine_procs": 2,
        "policy": "sjbf",
        "backfill": "none",
        "jobs": [
            (1, 0, 0, 1, 1, 1),
            (2, 0, 5, 2, 30, 1),
            (3, 0, 5, 2, 20, 2),
            (4, 1, 5, 2, 40, 1),
            (5, 1, 5, 2, 10, 2),
        ],
        "expected_start": {1: 0, 2: 5, 3: 0, 4: 10, 5: 15},
    },
    {
        # t=0 J1 (u1, p_run 100: no history) and J2 (20) start, free 3. t=1 H=J3: S=20 (J2),
        # extra 1. t=4 J1 ends: u1 [4]. t=5 J4: p=min(4, 30)=4, 5+4 <= S=20: starts. With
        # requests 5+30 > 20 and 4 > extra 2: it would wait until 30. t=20 J3 starts.
        "name": "easy_backfills_on_a_short_prediction",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "easy",
        "estimate": "predicted",
        "jobs": [
            (1, 0, 4, 1, 100, 1),
            (2, 0, 20, 6, 20, 2),
            (3, 1, 10, 8, 10, 3),
            (4, 5, 3, 4, 30, 1),
        ],
        "expected_start": {1: 0, 2: 0, 3: 20, 4: 5},
    },
    {
        # t=5 J1 ends: u1 [5]. t=6 J2 starts, p_run=min(5, 60)=5: estimated end 11, free 4.
        # t=7 H=J3: S=11, extra 2. t=8 J4 (u2, p=20): 8+20 > 11 and 3 > 2: refused.
        # t=12 J2 outran its prediction: its estimated end falls back to 6+60=66, S=66,
        # extra 2: J4 (12+20 <= 66) and J5 start. (Requests: J4 at 8; without the fallback,
        # S=12 would refuse J4.) t=56 J2 ends: J3 starts.
        "name": "easy_running_job_outlives_its_prediction",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "easy",
        "estimate": "predicted",
        "jobs": [
            (1, 0, 5, 2, 100, 1),
            (2, 6, 50, 6, 60, 1),
            (3, 7, 10, 8, 10, 2),
            (4, 8, 20, 3, 20, 2),
            (5, 12, 4, 1, 4, 2),
        ],
        "expected_start": {1: 0, 2: 6, 3: 56, 4: 12, 5: 12},
    },
    {
        # t=1 H=J3 (d=10) reserved [20,30). t=4 J1 ends: u1 [4]. t=5 profile 5:4 20:2 30:10:
        # J4 (d=min(4, 30)=4) fits [5,9): starts (5:0 9:4 20:2 30:10); J5 (d=min(4, 15)=4)
        # reserved [9,13). t=8 J4 ends: u1 [4, 3], mean 3.5: J5 (d=3.5) fits [8,11.5): starts.
        # t=20 J3 starts. (Requests: J4 (d=30) is reserved at 30 and J5 (d=15) starts at 5.)
        "name": "conservative_with_predictions",
        "machine_procs": 10,
        "policy": "fcfs",
        "backfill": "conservative",
        "estimate": "predicted",
        "jobs": [
            (1, 0, 4, 1, 100, 1),
            (2, 0, 20, 6, 20, 2),
            (3, 1, 10, 8, 10, 3),
            (4, 5, 3, 4, 30, 1),
            (5, 5, 10, 4, 15, 1),
        ],
        "expected_start": {1: 0, 2: 0, 3: 20, 4: 5, 5: 8},
    },
]

# Running jobs past their estimated ends count as ending now, so S and extra change with no
# completion. t=0 J1 (4 procs, estimated end 10), J2 (4, 15), J3 (2, 18) start and run to 100
# (free 2). t=1 H=J4 (9 procs): S=15 (J1, J2), extra 2+4+4-9=1. t=2 J5 and t=3 J6 (2 procs
# each, now + request > S): 2 > extra, refused. t=20 J7 (12 procs) arrives and no job has ended:
# the three estimated ends count as 20, S=20, extra 2+10-9=3: one of J5 and J6 starts (free 0),
# the other at 25, when that one ends. t=100 J1-J3 end: J4 starts; t=110 J7.
_PASSED_ESTIMATES = [
    (1, 0, 100, 4, 10),
    (2, 0, 100, 4, 15),
    (3, 0, 100, 2, 18),
    (4, 1, 10, 9, 100),
    (5, 2, 5, 2, 100),
    (6, 3, 5, 2, 20),
    (7, 20, 1, 12, 1),
]
CASES += [
    {
        "name": "easy_extra_grows_as_estimated_ends_pass_fcfs",
        "machine_procs": 12,
        "policy": "fcfs",
        "backfill": "easy",
        "jobs": _PASSED_ESTIMATES,
        "expected_start": {1: 0, 2: 0, 3: 0, 4: 100, 5: 20, 6: 25, 7: 110},
    },
    {
        # At 20 WFP3 takes J6: (17/20)^3 * 2 = 1.23 against J5's (18/100)^3 * 2 = 0.012.
        "name": "easy_extra_grows_as_estimated_ends_pass_wfp3",
        "machine_procs": 12,
        "policy": "wfp3",
        "backfill": "easy",
        "jobs": _PASSED_ESTIMATES,
        "expected_start": {1: 0, 2: 0, 3: 0, 4: 100, 5: 25, 6: 20, 7: 110},
    },
]
