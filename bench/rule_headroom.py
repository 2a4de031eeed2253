"""How far choosing a rule at every decision can go: a rule switcher against the best
heuristic on bench/quality.py's test windows (issue 15), clairvoyant or seeing less.

    python bench/rule_headroom.py [--traces ../shared/traces] [--windows 20] [--jobs 1024]
                                  [--wait] [--sees all|runtimes|arrivals|present]

The switcher is configs/multi-trace.yaml's environment with order actions over 12 rules
(every order x {easy, conservative}, on its EASY++ predictions) that takes, at every
decision, the argmin of rule_costs(): the rollout algorithm with every rule as a base
policy, on the true runtimes and the window's later arrivals (docs/environment.md, "Rule
costs"). No policy whose actions are these rules, which sees only the observation, is
expected to do better. Per trace and load it prints the best heuristic (the lowest mean avg
bsld of quality.py's 24 rows on the same windows), the switcher's mean avg bsld, their ratio
and the ratio per window. LANL-CM5's 20 windows take about 5 minutes a load on one core.
With --wait the environment has `env.wait` and the switcher may also wait (the wait's cost:
waiting now, then the best rule), at about twice the cost. --sees limits the rollouts'
foresight (rule_costs(arrivals, runtimes)): `runtimes` sees the true runtimes but no job
arriving after the decision, `arrivals` the window's later arrivals but every job running for
its estimate, `present` neither: a scheduler that plans on what it knows (model-predictive
rule choice), each rule scored by the avg bsld of the jobs it starts that had not started.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import numpy as np
import quality

from ddppo_hpc.args import bounded_int
from ddppo_hpc.config import load_config
from ddppo_hpc.data import read_swf
from ddppo_hpc.data.split import DEFAULT_SPLIT
from ddppo_hpc.evaluate import first_episodes, policy_env_options, schedule

CONFIG = quality.ROOT / "configs" / "multi-trace.yaml"


# --sees: what the rollouts see of what is to come (rule_costs()' arrivals and runtimes).
FORESIGHT = {
    "all": dict(arrivals=True, runtimes=True),
    "runtimes": dict(arrivals=False, runtimes=True),
    "arrivals": dict(arrivals=True, runtimes=False),
    "present": dict(arrivals=False, runtimes=False),
}


def switcher_bsld(trace, spans: list, options: dict, backfill: str, sees: str) -> np.ndarray:
    """Avg bsld per window of `spans` ((first job, jobs)) under the argmin of rule_costs()
    with the foresight `sees` names."""

    def actor(n: int):
        return lambda env, obs: env.rule_costs(**FORESIGHT[sees]).argmin(axis=1).astype(np.int32)

    runs = first_episodes(trace, dict(enumerate(spans)), options, backfill, actor)
    return np.array([metrics["avg_bsld"] for _, _, metrics in runs])


def best_heuristic(trace, spans: list) -> tuple[tuple, np.ndarray]:
    """The row of quality.py's heuristics with the lowest mean avg bsld on `spans`, and its
    avg bsld per window."""
    rows = {
        row: np.array(
            [schedule(trace, *row, first, jobs).metrics["avg_bsld"] for first, jobs in spans]
        )
        for row in quality.heuristics(argparse.Namespace(backfills=quality.BACKFILLS))
    }
    best = quality.best_heuristic({row: bsld.mean() for row, bsld in rows.items()})
    return best, rows[best]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("DDPPO_TRACES", quality.ROOT.parent / "shared" / "traces")
    p.add_argument("--traces", default=str(default), help="folder of the shared traces")
    p.add_argument("--windows", type=bounded_int(1), default=20, help="windows per set (20)")
    p.add_argument("--jobs", type=bounded_int(1), default=1024, help="jobs per window (1024)")
    p.add_argument("--wait", action="store_true", help="the switcher may also wait (env.wait)")
    p.add_argument("--sees", choices=FORESIGHT, default="all",
                   help="what the rollouts see of what is to come: all (clairvoyant), the true "
                   "runtimes, the later arrivals, or the present only (default: all)")  # fmt: skip
    args = p.parse_args()
    env = load_config(CONFIG).env
    env = dataclasses.replace(
        env,
        order_actions=True,
        order_picks=False,
        action_backfills=("easy", "conservative"),
        wait=args.wait,
    )
    options = policy_env_options(env)
    files = sorted(Path(args.traces).glob("*.swf.gz"))
    if not files:
        print(f"rule_headroom: {args.traces}: no *.swf.gz traces (--traces)", file=sys.stderr)
        return 2
    print(
        f"{'trace':<12}{'load':>7}{'windows':>8}  {'best heuristic':<34}{'its':>7}"
        f"{'switcher':>10}{'ratio':>7}  per window"
    )
    for path in files:
        trace = read_swf(path)
        for load, factor in quality.loads(path):
            scaled = quality.at_load(trace, factor)
            part = quality.part_windows(scaled, DEFAULT_SPLIT, "test", args.windows, args.jobs)
            spans = part[0]
            best, theirs = best_heuristic(scaled, spans)
            mine = switcher_bsld(scaled, spans, options, env.backfill, args.sees)
            print(
                f"{quality.short_name(path):<12}{load:>7}{len(spans):>8}  "
                f"{quality.rule_label(best):<34}{theirs.mean():>7.2f}{mine.mean():>10.2f}"
                f"{mine.mean() / theirs.mean():>7.3f}  {np.round(mine / theirs, 2).tolist()}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
