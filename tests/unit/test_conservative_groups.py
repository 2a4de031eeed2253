"""Conservative backfilling of the group policies (WFP3, UNICEP, SJBF with requests) merges
the groups of like jobs by policy order at the scan; the groups that come after the last
fitting group's oldest job join the merge only when the walk reaches them (issue 17). A hand
case where a fitting group's second job comes after a group that did not fit: that group's
reservation must be made before the second job is tried."""

import pytest
from reference_sim import Job, simulate
from simhelpers import trace_of

from ddppo_hpc.sim import simulate as simulate_cpp


@pytest.mark.parametrize("policy", ("wfp3", "sjbf"))
def test_a_group_that_did_not_fit_reserves_before_the_fitting_groups_next_job(policy):
    # 5 procs. At t = 1 jobs 1 (1 proc to 100) and 2 (2 procs to 10) run; job 3 (5 procs) is
    # committed and reserved at 100. Jobs 4 and 6 form a group (1 proc, 30 s) that fits now;
    # job 5 (3 procs, 30 s) comes between them in policy order (no wait yet: WFP3's scores
    # are all 0, SJBF's the equal requests; ties by index) and does not fit now. Job 4
    # starts on [1, 31); job 5 is reserved on [10, 40), where 4 procs are free beside job 4;
    # then job 6 no longer fits on [1, 31) and starts when job 4 ends. Job 6 tried before
    # job 5's reservation would start at 1 and push job 5 to 31.
    jobs = [
        Job(1, 0.0, 100.0, 1, 100.0, 0),
        Job(2, 0.0, 10.0, 2, 10.0, 0),
        Job(3, 1.0, 1.0, 5, 1.0, 0),
        Job(4, 1.0, 30.0, 1, 30.0, 0),
        Job(5, 1.0, 30.0, 3, 30.0, 0),
        Job(6, 1.0, 30.0, 1, 30.0, 0),
    ]
    expected = {1: 0.0, 2: 0.0, 3: 100.0, 4: 1.0, 5: 10.0, 6: 31.0}
    assert simulate(jobs, 5, policy, "conservative") == expected
    trace = trace_of(jobs, 5)
    result = simulate_cpp(trace, policy, "conservative")
    assert dict(zip(trace.id.tolist(), result.start_time.tolist())) == expected
