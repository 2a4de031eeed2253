"""Conservative backfilling's earliest-start search on a profile of many steps (issue 17): the
search walks back from the profile's end over its last steps and bisects the rest, so a hand
case whose reservation starts near the profile's start, more steps back than the walk covers."""

from reference_sim import Job, simulate
from simhelpers import trace_of

from ddppo_hpc.sim import simulate as simulate_cpp


def test_a_reservation_near_the_start_of_a_long_profile():
    # 40 one-proc jobs run from t = 0 and end at 101, 102, ..., 140 on 41 procs: at t = 1 the
    # profile has 41 steps. Job 41 (the whole machine) is reserved at 140; job 42 (2 procs for
    # 5 s) at 101, the profile's second step; so job 43 (1 proc for 101.5 s) cannot start at 1,
    # nor anywhere before job 41 ends at 150. Reserved any later, job 42 would leave it room.
    jobs = [Job(i, 0.0, 100.0 + i, 1, 100.0 + i, 0) for i in range(1, 41)]
    jobs += [
        Job(41, 1.0, 10.0, 41, 10.0, 0),
        Job(42, 1.0, 5.0, 2, 5.0, 0),
        Job(43, 1.0, 101.5, 1, 101.5, 0),
    ]
    expected = {i: 0.0 for i in range(1, 41)} | {41: 140.0, 42: 101.0, 43: 150.0}
    assert simulate(jobs, 41, "fcfs", "conservative") == expected
    trace = trace_of(jobs, 41)
    result = simulate_cpp(trace, "fcfs", "conservative")
    assert dict(zip(trace.id.tolist(), result.start_time.tolist())) == expected
