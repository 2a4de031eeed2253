"""RL environment throughput: decisions/s of VecSchedulingEnv with random valid actions for
B in {1, 16, 64, 256}, on lublin_256 and on a synthetic trace store, beside the pure-Python
reference simulator (tests/reference_sim.py) making random picks on the same windows; then
under heavy load, LANL-CM5 at its native load and with submit times x 0.5, at B = 64.

    python bench/env_throughput.py [--traces ../shared/traces] [--seconds 3] [--episodes 4]
        [--repeat 3] [--tables native,heavy]

Prints tables and asserts nothing. One core, in the CPU time of the thread that runs it
(time.thread_time): other load on a shared machine does not count, nor do numpy's BLAS
threads spinning after a dot product. The first table: episodes of 1024 jobs, K = 128 visible
jobs, EASY backfilling; the Python reference builds no observations, so the ratio
understates what the C++ environment saves.

Heavy load (issue 17: within 2x of the native figure at x 0.5): the median of --repeat
measurements of --episodes x window steps from a reset (the same decisions whatever the
speed, so that builds compare on the same work), for the first table's environment and for
configs/multi-trace.yaml's (its window, K, backfilling, order, estimate, history and
heuristic ranks), without and with its teacher and reward baseline (six heuristic runs per
episode and on teacher_jobs), and the native / x 0.5 ratio (the median of the pairs and their
quartiles: on a shared host the ratio moves by 0.2-0.5 from one pair to the next). "queue" is
the median and the longest queue (waiting jobs) over the decisions of the same run: an
episode's queue is at most its window, as every episode starts on an empty machine, however
long the whole trace's queue grows. "jobs/dec" is the jobs started per decision in that run
(the window over the decisions of each episode that ended): under heavy load backfilling
starts more jobs beside each pick, so a decision does more work; "per job" is the ratio of
jobs started per second, the decisions' ratio over the ratio of jobs/dec.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from reference_sim import Job  # noqa: E402
from reference_sim import simulate as simulate_py  # noqa: E402
from simhelpers import jobs_of, traces_dir  # noqa: E402

from ddppo_hpc.args import names  # noqa: E402
from ddppo_hpc.config import load_config  # noqa: E402
from ddppo_hpc.data import convert, read_swf  # noqa: E402
from ddppo_hpc.data.source import at_load  # noqa: E402
from ddppo_hpc.data.store import TraceStore  # noqa: E402
from ddppo_hpc.data.trace import Trace  # noqa: E402
from ddppo_hpc.env import VecSchedulingEnv  # noqa: E402
from ddppo_hpc.train import queue_envs  # noqa: E402

WINDOW = 1024
TABLES = ("native", "heavy")
HEAVY = "LANL-CM5-1994-4.1-cln.swf.gz"
HEAVY_SCALE = 0.5
HEAVY_BATCH = 64
CONFIG = ROOT / "configs" / "multi-trace.yaml"


def env_rate(trace: Trace, batch: int, seconds: float) -> float:
    env = VecSchedulingEnv(trace, batch, window_jobs=WINDOW, max_queue=128, seed=0)
    return random_rate(env, seconds)


def random_rate(env: VecSchedulingEnv, seconds: float, steps: int | None = None) -> float:
    """Decisions per CPU second of `env` with random valid actions, from a reset on: for
    `steps` steps (the same work whatever the speed), or else for `seconds` of CPU time."""
    env.reset()
    rng = np.random.default_rng(0)
    chunk = max(1, 1024 // env.num_envs) if steps is None else steps
    done, start = 0, time.thread_time()
    while done == 0 or (steps is None and time.thread_time() - start < seconds):
        for _ in range(chunk):
            env.step(env.random_actions(rng))
        done += chunk
    return env.num_envs * done / (time.thread_time() - start)


def heavy_envs() -> dict:
    """The heavy-load table's environments: name -> (trace, history) -> env, where `history`
    asks for the history features (queue_lengths needs them; the config's have them)."""
    config = load_config(CONFIG).env
    untaught = dataclasses.replace(
        config, teacher="backfill_order", teacher_jobs=0, reward_baseline="none"
    )
    return {
        "EASY, FCFS scans": lambda trace, history: VecSchedulingEnv(
            trace, HEAVY_BATCH, window_jobs=WINDOW, max_queue=128, seed=0, history=history
        ),
        f"{CONFIG.name}, no teacher": lambda trace, history: queue_envs(
            trace, HEAVY_BATCH, untaught, 0
        ),
        f"{CONFIG.name}": lambda trace, history: queue_envs(trace, HEAVY_BATCH, config, 0),
    }


def queue_lengths(env: VecSchedulingEnv, steps: int) -> tuple[np.ndarray, float]:
    """The queue length at every decision of `steps` random steps of `env`, which must show
    the history features (the hidden jobs: cluster feature 3, docs/environment.md), and the
    jobs started per decision: the window over the decisions of each episode that ended."""
    obs, _ = env.reset()
    rng = np.random.default_rng(0)
    lengths, episode_decisions = [], []
    begun = np.zeros(env.num_envs, dtype=np.int64)  # the step each episode began at
    for step in range(steps):
        visible = np.count_nonzero(obs["jobs"][:, : env.max_queue, 6] == 1, axis=1)
        lengths.append(visible + np.rint(obs["cluster"][:, 3] * env.window_jobs))
        obs, _, done, *_ = env.step(env.random_actions(rng))
        episode_decisions.extend(step + 1 - begun[done])
        begun[done] = step + 1
    return np.concatenate(lengths), env.window_jobs / np.mean(episode_decisions)


def heavy_table(traces: Path, episodes: int, repeat: int) -> None:
    native = read_swf(traces / HEAVY)
    loads = {"native": native, f"x {HEAVY_SCALE}": at_load(native, HEAVY_SCALE)}
    print(
        f"\nheavy load: {HEAVY}, B = {HEAVY_BATCH}, random actions, median of {repeat}"
        " (the ratio: median of the pairs, each load measured in turn, and the pairs'"
        " quartiles)"
        f"\n{'environment':<30}{'window':>7}"
        + "".join(f"{load + ' dec/s':>16}{'jobs/dec':>9}{'queue':>11}" for load in loads)
        + f"{'native / x ' + str(HEAVY_SCALE):>21}{'per job':>9}"
    )
    for name, make in heavy_envs().items():
        rates = {load: [] for load in loads}
        for _ in range(repeat):  # the loads alternate: a host that slows down slows both
            for load, trace in loads.items():
                env = make(trace, False)
                rates[load].append(random_rate(env, 0, episodes * env.window_jobs))
        row, window, per_decision = "", env.window_jobs, {}
        for load, trace in loads.items():
            lengths, per_decision[load] = queue_lengths(make(trace, True), episodes * window)
            queue = f"{np.median(lengths):.0f} / {lengths.max():.0f}"
            row += f"{np.median(rates[load]):>16,.0f}{per_decision[load]:>9.2f}{queue:>11}"
        pairs = np.divide(*rates.values())
        low, high = np.percentile(pairs, [25, 75])
        spread = f"{np.median(pairs):.2f}x ({low:.2f}-{high:.2f})"
        per_job = np.median(pairs) / np.divide(*reversed(per_decision.values()))
        print(f"{name:<30}{window:>7}{row}{spread:>21}{per_job:>8.2f}x", flush=True)


def reference_rate(trace: Trace, seconds: float) -> float:
    """Random picks in the Python reference simulator, over windows like the env's."""
    rng = random.Random(0)
    decisions = 0

    def choose(ordered: list[Job]) -> Job:
        nonlocal decisions
        decisions += 1
        return ordered[rng.randrange(len(ordered))]

    start = time.thread_time()
    while time.thread_time() - start < seconds:
        first = rng.randrange(len(trace) - WINDOW + 1)
        jobs = jobs_of(trace, first, first + WINDOW)
        simulate_py(jobs, trace.machine_procs, "fcfs", "easy", choose=choose)
    return decisions / (time.thread_time() - start)


def native_table(traces: Path, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        convert.generate(Path(tmp) / "ds", 200_000, machine_procs=1024, users=200, partitions=4)
        sources = {
            "lublin_256": read_swf(traces / "lublin_256.swf.gz"),
            "synthetic store": TraceStore(Path(tmp) / "ds").trace(),
        }
        print(f"{'trace':<18}{'B':>5}{'decisions/s':>14}{'Python ref':>13}{'ratio':>8}")
        for name, trace in sources.items():
            reference = reference_rate(trace, seconds)
            for batch in (1, 16, 64, 256):
                rate = env_rate(trace, batch, seconds)
                print(
                    f"{name:<18}{batch:>5}{rate:>14,.0f}{reference:>13,.0f}"
                    f"{rate / reference:>7,.0f}x",
                    flush=True,
                )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", default=traces_dir(), help="folder of the shared traces")
    p.add_argument("--seconds", type=float, default=3, help="CPU time per measurement")
    p.add_argument("--episodes", type=int, default=4, help="heavy load: steps / window, per env")
    p.add_argument("--repeat", type=int, default=3, help="heavy-load measurements, median kept")
    p.add_argument("--tables", type=names(TABLES), default=list(TABLES), help="tables to print")
    args = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    if "native" in args.tables:
        native_table(Path(args.traces), args.seconds)
    if "heavy" in args.tables:
        heavy_table(Path(args.traces), args.episodes, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
