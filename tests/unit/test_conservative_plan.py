"""Conservative backfilling keeps the last scan's plan while it holds (issue 17): hand cases
where a plan made earlier no longer is the one a scan from scratch makes, so the plan must be
made again."""

from reference_sim import Job, simulate
from simhelpers import cpp_starts


def test_a_reservation_at_the_start_moves_with_time():
    # Job 1 outruns its request, so at t = 2 the profile gives its 3 procs back at once: job 2
    # (2 procs, 1 free) is reserved on [2, 7), job 3 on [7, 17), job 4 on [17, 27). At t = 3 a
    # scan from scratch reserves job 2 on [3, 8) and job 3 on [8, 18), so job 5 (1 proc for
    # 4.5 s) fits on [3, 7.5); beside the plan of t = 2 it would not.
    jobs = [
        Job(1, 0.0, 100.0, 3, 1.0, 0),
        Job(2, 2.0, 5.0, 2, 5.0, 0),
        Job(3, 2.0, 10.0, 4, 10.0, 0),
        Job(4, 2.0, 10.0, 1, 10.0, 0),
        Job(5, 3.0, 4.5, 1, 4.5, 0),
    ]
    expected = {1: 0.0, 2: 100.0, 3: 105.0, 4: 115.0, 5: 3.0}
    assert simulate(jobs, 4, "fcfs", "conservative") == expected
    assert cpp_starts(jobs, 4, "fcfs", "conservative") == expected
