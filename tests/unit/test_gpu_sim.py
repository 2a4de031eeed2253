"""The C++ GPU-cluster simulator (docs/gpu.md): hand-computed tiny clusters, and the
pure-Python reference on random small clusters."""

from dataclasses import replace

import numpy as np
import pytest
from gpu_reference import GpuJob, RefMachine
from gpu_reference import simulate as simulate_reference
from hypothesis import given, settings
from hypothesis import strategies as st

from ddppo_hpc.gpu import Cluster, Machines, simulate_gpu
from ddppo_hpc.gpu.topology import MODEL_SPEEDS, from_nodes, true_speeds, uniform
from ddppo_hpc.gpu.workload import GpuWorkload

MODEL_OF = {speed: model for model, speed in MODEL_SPEEDS.items() if model != "V100M16"}


def workload(jobs: list[GpuJob]) -> GpuWorkload:
    return GpuWorkload(
        id=np.array([j.id for j in jobs], dtype=np.int64),
        submit=np.array([j.submit for j in jobs], dtype=np.float64),
        runtime=np.array([j.runtime for j in jobs], dtype=np.float64),
        gpus=np.array([j.gpus for j in jobs], dtype=np.int32),
        cpu=np.array([j.cpu for j in jobs], dtype=np.float64),
        mem=np.array([j.mem for j in jobs], dtype=np.float64),
        user=np.array([j.user for j in jobs], dtype=np.int64),
    )


def cluster(machines: list[RefMachine], links=(1, 4, 16), penalty=0.05) -> Cluster:
    """A cluster whose true speeds are the machines' speeds and whose nominal speeds are
    their `nominal` (the model of that speed)."""
    m = Machines(
        rack=np.array([x.rack for x in machines]),
        gpus=np.array([x.gpus for x in machines]),
        cpu=np.array([x.cpu for x in machines], dtype=float),
        mem=np.array([x.mem for x in machines], dtype=float),
        model=tuple(MODEL_OF[x.nominal] for x in machines),
    )
    return Cluster(m, tuple(map(float, links)), penalty, speeds=tuple(x.speed for x in machines))


# The 2-machine, 4-GPU cluster of the issue: machine 0 holds GPUs 0 and 1, machine 1
# GPUs 2 and 3.
ONE_RACK = [RefMachine(0, 2), RefMachine(0, 2)]
TWO_RACKS = [RefMachine(0, 2), RefMachine(1, 2)]


def run(jobs, machines, order="fifo", placement="first_fit", penalty=0.05, seed=0, wait=False):
    c = cluster(machines, penalty=penalty)
    return simulate_gpu(workload(jobs), c, order, placement, seed, wait=wait)


@pytest.mark.parametrize(
    ("machines", "costs"),
    [(ONE_RACK, [0, 1, 3, 3]), (TWO_RACKS, [0, 1, 11, 11])],
)
def test_comm_cost_of_first_fit_placements(machines, costs):
    # one job at a time: first fit takes GPUs 0..g-1.
    # one rack:  {0,1} = 1; {0,1,2} = (1 + 4 + 4) / 3 = 3; all = (2 * 1 + 4 * 4) / 6 = 3
    # two racks: {0,1,2} = (1 + 16 + 16) / 3 = 11; all = (2 * 1 + 4 * 16) / 6 = 11
    jobs = [GpuJob(k, 100.0 * k, 10, g) for k, g in enumerate([1, 2, 3, 4])]
    r = run(jobs, machines, penalty=0)
    assert [g.tolist() for g in r.gpus] == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]]
    assert r.comm_cost.tolist() == costs


# A (0 s, 100 s, 1 GPU), B (0, 10, 2), C (1, 20, 1), D (2, 10, 3) on ONE_RACK.
JOBS = [GpuJob(1, 0, 100, 1), GpuJob(2, 0, 10, 2), GpuJob(3, 1, 20, 1), GpuJob(4, 2, 10, 3)]


def test_first_fit_schedule_by_hand():
    r = run(JOBS, ONE_RACK)
    # A on 0. B on {1, 2}: cost 4, factor 1 + 0.05 * (4 - 1) = 1.15, ends 11.5. C on 3 at 1.
    # D waits for 3 GPUs: at 11.5 only {1, 2}; at 21 {1, 2, 3}: cost (4 + 4 + 1) / 3 = 3,
    # factor 1.1, ends 21 + 11 = 32.
    assert [g.tolist() for g in r.gpus] == [[0], [1, 2], [3], [1, 2, 3]]
    assert r.start_time.tolist() == [0, 0, 1, 21]
    assert r.end_time.tolist() == pytest.approx([100, 11.5, 21, 32], abs=1e-12)
    assert r.comm_cost.tolist() == [0, 4, 0, 3]
    m = r.metrics
    assert m["avg_jct"] == pytest.approx((100 + 11.5 + 20 + 30) / 4)
    assert m["avg_queue_delay"] == pytest.approx(19 / 4)
    assert m["makespan"] == 100
    assert m["avg_comm_cost"] == pytest.approx(3.5)  # B and D
    assert m["multi_gpu_jobs"] == 2
    assert m["gpu_utilization"] == pytest.approx((100 + 2 * 11.5 + 20 + 3 * 11) / (4 * 100))


def test_best_fit_schedule_by_hand():
    r = run(JOBS, ONE_RACK, placement="best_fit")
    # B: machine 1 has 2 slots (machine 0 has 1): {2, 3}, cost 1, no penalty, ends 10.
    # C at 1: machine 0, the only one with a slot: GPU 1. D: at 10 only {2, 3}; at 21 no
    # machine has 3 slots, the rack has: machines by slots, 1 (2 slots) then 0 (1).
    assert [g.tolist() for g in r.gpus] == [[0], [2, 3], [1], [2, 3, 1]]
    assert r.start_time.tolist() == [0, 0, 1, 21]
    assert r.end_time.tolist() == pytest.approx([100, 10, 21, 32], abs=1e-12)
    assert r.metrics["avg_comm_cost"] == pytest.approx(2.0)
    assert r.metrics["avg_jct"] == pytest.approx(40.0)


def test_two_racks_pay_more():
    r = run(JOBS, TWO_RACKS)
    # B on {1, 2} across racks: cost 16, factor 1.75, ends 17.5. D at 21 on {1, 2, 3}:
    # cost (16 + 16 + 1) / 3 = 11, factor 1.5, ends 36.
    assert r.end_time.tolist() == pytest.approx([100, 17.5, 21, 36], abs=1e-12)
    assert r.comm_cost.tolist() == [0, 16, 0, 11]


def test_slowest_machine_sets_the_pace():
    machines = [RefMachine(0, 2, speed=2.0), RefMachine(0, 2, speed=0.5)]
    jobs = [GpuJob(1, 0, 10, 2), GpuJob(2, 0, 10, 1), GpuJob(3, 0, 10, 1), GpuJob(4, 50, 12, 3)]
    r = run(jobs, machines, penalty=0)
    # job 1 on machine 0 (speed 2): 5 s; jobs 2 and 3 on machine 1 (0.5): 20 s;
    # job 4 on {0, 1, 2}: the slowest is 0.5, 24 s.
    assert r.end_time.tolist() == [5, 20, 20, 74]


# Orderings: X (0 s, 50 s, 4 GPUs, user 0) holds everything until 50; Y (30 s, 2 GPUs,
# user 0), Z (10 s, 2, user 1) and W (5 s, 4, user 1) arrive together at 1, so the first
# pick, at 1, sees all three. No communication penalty.
ORDER_JOBS = [
    GpuJob(1, 0, 50, 4, user=0),
    GpuJob(2, 1, 30, 2, user=0),
    GpuJob(3, 1, 10, 2, user=1),
    GpuJob(4, 1, 5, 4, user=1),
]


@pytest.mark.parametrize(
    ("order", "starts"),
    [
        ("fifo", [0, 50, 50, 80]),  # Y 50-80 and Z 50-60 side by side, W after Y
        ("srtf", [0, 55, 55, 50]),  # W (5 s) first, then Z and Y together
        # at 1 user 0 has 4 * 1 GPU-s, user 1 none: Z (tie with W, queue order), 50-60;
        # at 50 user 0 has 200, user 1 0: W is committed and waits for Z; Y last.
        ("las", [0, 65, 50, 60]),
    ],
)
def test_orderings_by_hand(order, starts):
    r = run(ORDER_JOBS, ONE_RACK, order=order, penalty=0)
    assert r.start_time.tolist() == starts


def fast(rack, gpus, speed):
    """A machine whose nominal and true speeds are `speed`."""
    return RefMachine(rack, gpus, speed=speed, nominal=speed)


@pytest.mark.parametrize(
    ("machines", "g", "best", "speedy", "ends"),
    [
        # one machine holds the job: best_fit the fewest slots (a tie: machine 0, 0.6),
        # speed_fit the fastest (machine 1, 1.6)
        ([fast(0, 2, 0.6), fast(0, 2, 1.6)], 1, [0], [2], [150, 56.25]),
        # no machine holds 3, both racks do (4 slots each): best_fit rack 0, pace 0.45;
        # speed_fit the rack of the higher pace, rack 1 (0.6; rack 0: 1.0 holds only 2)
        (
            [fast(0, 2, 1.0), fast(0, 2, 0.45), fast(1, 2, 0.6), fast(1, 2, 0.6)],
            3,
            [0, 1, 2],
            [4, 5, 6],
            [200, 150],
        ),  # fmt: skip
        # no rack holds 4: best_fit machines 0 and 1 (pace 0.45); speed_fit's pace is 1.0
        # (machines 2 and 0 hold 4), so it takes machines 0 and 2, leaving the T4 out
        (
            [fast(0, 2, 1.0), fast(1, 2, 0.45), fast(2, 2, 1.6)],
            4,
            [0, 1, 2, 3],
            [0, 1, 4, 5],
            [200, 90],
        ),  # fmt: skip
    ],
)
def test_speed_fit_takes_the_fastest_compact_gpus(machines, g, best, speedy, ends):
    # 90 s on the slowest machine of each placement, no communication penalty
    jobs = [GpuJob(1, 0, 90, g)]
    r = run(jobs, machines, placement="best_fit", penalty=0)
    s = run(jobs, machines, placement="speed_fit", penalty=0)
    assert [r.gpus[0].tolist(), s.gpus[0].tolist()] == [best, speedy]
    assert [r.end_time[0], s.end_time[0]] == pytest.approx(ends)


def test_the_wait_rule_by_hand():
    # J1 (0 s, 100 s, 3 GPUs), J2 (1 s, 10 s, 2 GPUs), J3 (2 s, 50 s, 1 GPU). srtf + best_fit
    # commits J2 at 1 s, which blocks J3 until J1 ends at 110 s; the wait rule waits at 1 s
    # (nothing fits), starts J3 at 2 s and J2 at 110 s.
    jobs = [GpuJob(1, 0, 100, 3), GpuJob(2, 1, 10, 2), GpuJob(3, 2, 50, 1)]
    # J1 on {0, 1, 2}: cost 3, factor 1.1, ends at 110 s
    assert run(jobs, ONE_RACK, "srtf", "best_fit").start_time == pytest.approx([0, 110, 110])
    r = run(jobs, ONE_RACK, "srtf", "best_fit", wait=True)
    assert r.start_time == pytest.approx([0, 110, 2])
    assert r.end_time == pytest.approx([110, 120, 52])


def test_the_wait_rule_looks_past_the_first_jobs():
    # X (0 s, 100 s, 3 GPUs) runs; 40 jobs of 2 GPUs wait, then one of 1 GPU (longest):
    # only the last fits, beyond any 32 jobs an observation shows
    jobs = [GpuJob(0, 0, 100, 3)] + [GpuJob(k, 1, 10, 2) for k in range(1, 41)]
    jobs.append(GpuJob(41, 1, 500, 1))
    r = run(jobs, ONE_RACK, "srtf", "best_fit", wait=True)
    assert r.start_time[41] == 1


def test_cpu_and_memory_shares_limit_a_machine():
    machines = [RefMachine(0, 4, cpu=8000, mem=100), RefMachine(0, 4, cpu=64000, mem=1000)]
    # 4 GPUs asking 16000 milli-cores: 4000 a GPU, so machine 0 holds 2 of them.
    r = run([GpuJob(1, 0, 10, 4, cpu=16000, mem=40)], machines)
    assert r.gpus[0].tolist() == [0, 1, 4, 5]
    r = run([GpuJob(1, 0, 10, 4, cpu=16000, mem=40)], machines, placement="best_fit")
    assert r.gpus[0].tolist() == [4, 5, 6, 7]


def test_random_placement_is_seeded():
    jobs = [GpuJob(k, k, 100, 2) for k in range(6)]
    a, b = (run(jobs, ONE_RACK * 2, placement="random", seed=s) for s in (1, 1))
    assert [g.tolist() for g in a.gpus] == [g.tolist() for g in b.gpus]
    others = [run(jobs, ONE_RACK * 2, placement="random", seed=s) for s in range(2, 6)]
    assert any([g.tolist() for g in o.gpus] != [g.tolist() for g in a.gpus] for o in others)


def test_jobs_that_never_fit_are_dropped_and_counted():
    c = cluster(ONE_RACK)
    w = workload([GpuJob(1, 0, 10, 5), GpuJob(2, 0, 10, 4), GpuJob(3, 1, 1, 1, cpu=1.0)])
    fitted = w.fitted(c.machines)  # machines without CPU: a job asking CPU never fits
    assert fitted.id.tolist() == [2]
    assert fitted.dropped == {"too_large": 2}
    with pytest.raises(ValueError, match="job 1 does not fit the empty cluster"):
        simulate_gpu(w, c)


def test_topologies():
    m = uniform(2, 4, 8, ("V100M32", "P100"))
    assert m.rack.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert m.total_gpus == 64
    assert m.nominal_speeds().tolist() == [1.0, 0.6] * 4
    assert true_speeds(m, 0.0, 5).tolist() == m.nominal_speeds().tolist()
    noisy = true_speeds(m, 0.2, 5)
    assert np.array_equal(noisy, true_speeds(m, 0.2, 5))
    assert not np.array_equal(noisy, m.nominal_speeds())
    nodes = [
        {"name": "a", "cpu_milli": 1, "memory_mib": 2, "gpus": 2, "model": "T4"},
        {"name": "b", "cpu_milli": 1, "memory_mib": 2, "gpus": 0, "model": ""},
        {"name": "c", "cpu_milli": 1, "memory_mib": 2, "gpus": 8, "model": "G3"},
        {"name": "d", "cpu_milli": 1, "memory_mib": 2, "gpus": 1, "model": "X"},
    ]
    n = from_nodes(nodes, 2)
    assert n.gpus.tolist() == [2, 8, 1] and n.rack.tolist() == [0, 0, 1]
    assert n.nominal_speeds().tolist() == [0.45, 1.6, 1.0]
    with pytest.raises(ValueError, match="link costs"):
        Cluster(m, (4.0, 1.0, 16.0)).core()


@st.composite
def small_case(draw):
    machines = [
        RefMachine(
            rack=draw(st.integers(0, 2)),
            gpus=draw(st.integers(1, 4)),
            speed=draw(st.sampled_from([0.5, 1.0, 2.0])),
            cpu=float(draw(st.sampled_from([0, 12, 24]))),
            mem=float(draw(st.sampled_from([0, 12, 24]))),
            nominal=draw(st.sampled_from([0.6, 1.0, 1.6])),
        )
        for _ in range(draw(st.integers(1, 5)))
    ]
    total = sum(m.gpus for m in machines)
    submit, jobs = 0.0, []
    for k in range(draw(st.integers(1, 14))):
        submit += draw(st.sampled_from([0, 0, 1, 5, 20]))
        gpus = draw(st.integers(1, total))
        share = draw(st.sampled_from([0, 0, 1, 3]))  # integer shares: exact arithmetic
        runtime = float(draw(st.sampled_from([0, 1, 7, 30, 100])))
        user = draw(st.integers(0, 2))
        jobs.append(GpuJob(k, submit, runtime, gpus, share * gpus, share * gpus, user))
    return machines, jobs


@settings(max_examples=300, deadline=None)
@given(
    small_case(),
    st.sampled_from(["fifo", "srtf", "las"]),
    st.sampled_from(["first_fit", "best_fit", "random", "speed_fit"]),
    st.integers(0, 2**63),
    st.sampled_from(["", "wait", "hold"]),
)
def test_cpp_matches_reference(case, order, placement, seed, rule):
    machines, jobs = case
    c = cluster(machines, links=(1, 3, 9), penalty=0.25)
    w = workload(jobs)
    fits = c.machines.fits_empty(w.gpus, w.cpu, w.mem)
    jobs = [j for j, ok in zip(jobs, fits) if ok]
    if not jobs:
        return
    wait, hold = rule == "wait", rule == "hold"
    r = simulate_gpu(workload(jobs), c, order, placement, seed, wait=wait, hold=hold)
    expected = simulate_reference(
        jobs, machines, order, placement, seed, (1, 3, 9), 0.25, wait, hold
    )
    got = {
        j.id: (s, e, cost, g.tolist())
        for j, s, e, cost, g in zip(jobs, r.start_time, r.end_time, r.comm_cost, r.gpus)
    }
    assert got == expected


@settings(max_examples=100, deadline=None)
@given(small_case(), st.sampled_from(["fifo", "srtf", "las"]), st.booleans())
def test_speed_fit_is_best_fit_on_one_speed(case, order, wait):
    machines, jobs = case
    machines = [replace(m, nominal=1.0) for m in machines]
    c = cluster(machines)
    w = workload(jobs)
    fits = c.machines.fits_empty(w.gpus, w.cpu, w.mem)
    if not fits.any():
        return
    w = workload([j for j, ok in zip(jobs, fits) if ok])
    a, b = (simulate_gpu(w, c, order, p, wait=wait) for p in ("best_fit", "speed_fit"))
    assert [g.tolist() for g in a.gpus] == [g.tolist() for g in b.gpus]
