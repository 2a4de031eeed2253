"""SJBF scores a group of waiting jobs (one user, procs and request) once, from its user's
history and its request, not from each job's row (issue 17). Hand cases where two groups
differ only in their user: user 1's last job ran 10 s, user 2's 50 s, so user 1's waiting job
goes first although user 2's comes first in index order; with a user's history taken for
another's, both would be predicted alike and user 2's would go first."""

import pytest
from reference_sim import Job, simulate
from simhelpers import cpp_starts


def test_the_pick_predicts_each_group_from_its_own_user():
    # 2 procs. Jobs 1 (user 1, 10 s) and 2 (user 2, 50 s) run from 0; job 3 (2 procs) waits
    # for both and runs on [50, 150). Jobs 4 (user 2) and 5 (user 1), 2 procs and 100 s
    # requested each, wait from 60: at 150 SJBF picks job 5 (predicted 10 s), then job 4.
    jobs = [
        Job(1, 0.0, 10.0, 1, 100.0, 1),
        Job(2, 0.0, 50.0, 1, 100.0, 2),
        Job(3, 1.0, 100.0, 2, 100.0, 3),
        Job(4, 60.0, 5.0, 2, 100.0, 2),
        Job(5, 60.0, 5.0, 2, 100.0, 1),
    ]
    expected = {1: 0.0, 2: 0.0, 3: 50.0, 4: 155.0, 5: 150.0}
    assert simulate(jobs, 2, "sjbf", "none") == expected
    assert cpp_starts(jobs, 2, "sjbf", "none") == expected


@pytest.mark.parametrize("backfill", ("easy", "conservative"))
def test_a_backfill_scan_predicts_each_group_from_its_own_user(backfill):
    # 4 procs. Jobs 1 (user 1, 10 s), 2 (user 2, 50 s) and 3 (2 procs to 200) run from 0.
    # Job 4 (4 procs, predicted 1 s: no history) is picked at 55 and waits for 200. Jobs 5
    # (user 2) and 6 (user 1), 2 procs and 100 s requested each, arrive at 56, where 2 procs
    # are free until 200: the scan starts job 6 (predicted 10 s) first, and job 5 when job 6
    # ends at 61.
    jobs = [
        Job(1, 0.0, 10.0, 1, 100.0, 1),
        Job(2, 0.0, 50.0, 1, 100.0, 2),
        Job(3, 0.0, 200.0, 2, 200.0, 3),
        Job(4, 55.0, 1.0, 4, 1.0, 4),
        Job(5, 56.0, 5.0, 2, 100.0, 2),
        Job(6, 56.0, 5.0, 2, 100.0, 1),
    ]
    expected = {1: 0.0, 2: 0.0, 3: 0.0, 4: 200.0, 5: 61.0, 6: 56.0}
    assert simulate(jobs, 4, "sjbf", backfill) == expected
    assert cpp_starts(jobs, 4, "sjbf", backfill) == expected


# On 1 proc conservative backfilling starts nothing out of order: its picks come from the
# groups' heads it keeps in order, where one entry per user stands for the groups capped at its
# mean, moved as the mean moves.
@pytest.mark.parametrize("backfill", ("none", "conservative"))
def test_the_pick_caps_a_users_requests_at_its_mean_and_follows_it(backfill):
    # 1 proc. User 1's jobs 1 (10 s) and 2 (30 s) run on [0, 10) and [10, 40). At 10 user 1's
    # mean is 10 and each of its waiting jobs scores 10 whatever its request: job 2 starts and
    # job 3, the oldest left (not job 5, of the least request), is picked to start at 40.
    # Picked at 40, the mean 20: job 5 (request 15, so 15) before job 6 (request 100, 20) and
    # job 4 (user 2, no history, request 20); it starts at 41. Picked at 41, the mean 15.5
    # (jobs 3 and 2): job 6, capped at 15.5, before job 4.
    jobs = [
        Job(1, 0.0, 10.0, 1, 10.0, 1),
        Job(2, 0.0, 30.0, 1, 30.0, 1),
        Job(3, 5.0, 1.0, 1, 50.0, 1),
        Job(4, 5.0, 1.0, 1, 20.0, 2),
        Job(5, 5.0, 1.0, 1, 15.0, 1),
        Job(6, 5.0, 1.0, 1, 100.0, 1),
    ]
    expected = {1: 0.0, 2: 10.0, 3: 40.0, 4: 43.0, 5: 41.0, 6: 42.0}
    assert simulate(jobs, 1, "sjbf", backfill) == expected
    assert cpp_starts(jobs, 1, "sjbf", backfill) == expected


@pytest.mark.parametrize("backfill", ("none", "conservative"))
def test_a_request_equal_to_the_users_mean_ties_with_the_capped_ones_by_age(backfill):
    # 1 proc. User 1's job 1 runs 10 s from 0; jobs 2 (request 100) and 3 (request 10) arrive
    # as it ends, at 10, where user 1's mean is 10: both score 10 and job 2, the older, goes
    # first (job 2's request capped at the mean ties with job 3's request equal to it).
    jobs = [
        Job(1, 0.0, 10.0, 1, 10.0, 1),
        Job(2, 10.0, 4.0, 1, 100.0, 1),
        Job(3, 10.0, 4.0, 1, 10.0, 1),
    ]
    expected = {1: 0.0, 2: 10.0, 3: 14.0}
    assert simulate(jobs, 1, "sjbf", backfill) == expected
    assert cpp_starts(jobs, 1, "sjbf", backfill) == expected
