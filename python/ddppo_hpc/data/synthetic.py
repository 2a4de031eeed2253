"""The embedded default workload: seeded synthetic jobs after the Lublin-Feitelson model.

Sizes, runtimes and the daily arrival cycle follow U. Lublin and D. G. Feitelson, "The
workload on parallel supercomputers: modeling the characteristics of rigid jobs", JPDC
63(11):1105-1122, 2003, with the "whole sample" (no batch/interactive split) parameters of
the authors' reference generator, lublin99.c. The time axis of the arrivals is scaled so
that the offered load is `TARGET_LOAD` on any machine size (Lublin's own advice for changing
the load is to stretch the inter-arrival times). User estimates follow Tsafrir, Etsion and
Feitelson, "Modeling user runtime estimates", JSSPP 2005; users are Zipf-like.

    python -m ddppo_hpc.data.synthetic --jobs 10000 --out synthetic.swf
"""

from __future__ import annotations

import argparse
import operator
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ddppo_hpc.data.trace import Trace, clean
from ddppo_hpc.io import atomic_write

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
# uniform, so the estimate is runtime / U(MIN_ACCURACY, 1) rounded up to the next popular
# value; MAX_ESTIMATE_PROB of the jobs just ask for the largest, which is MAX_RUNTIME.
ESTIMATE_VALUES = np.array([5, 15, 30, 60, 120, 240, 480, 720, 1440, 2160]) * 60
MIN_ACCURACY = 0.05
MAX_ESTIMATE_PROB = 0.15

# Users (ours; Lublin's model has none): user k in 1..USERS submits with weight
# 1 / k ** ZIPF_EXPONENT; group = user % GROUPS; one queue, 0.
USERS = 64
ZIPF_EXPONENT = 1.0
GROUPS = 8


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


def _sizes(rng: np.random.Generator, n: int, machine_procs: int) -> np.ndarray:
    u = rng.random(n)
    uhi = max(np.log2(machine_procs), ULOW)  # tiny machines: sizes are clipped below
    umed = max(uhi - UMED_GAP, ULOW)
    low_stage = rng.random(n) < UPROB
    log_size = np.where(low_stage, rng.uniform(ULOW, umed, n), rng.uniform(umed, uhi, n))
    log_size = np.where(u < SERIAL_PROB + POW2_PROB, np.rint(log_size), log_size)
    sizes = np.rint(np.exp2(log_size))
    sizes[u < SERIAL_PROB] = 1
    return np.clip(sizes, 1, machine_procs).astype(np.int64)


def _runtimes(rng: np.random.Generator, procs: np.ndarray) -> np.ndarray:
    n = len(procs)
    short = rng.random(n) < np.clip(PA * procs + PB, 0.0, 1.0)
    log_runtime = np.where(short, rng.gamma(A1, B1, n), rng.gamma(A2, B2, n))
    runtime = np.floor(np.exp(np.minimum(log_runtime, np.log(MAX_RUNTIME))))
    return np.clip(runtime, 1, MAX_RUNTIME)


def _requested_times(rng: np.random.Generator, runtime: np.ndarray) -> np.ndarray:
    n = len(runtime)
    wish = runtime / rng.uniform(MIN_ACCURACY, 1.0, n)
    rounded = np.searchsorted(ESTIMATE_VALUES, wish)  # first popular value >= wish
    rounded[rng.random(n) < MAX_ESTIMATE_PROB] = len(ESTIMATE_VALUES) - 1
    return ESTIMATE_VALUES[np.minimum(rounded, len(ESTIMATE_VALUES) - 1)].astype(np.float64)


def _users(rng: np.random.Generator, n: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, USERS + 1) ** ZIPF_EXPONENT
    return rng.choice(USERS, size=n, p=weights / weights.sum()) + 1


def _submits(rng: np.random.Generator, n: int, work: float, machine_procs: int) -> np.ndarray:
    """Lublin's arrivals from midnight, scaled so the offered load is about TARGET_LOAD."""
    gaps = np.exp(np.minimum(rng.gamma(AARR * ARAR, BARR, n - 1), MAX_LOG_GAP))
    points = np.concatenate(([0.0], np.cumsum(gaps) / BUCKET_SECONDS))
    if points[-1] > 0:  # a day is BUCKETS points, so the span is points[-1] buckets
        points *= work / (machine_procs * TARGET_LOAD * BUCKET_SECONDS) / points[-1]
    days, rest = np.divmod(points, BUCKETS)
    bucket = np.minimum(np.searchsorted(_CUMULATIVE, rest, side="right") - 1, BUCKETS - 1)
    within = (rest - _CUMULATIVE[bucket]) / _WEIGHTS[bucket]
    seconds = np.floor((days * BUCKETS + bucket + within) * BUCKET_SECONDS)
    return np.maximum.accumulate(seconds)  # rounding must not reorder neighbours


def generate(jobs: int, machine_procs: int = 256, seed: int = 0) -> Trace:
    """`jobs` synthetic jobs (ids 1..jobs, first submit 0) for a machine of `machine_procs`.

    The same arguments give the same trace for a given NumPy (NumPy keeps PCG64 stable, but
    may change how a Generator draws from a distribution between feature releases).
    """
    for name, value, least in (
        ("jobs", jobs, 1),
        ("machine_procs", machine_procs, 1),
        ("seed", seed, 0),
    ):
        if operator.index(value) < least:
            raise ValueError(f"{name} must be an integer >= {least}, not {value}")
    rng = np.random.Generator(np.random.PCG64(seed))
    procs = _sizes(rng, jobs, machine_procs)
    runtime = _runtimes(rng, procs)
    columns = {
        "id": np.arange(1, jobs + 1),
        "runtime": runtime,
        "allocated_procs": procs,
        "requested_procs": procs,
        "requested_time": _requested_times(rng, runtime),
        "user": _users(rng, jobs),
    }
    columns["group"] = columns["user"] % GROUPS
    columns["queue"] = np.zeros(jobs, dtype=np.int64)
    columns["submit"] = _submits(rng, jobs, float(np.dot(procs, runtime)), machine_procs)
    return clean(
        columns,
        machine_procs=machine_procs,
        source=f"synthetic:lublin(jobs={jobs},procs={machine_procs},seed={seed})",
    )


def _swf_table(trace: Trace) -> np.ndarray:
    """The 18 SWF fields of every job; -1 for the unknown ones, status 1 (completed)."""
    table = np.full((len(trace), 18), -1.0)
    table[:, 0] = trace.id
    table[:, 1] = trace.submit
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


def _at_least(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}, not {value}")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Write a seeded synthetic workload (Lublin-Feitelson 2003 model, "
        f"offered load ~{TARGET_LOAD}) as a Standard Workload Format file.",
        epilog=f"example: {PROG} --jobs 10000 --procs 256 --seed 0 --out synthetic.swf",
    )
    parser.add_argument("--jobs", type=_at_least(1), required=True, help="number of jobs")
    parser.add_argument(
        "--procs", type=_at_least(1), default=256, help="machine size in processors (default: 256)"
    )
    parser.add_argument(
        "--seed",
        type=_at_least(0),
        default=0,
        help="random seed; the same seed gives the same file (default: 0)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the .swf file to write")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    trace = generate(args.jobs, machine_procs=args.procs, seed=args.seed)
    try:
        write_swf(trace, args.out)
    except OSError as e:
        print(f"{PROG}: error: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
        return 1
    span = trace.submit[-1] - trace.submit[0]
    load = np.dot(trace.procs, trace.runtime) / (args.procs * span) if span > 0 else 0.0
    print(
        f"wrote {len(trace)} jobs to {args.out} ({args.procs} procs, seed {args.seed}, "
        f"{span / 86400:.1f} days, offered load {load:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
