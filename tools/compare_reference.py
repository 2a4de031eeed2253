"""Compares the C++ simulator's start times with the Python reference's on random real windows.

Each case draws a shared real trace, a load (native, or submit times scaled down: long queues),
a window and a policy x backfill x runtime estimate, and runs it in both the C++ simulator and
the pure-Python reference (tests/reference_sim.py), for as long as asked: every job must start
at the same time in both.

    python tools/compare_reference.py [--seconds 600] [--seed 0] [--window 700]
        [--traces ../shared/traces] [--policies ...] [--backfills ...] [--estimates ...]

Prints every case that differs (and how many jobs do) and a summary; exits 1 if any differs.
The test suite runs fixed windows; this is for a change to the simulator's scans, before it
lands. The reference plans conservative backfilling from scratch at every scan: a window of 700
jobs at submit x 0.25 can take it 20 s, so larger windows test fewer cases.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from reference_sim import simulate as simulate_py  # noqa: E402
from simhelpers import jobs_of, traces_dir  # noqa: E402

from ddppo_hpc.args import names  # noqa: E402
from ddppo_hpc.data import read_swf  # noqa: E402
from ddppo_hpc.data.source import at_load  # noqa: E402
from ddppo_hpc.sim import BACKFILLS, ESTIMATES, POLICIES, simulate  # noqa: E402

TRACES = (
    "LANL-CM5-1994-4.1-cln.swf.gz",
    "KTH-SP2-1996-2.1-cln.swf.gz",
    "lublin_256.swf.gz",
    "HPC2N-2002-excerpt-3170.swf.gz",
)
SCALES = (1.0, 0.7, 0.5, 0.35, 0.25)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", type=Path, default=traces_dir(), help="folder of the SWF logs")
    p.add_argument("--seconds", type=float, default=600, help="how long to draw cases")
    p.add_argument("--seed", type=int, default=0, help="of the draws")
    p.add_argument("--window", type=int, default=700, help="jobs a case")
    p.add_argument("--policies", type=names(POLICIES), default=list(POLICIES), help="to draw from")
    p.add_argument("--backfills", type=names(BACKFILLS), default=list(BACKFILLS), help="likewise")
    p.add_argument("--estimates", type=names(ESTIMATES), default=list(ESTIMATES), help="likewise")
    args = p.parse_args()
    found = [args.traces / name for name in TRACES if (args.traces / name).exists()]
    if not found:
        p.error(f"none of {', '.join(TRACES)} is in {args.traces} (--traces)")
    native = {path.name: read_swf(path) for path in found}
    loads = {}
    rng = random.Random(args.seed)
    cases = differ = 0
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        name, scale = rng.choice(sorted(native)), rng.choice(SCALES)
        if (name, scale) not in loads:
            loads[name, scale] = native[name] if scale == 1 else at_load(native[name], scale)
        trace = loads[name, scale]
        jobs = min(args.window, len(trace))
        begin = rng.randrange(len(trace) - jobs + 1)
        policy, backfill = rng.choice(args.policies), rng.choice(args.backfills)
        estimate = rng.choice(args.estimates)
        got = simulate(trace, policy, backfill, begin, jobs, estimate).start_time.tolist()
        expected = simulate_py(
            jobs_of(trace, begin, begin + jobs), trace.machine_procs, policy, backfill,
            estimate=estimate,
        )  # fmt: skip
        ids = trace.id[begin : begin + jobs].tolist()
        wrong = sum(expected[i] != t for i, t in zip(ids, got))
        cases += 1
        if wrong:
            differ += 1
            print(
                f"DIFFERS: {name} x {scale}, jobs {begin}-{begin + jobs}, {policy} + {backfill}"
                f" on {estimate}: {wrong} of {jobs} start times",
                flush=True,
            )
    print(f"{cases} cases in {time.monotonic() - start:.0f} s, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
