"""The embedded default workload: seeded synthetic jobs after the Lublin-Feitelson model.

Sizes, runtimes and the daily arrival cycle follow U. Lublin and D. G. Feitelson, "The
workload on parallel supercomputers: modeling the characteristics of rigid jobs", JPDC
63(11):1105-1122, 2003, with the "whole sample" (no batch/interactive split) parameters of
the authors' reference generator, lublin99.c. User estimates follow Tsafrir, Etsion and
Feitelson, "Modeling user runtime estimates", JSSPP 2005.

Users (ours; Lublin's model has none): user k in 1..users submits a job with probability
proportional to 1 / k ** ZIPF_EXPONENT, so a few users submit most jobs; group =
(user - 1) % GROUPS; one queue, 0. Each user has habits, drawn once from the seed before any
job: a preferred size (a Lublin size rounded to a power of two), which a job takes with
probability HABIT_PROB (else it gets a fresh Lublin size); a runtime scale, log-normal with
median 1 and log-sigma RUNTIME_SIGMA, multiplying the Lublin runtime; and an estimate
accuracy, uniform on [MIN_ACCURACY, 1], each job's accuracy being uniform within
ACCURACY_SPREAD of it (clipped to [MIN_ACCURACY, 1]).

Jobs come in chunks of CHUNK_JOBS (the last one shorter), so any number of jobs takes
bounded memory. The arrivals of each chunk follow Lublin's model with its daily cycle, the
time axis stretched so that the chunk's work over the time it spans is `TARGET_LOAD` of the
machine (Lublin's own advice for changing the load is to stretch the inter-arrival times);
the next chunk starts where the last one's time ends, so the offered load is about
`TARGET_LOAD` for any number of jobs and machine size. The chunk size is fixed: the jobs
depend only on (jobs, machine_procs, users, seed).

    python -m ddppo_hpc.data.synthetic --jobs 10000 --users 64 --out synthetic.swf
"""

from __future__ import annotations

import argparse
import operator
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ddppo_hpc.args import SEED_MAX, bounded_int, run
from ddppo_hpc.data.trace import Trace, clean
from ddppo_hpc.io import atomic_write

CHUNK_JOBS = 1 << 20  # fixed: the jobs must not depend on how they are consumed

# Job sizes (Lublin & Feitelson 2003; lublin99.c SERIAL_PROB .. UPROB): a job is
# serial with probability SERIAL_PROB; otherwise log2(size) is a two-stage uniform on
# [ULOW, UMED] (probability UPROB) or [UMED, UHI], UHI = log2(machine procs) and
# UMED = UHI - UMED_GAP; it is rounded to an integer (a power-of-two size) for a further
# POW2_PROB of all jobs (0.576 / 0.756: three parallel jobs in four).
SERIAL_PROB = 0.244
POW2_PROB = 0.576
ULOW = 0.8
UMED_GAP = 2.5
UPROB = 0.86

# Runtimes (Lublin & Feitelson 2003; lublin99.c A1 .. PB): log(runtime) is hyper-gamma,
# gamma(A1, B1) (short jobs) with probability p = PA * procs + PB clipped to [0, 1], else
# gamma(A2, B2); PA < 0, so bigger jobs run longer. Capped at MAX_RUNTIME (lublin99.c:
# exp(12), ~45 h).
A1, B1 = 4.2, 0.94
A2, B2 = 312.0, 0.03
PA, PB = -0.0054, 0.78
MAX_RUNTIME = 36 * 3600

# Arrivals (Lublin & Feitelson 2003; lublin99.c AARR .. ARAR, CYCLIC_DAY_START,
# TOO_MUCH_ARRIVE_TIME): the day has BUCKETS half-hours; bucket k (from midnight) gets
# weight cdf(i + 0.5) - cdf(i - 0.5) of gamma(ANUM, BNUM), i = k + 1 taken cyclically in
# [CYCLE_START, CYCLE_START + BUCKETS), normalised to mean 1: few jobs around 5:00, a peak
# around 14:00. log(gap) ~ gamma(AARR * ARAR, BARR), at most MAX_LOG_GAP, is spent as
# gap / BUCKET_SECONDS points, each bucket costing its weight, so busy buckets get more jobs.
ANUM, BNUM = 8.1737, 3.9631
AARR, BARR, ARAR = 10.2303, 0.4871, 1.0225
MAX_LOG_GAP = 13.0
BUCKETS = 48
BUCKET_SECONDS = 24 * 3600 // BUCKETS
CYCLE_START = 11

# Offered load sum(procs * runtime) / (machine procs * span) the arrivals are scaled to
# (ours, not the paper's): high enough that scheduling matters, below saturation.
TARGET_LOAD = 0.75

# User estimates (Tsafrir, Etsion & Feitelson 2005): accuracy runtime / estimate is roughly
# uniform, so the estimate is runtime / accuracy rounded up to the next popular value;
# MAX_ESTIMATE_PROB of the jobs just ask for the largest, which is MAX_RUNTIME.
ESTIMATE_VALUES = np.array([5, 15, 30, 60, 120, 240, 480, 720, 1440, 2160]) * 60
MIN_ACCURACY = 0.05
MAX_ESTIMATE_PROB = 0.15

# Users and their habits (ours; see the module docstring). USERS is the default count.
USERS = 64
ZIPF_EXPONENT = 1.0
GROUPS = 8
HABIT_PROB = 0.6
RUNTIME_SIGMA = 1.0
ACCURACY_SPREAD = 0.2


def _daily_weights() -> np.ndarray:
    """The weight of each half-hour bucket from midnight, mean 1 (lublin99.c arrive_init)."""
    i = np.arange(CYCLE_START, CYCLE_START + BUCKETS)
    x = i[:, None] + (np.arange(64) + 0.5) / 64 - 0.5  # midpoint rule over [i - .5, i + .5]
    mass = (x ** (ANUM - 1) * np.exp(-x / BNUM)).mean(axis=1)  # gamma pdf, unnormalised
    weights = np.empty(BUCKETS)
    weights[(i - 1) % BUCKETS] = mass
    return weights / weights.mean()


_WEIGHTS = _daily_weights()
_CUMULATIVE = np.concatenate(([0.0], np.cumsum(_WEIGHTS)))


class _Habits(NamedTuple):
    """Per user (index user - 1): the chance to submit a job, and the habits."""

    activity: np.ndarray
    size: np.ndarray
    runtime_scale: np.ndarray
    accuracy: np.ndarray


def _habits(rng: np.random.Generator, users: int, machine_procs: int) -> _Habits:
    weights = 1.0 / np.arange(1, users + 1) ** ZIPF_EXPONENT
    largest_pow2 = 1 << (int(machine_procs).bit_length() - 1)
    size = np.exp2(np.rint(np.log2(_lublin_sizes(rng, users, machine_procs))))
    return _Habits(
        activity=weights / weights.sum(),
        size=np.minimum(size, largest_pow2).astype(np.int32),
        runtime_scale=rng.lognormal(0.0, RUNTIME_SIGMA, users),
        accuracy=rng.uniform(MIN_ACCURACY, 1.0, users),
    )


def _lublin_sizes(rng: np.random.Generator, n: int, machine_procs: int) -> np.ndarray:
    u = rng.random(n)
    uhi = max(np.log2(machine_procs), ULOW)  # tiny machines: sizes are clipped below
    umed = max(uhi - UMED_GAP, ULOW)
    low_stage = rng.random(n) < UPROB
    log_size = np.where(low_stage, rng.uniform(ULOW, umed, n), rng.uniform(umed, uhi, n))
    log_size = np.where(u < SERIAL_PROB + POW2_PROB, np.rint(log_size), log_size)
    sizes = np.rint(np.exp2(log_size))
    sizes[u < SERIAL_PROB] = 1
    return np.clip(sizes, 1, machine_procs).astype(np.int32)


def _sizes(rng: np.random.Generator, preferred: np.ndarray, machine_procs: int) -> np.ndarray:
    """The user's preferred size with probability HABIT_PROB, else a Lublin size."""
    sizes = preferred.copy()
    fresh = rng.random(len(sizes)) >= HABIT_PROB
    sizes[fresh] = _lublin_sizes(rng, int(fresh.sum()), machine_procs)
    return sizes


def _runtimes(rng: np.random.Generator, procs: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Lublin's hyper-gamma runtime for the size, times the user's scale."""
    short = rng.random(len(procs)) < np.clip(PA * procs + PB, 0.0, 1.0)
    log_runtime = np.empty(len(procs))
    log_runtime[short] = rng.gamma(A1, B1, int(short.sum()))
    log_runtime[~short] = rng.gamma(A2, B2, len(procs) - int(short.sum()))
    runtime = np.exp(np.minimum(log_runtime, np.log(MAX_RUNTIME))) * scale
    return np.clip(np.floor(runtime), 1, MAX_RUNTIME)


def _requested_times(
    rng: np.random.Generator, runtime: np.ndarray, accuracy: np.ndarray
) -> np.ndarray:
    """runtime / accuracy (the user's, +- ACCURACY_SPREAD) up to the next popular value."""
    n = len(runtime)
    spread = rng.uniform(-ACCURACY_SPREAD, ACCURACY_SPREAD, n)
    wish = runtime / np.clip(accuracy + spread, MIN_ACCURACY, 1.0)
    rounded = np.searchsorted(ESTIMATE_VALUES, wish)  # first popular value >= wish
    rounded[rng.random(n) < MAX_ESTIMATE_PROB] = len(ESTIMATE_VALUES) - 1
    return ESTIMATE_VALUES[np.minimum(rounded, len(ESTIMATE_VALUES) - 1)].astype(np.float64)


def _arrival_points(
    rng: np.random.Generator, n: int, work: float, machine_procs: int, start: float
) -> tuple[np.ndarray, float]:
    """Lublin's arrivals of n jobs from `start` (in points), and where the next ones start.

    The n gaps (the last one leads to the next chunk) are scaled to span work /
    (machine_procs * TARGET_LOAD) seconds, as points: a day is BUCKETS points.
    """
    gaps = np.exp(np.minimum(rng.gamma(AARR * ARAR, BARR, n), MAX_LOG_GAP))
    ends = np.cumsum(gaps)
    span = work / (machine_procs * TARGET_LOAD * BUCKET_SECONDS)
    points = np.concatenate(([0.0], ends[:-1]))
    points *= span / ends[-1]
    points += start
    return points, start + span


def _seconds(points: np.ndarray, earliest: float) -> np.ndarray:
    """Whole seconds from midnight of `points`, at least `earliest`, non-decreasing."""
    days, rest = np.divmod(points, BUCKETS)
    bucket = np.minimum(np.searchsorted(_CUMULATIVE, rest, side="right") - 1, BUCKETS - 1)
    within = (rest - _CUMULATIVE[bucket]) / _WEIGHTS[bucket]
    seconds = np.floor((days * BUCKETS + bucket + within) * BUCKET_SECONDS)
    seconds[0] = max(seconds[0], earliest)
    return np.maximum.accumulate(seconds)  # rounding must not reorder neighbours


def _chunks(
    rng: np.random.Generator, jobs: int, machine_procs: int, users: int
) -> Iterator[dict[str, np.ndarray]]:
    habits = _habits(rng, users, machine_procs)
    start, last_submit = 0.0, 0.0
    for first in range(0, jobs, CHUNK_JOBS):
        n = min(CHUNK_JOBS, jobs - first)
        user = rng.choice(users, size=n, p=habits.activity).astype(np.int64, copy=False)
        procs = _sizes(rng, habits.size[user], machine_procs)
        runtime = _runtimes(rng, procs, habits.runtime_scale[user])
        requested_time = _requested_times(rng, runtime, habits.accuracy[user])
        work = float(np.dot(procs.astype(np.float64), runtime))
        points, start = _arrival_points(rng, n, work, machine_procs, start)
        submit = _seconds(points, last_submit)
        last_submit = float(submit[-1])
        yield {
            "id": np.arange(first + 1, first + n + 1, dtype=np.int64),
            "submit": submit,
            "runtime": runtime,
            "requested_time": requested_time,
            "procs": procs,
            "user": user + 1,
            "group": user % GROUPS,  # (user id - 1) % GROUPS
            "queue": np.zeros(n, dtype=np.int64),
        }


def generate_chunks(
    jobs: int, machine_procs: int = 256, users: int = USERS, seed: int = 0
) -> Iterator[dict[str, np.ndarray]]:
    """`jobs` synthetic jobs for a machine of `machine_procs`, in chunks of <= CHUNK_JOBS.

    Each chunk maps the core columns (`id` 1..jobs, `submit`, `runtime`, `requested_time`,
    `procs` int32, `user` 1..users, `group`, `queue`) to arrays, in submit order across
    chunks, the first job at 0. The same arguments give the same chunks for a given NumPy
    (NumPy keeps PCG64 stable, but may change how a Generator draws from a distribution
    between feature releases).
    """
    for name, value, least in (
        ("jobs", jobs, 1),
        ("machine_procs", machine_procs, 1),
        ("users", users, 1),
        ("seed", seed, 0),
    ):
        if operator.index(value) < least:
            raise ValueError(f"{name} must be an integer >= {least}, not {value}")
    rng = np.random.Generator(np.random.PCG64(seed))
    return _chunks(rng, jobs, machine_procs, users)


def generate(jobs: int, machine_procs: int = 256, seed: int = 0, users: int = USERS) -> Trace:
    """All of `generate_chunks` as one cleaned Trace: for small traces (demo, simulator CLI)."""
    chunks = list(generate_chunks(jobs, machine_procs, users, seed))
    columns = {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}
    columns["allocated_procs"] = columns["requested_procs"] = columns.pop("procs")
    return clean(
        columns,
        machine_procs=machine_procs,
        source=f"synthetic:lublin(jobs={jobs},procs={machine_procs},users={users},seed={seed})",
    )


def _swf_table(trace: Trace) -> np.ndarray:
    """The 18 SWF fields of every job; -1 for the unknown ones, status 1 (completed)."""
    table = np.full((len(trace), 18), -1.0)
    table[:, 0] = trace.id
    table[:, 1] = trace.submit
    table[:, 2] = trace.wait_time
    table[:, 3] = trace.runtime
    table[:, 4] = table[:, 7] = trace.procs
    table[:, 8] = trace.requested_time
    table[:, 10] = 1
    table[:, 11] = trace.user
    table[:, 12] = trace.group
    table[:, 14] = trace.queue
    return table


def write_swf(trace: Trace, path: str | Path) -> None:
    """Writes `trace` as an SWF file, atomically (a temporary file, then os.replace)."""
    path = Path(path)
    source = " ".join(trace.source.split())
    header = (
        "; Version: 2.2\n"
        "; Computer: synthetic\n"
        f"; MaxJobs: {len(trace)}\n"
        f"; MaxRecords: {len(trace)}\n"
        f"; MaxProcs: {trace.machine_procs}\n"
        f"; Note: generated by ddppo-hpc from {source}\n"
    )
    with atomic_write(path) as f:
        f.write(header)
        np.savetxt(f, _swf_table(trace), fmt="%.17g")  # integers print as integers


PROG = "python -m ddppo_hpc.data.synthetic"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the whole usage block
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Write a seeded synthetic multi-user workload (Lublin-Feitelson 2003 model, "
        f"offered load ~{TARGET_LOAD}) as a Standard Workload Format file.",
        epilog=f"example: {PROG} --jobs 10000 --procs 256 --users 64 --seed 0 --out synthetic.swf",
    )
    parser.add_argument("--jobs", type=bounded_int(1), required=True, help="number of jobs")
    parser.add_argument(
        "--procs",
        type=bounded_int(1),
        default=256,
        help="machine size in processors (default: 256)",
    )
    parser.add_argument(
        "--users", type=bounded_int(1), default=USERS, help=f"number of users (default: {USERS})"
    )
    parser.add_argument(
        "--seed",
        type=bounded_int(0, SEED_MAX),
        default=0,
        help="random seed; the same seed gives the same file (default: 0)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the .swf file to write")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    trace = generate(args.jobs, machine_procs=args.procs, seed=args.seed, users=args.users)
    try:
        write_swf(trace, args.out)
    except OSError as e:  # OutputError: the file and why
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    span = trace.submit[-1] - trace.submit[0]
    load = np.dot(trace.procs, trace.runtime) / (args.procs * span) if span > 0 else 0.0
    print(
        f"wrote {len(trace)} jobs to {args.out} ({args.procs} procs, {args.users} users, "
        f"seed {args.seed}, {span / 86400:.1f} days, offered load {load:.2f})"
    )
    return 0


if __name__ == "__main__":
    run(main)
