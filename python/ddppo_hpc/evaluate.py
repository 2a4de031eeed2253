"""`python -m ddppo_hpc.evaluate`: a trained policy and the heuristics on the same windows,
with a table of means and, with --out, every job's schedule in an HDF5 results file
(schema: docs/results.md).

    python -m ddppo_hpc.evaluate --checkpoint runs/demo
    python -m ddppo_hpc.evaluate --checkpoint runs/lublin256 \\
        --trace ../shared/traces/lublin_256.swf.gz --backfill none,easy --out results.h5
    mpirun -n 4 python -m ddppo_hpc.evaluate --trace lanl/ --windows 64 --jobs 4096 --out r.h5

The trained policy ("ddppo") acts greedily (its most probable visible job). Without
--checkpoint only the heuristics run. Without --trace: the run's own trace (its first, for
a run on several; for a run on the embedded workload, that workload). Every trace is split
by time (the run's data.split, default 0.7/0.1/0.2 of the jobs in submit order): windows
lie in the test part, or with
--split validation in the validation part (to choose between runs or checkpoints); --split
train scores a policy on jobs it trained on and needs --allow-train-jobs. Windows: the
RLScheduler protocol (10 consecutive windows of 1024 jobs from the part's first job) unless
--windows N --jobs M [--seed S] (N windows at seeded random starts) or --full (the whole
part). Heuristics backfill with the users' requests and with EASY++ predictions (--estimate);
the trained policy with the estimate it trained with (env.estimate). Under mpirun, rank r
evaluates windows r, r + size, ...; rank 0 gathers and writes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import platform
import shlex
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
from mpi4py import MPI

import ddppo_hpc
from ddppo_hpc.args import SEED_MAX, bounded_int, names, run
from ddppo_hpc.config import ConfigError, EnvConfig, TrainConfig, from_dict
from ddppo_hpc.data.source import sources, whole_trace
from ddppo_hpc.data.split import PARTS, describe, part_range
from ddppo_hpc.data.trace import Trace, TraceError
from ddppo_hpc.dist.control import CHECKPOINT, read_checkpoint
from ddppo_hpc.env import EPISODE_METRICS, VecSchedulingEnv
from ddppo_hpc.env.vector import feature_widths
from ddppo_hpc.gpu import training as gpu_training
from ddppo_hpc.gpu.env import GLOBAL_FEATURES, SLOT_FEATURES
from ddppo_hpc.io import check_output, not_an_input
from ddppo_hpc.policy import build_policy, decide, initial_memory
from ddppo_hpc.results import Outcome, results_of, scheduler_label, scored_jobs, write_results
from ddppo_hpc.sim import (
    BACKFILLS,
    ESTIMATES,
    POLICIES,
    PROTOCOL_JOBS,
    PROTOCOL_WINDOWS,
    RECORDED,
    RECORDED_NOTE,
    has_recorded,
    recorded,
    simulate,
)
from ddppo_hpc.sim import protocol_windows as rlscheduler_windows

TRAINED = "ddppo"  # the trained policy's name among the schedulers


@torch.no_grad()
def greedy_actions(policy: torch.nn.Module, obs: dict, memory: torch.Tensor | None) -> tuple:
    """The trained policy's decision: its most probable visible job, per environment, and
    a recurrent policy's memory after it."""
    tensors = tuple(torch.from_numpy(obs[k]) for k in ("jobs", "cluster", "action_mask"))
    actions, _, _, memory = decide(policy, tensors, memory, lambda d: d.probs.argmax(dim=1))
    return actions.int().numpy(), memory


def policy_env_options(options: EnvConfig) -> dict:
    """What a trained policy's observation and actions depend on, as VecSchedulingEnv
    keywords: the queue length, backfill order and estimate, wait action, history, agent
    backfilling, heuristic ranks, fit times, order picks and order actions."""
    return dict(
        max_queue=options.max_queue,
        policy=options.backfill_order,
        wait=options.wait,
        history=options.history,
        estimate=options.estimate,
        agent_backfill=options.agent_backfill,
        heuristic_ranks=options.heuristic_ranks,
        fit_times=options.fit_times,
        order_picks=options.order_picks,
        order_actions=options.order_actions,
        action_backfills=tuple(options.action_backfills),
    )


def first_episodes(
    trace: Trace, spans: dict, env_options: dict, backfill: str, actor: Callable
) -> list[tuple[int, np.ndarray, dict]]:
    """(window, start times, metrics) of the first episode of one environment per window of
    `spans` (window -> (first job, jobs)): one batch per window length, built with
    `env_options` (VecSchedulingEnv keywords) and `backfill`. `actor(n)` gives a batch of n
    environments its chooser: (env, observation) -> actions."""
    done = []
    for length in sorted({n for _, n in spans.values()}):
        windows = [w for w, (_, n) in spans.items() if n == length]
        env = VecSchedulingEnv(trace, len(windows), length, backfill=backfill, **env_options)
        env.reset()
        obs = env.begin_at([spans[w][0] for w in windows])
        choose = actor(len(windows))
        finished = np.zeros(len(windows), dtype=bool)
        while not finished.all():
            obs, _, terminated, _, info = env.step(choose(env, obs))
            for i in np.flatnonzero(terminated & ~finished):  # the first episode only
                metrics = {m: float(info[m][i]) for m in EPISODE_METRICS}
                done.append((windows[i], env.last_start_times(i), metrics))
            finished |= terminated
    return sorted(done, key=lambda d: d[0])


def run_policy(
    policy: torch.nn.Module, trace: Trace, spans: dict, options: EnvConfig, backfill: str
) -> list[tuple[int, np.ndarray, dict]]:
    """first_episodes() of `policy` acting greedily, with the training run's
    policy_env_options (with `backfill` none, agent backfilling has no decision to make).
    Only the first episode counts: its memory needs no reset."""

    def actor(n: int) -> Callable:
        memory = initial_memory(policy, n, "cpu")

        def choose(env: VecSchedulingEnv, obs: dict) -> np.ndarray:
            nonlocal memory
            actions, memory = greedy_actions(policy, obs, memory)
            return actions

        return choose

    return first_episodes(trace, spans, policy_env_options(options), backfill, actor)


def schedulers(
    policies: list[str], backfills: list[str], estimates: list[str], trained: str = "request"
) -> list[tuple]:
    """(policy, backfill, estimate) of every row: the trained policy backfills with the
    estimate it trained with (`trained`, env.estimate); without backfilling the estimate
    changes nothing, so it runs once, with the requests; the recorded schedule is one row,
    neither backfilled nor estimated ("-")."""
    rows = []
    for name in policies:
        if name == RECORDED:
            rows.append((RECORDED, "-", "-"))
        elif name == TRAINED:
            rows += [(name, b, "request" if b == "none" else trained) for b in backfills]
        else:
            rows += [
                (name, backfill, estimate)
                for backfill in backfills
                for estimate in estimates
                if estimate == "request" or backfill != "none"
            ]
    return rows


def schedule(trace: Trace, name: str, backfill: str, estimate: str, first: int, jobs: int):
    """A heuristic's simulated schedule of a window, or the log's recorded one."""
    if name == RECORDED:
        return recorded(trace, first, jobs)
    return simulate(trace, name, backfill, first, jobs, estimate)


def run_rank(setup: dict, rank: int, size: int) -> list[Outcome]:
    """Every scheduler on this rank's windows (w % size == rank)."""
    trace, spans = setup["trace"], setup["spans"]
    mine = {w: span for w, span in enumerate(spans) if w % size == rank}
    outcomes = []
    for name, backfill, estimate in setup["schedulers"]:
        if name == TRAINED:
            runs = run_policy(setup["model"], trace, mine, setup["env"], backfill)
        else:
            results = [
                (w, schedule(trace, name, backfill, estimate, f, n)) for w, (f, n) in mine.items()
            ]
            runs = [(w, r.start_time, r.metrics) for w, r in results]
        outcomes += [Outcome(name, backfill, estimate, w, mine[w][0], s, m) for w, s, m in runs]
    return outcomes


def load_checkpoint(path: str) -> tuple[dict, Path]:
    """A checkpoint from a run directory or the checkpoint file itself, on the CPU."""
    file = Path(path) / CHECKPOINT if Path(path).is_dir() else Path(path)
    return read_checkpoint(file), file


def run_config(loaded: tuple[dict, Path] | None) -> TrainConfig:
    """The evaluated run's configuration (the defaults without a checkpoint); ConfigError
    naming the checkpoint when its config is not valid."""
    if loaded is None:
        return TrainConfig()
    file = str(loaded[1])
    try:
        return from_dict(loaded[0]["config"], where=file)
    except ConfigError as e:  # a value the checks refuse names its key, not the file
        named = str(e).startswith(f"{file}: ")
        raise ConfigError(str(e) if named else f"{file}: {e}") from None


def trained_policy(loaded: tuple[dict, Path], config: TrainConfig, *features: int):
    """The checkpoint's policy, built as its config says (for the HPC queue's observation
    widths unless `features` gives others), with its weights; ValueError naming the
    checkpoint when config and weights disagree."""
    checkpoint, file = loaded
    env = config.env
    widths = features or feature_widths(
        env.history,
        env.agent_backfill,
        env.heuristic_ranks,
        env.fit_times,
        env.order_actions,
        len(env.action_backfills),
    )
    model = build_policy(config.policy, *widths)
    problem = weights_problem(model.state_dict(), checkpoint["model"])
    if problem:
        p = config.policy
        raise ValueError(
            f"{file}: its weights do not fit its config's policy ({p.name}, hidden {p.hidden}) on"
            f" this version's observation ({widths[0]} job, {widths[1]} cluster features):"
            f" {problem}"
        )
    model.load_state_dict(checkpoint["model"])
    return model


def weights_problem(expected: dict, saved: object) -> str | None:
    """How `saved` differs from a model's `expected` state dict (the first difference), or
    None when it fits."""
    if not isinstance(saved, dict):
        return f"the weights are a {type(saved).__name__}, not a state dict"
    for name, tensor in expected.items():
        if name not in saved:
            return f"no {name} in the weights"
        shape = tuple(getattr(saved[name], "shape", ()))
        if shape != tuple(tensor.shape):
            return f"{name} is {list(shape)} in the weights, {list(tensor.shape)} in the policy"
    unexpected = [name for name in saved if name not in expected]
    return f"{unexpected[0]} in the weights is not in the policy" if unexpected else None


def evaluation_trace(config: TrainConfig, trace_path: str | None) -> tuple[Trace, str | None]:
    """The trace to evaluate on and its path (None for the run's embedded workload): by
    default the run's first source."""
    path = trace_path or sources(config.data)[0].path
    return whole_trace(path, config.data), path


def trace_sha256(trace: Trace, path: str | None) -> str:
    """The sha256 of the trace file; of a store's manifest.json (which lists its partitions'
    checksums); of the job columns for the embedded workload."""
    digest = hashlib.sha256()
    if path is None:
        for column in trace.core_columns():
            digest.update(np.ascontiguousarray(column).tobytes())
        return digest.hexdigest()
    file = Path(path) / "manifest.json" if Path(path).is_dir() else Path(path)
    with open(file, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def scored_part(trace: Trace, config: TrainConfig, args: argparse.Namespace) -> dict:
    """The part of the trace the windows lie in: {"part", "fractions", "first_job",
    "stop_job", "trace_jobs"}. ValueError when it is empty, or when it is the train part and
    a trained policy would be scored on it without --allow-train-jobs."""
    fractions = config.data.split
    first, stop = part_range(len(trace), fractions, args.split)
    part = describe(args.split, first, stop, len(trace), fractions)
    if stop == first:
        raise ValueError(
            f"{trace.source}: nothing to score in the {part}; choose another --split, or "
            "train with a data.split that leaves this part some jobs"
        )
    if args.split == "train" and args.checkpoint and not args.allow_train_jobs:
        raise ValueError(
            f"--split train scores the trained policy on jobs it trained on ({part}); add "
            "--allow-train-jobs to do it anyway"
        )
    return {
        "part": args.split,
        "fractions": list(fractions),
        "first_job": first,
        "stop_job": stop,
        "trace_jobs": len(trace),
    }


def windows_of(part: dict, args: argparse.Namespace) -> tuple[list, dict]:
    """(first job, jobs) of every window inside `part` (scored_part), and the spec that
    chose them."""
    first, stop = part["first_job"], part["stop_job"]
    jobs = stop - first
    if args.full:
        return [(first, jobs)], {"kind": "full", "jobs": jobs, "start": first}
    if args.windows is None:
        spec = {"kind": "rlscheduler", "windows": PROTOCOL_WINDOWS, "jobs": PROTOCOL_JOBS}
        return rlscheduler_windows(stop, first), {**spec, "start": first}
    if args.jobs > jobs or args.windows > jobs:
        raise ValueError(
            f"--windows {args.windows} --jobs {args.jobs}: need windows within the {part['part']}"
            f" part's {jobs} jobs, and at most as many windows as jobs"
        )
    rng = np.random.default_rng(args.seed)
    firsts = first + np.sort(rng.integers(0, jobs - args.jobs + 1, args.windows))
    spec = {"kind": "random", "windows": args.windows, "jobs": args.jobs, "seed": args.seed}
    return [(int(f), args.jobs) for f in firsts], {**spec, "start": first}


def versions() -> dict:
    found = {"ddppo_hpc": ddppo_hpc.__version__, "python": platform.python_version()}
    for package in ("torch", "numpy", "h5py", "horovod"):
        with contextlib.suppress(metadata.PackageNotFoundError):  # horovod is optional
            found[package] = metadata.version(package)
    return found


def prepare(args: argparse.Namespace, loaded: tuple[dict, Path] | None, config: TrainConfig):
    """What every rank needs: trace, windows, model, schedulers, and the file's attributes;
    `loaded`: the checkpoint and its file, if any; `config`: the run's."""
    checkpoint, file = loaded or (None, None)
    policies = args.policies or ([TRAINED] if checkpoint else []) + list(POLICIES)
    if TRAINED in policies and checkpoint is None:
        raise ValueError(f"--policies {TRAINED} needs --checkpoint")
    model = trained_policy(loaded, config) if loaded else None
    trace, path = evaluation_trace(config, args.trace)
    if args.out:
        not_an_input(args.out, [p for p in (file, path) if p])
    part = scored_part(trace, config, args)
    spans, spec = windows_of(part, args)
    policies = with_recorded(policies, trace, spans, explicit=bool(args.policies))
    backfills = args.backfill or [config.env.backfill]
    attrs = {
        "config": json.dumps(checkpoint["config"] if checkpoint else None),
        "checkpoint": str(file.resolve()) if file else "",
        "checkpoint_update": checkpoint["update"] if checkpoint else -1,
        "versions": json.dumps(versions()),
        "trace": str(Path(path).resolve()) if path else embedded_name(config),
        "trace_sha256": trace_sha256(trace, path),
        "machine_procs": trace.machine_procs,
        "command": shlex.join(["python", "-m", "ddppo_hpc.evaluate", *args.argv]),
        "window_spec": json.dumps(spec),
        "split": json.dumps(part),
        "policies": policies,
        "backfills": backfills,
        "estimates": args.estimate,
    }
    return {
        "trace": trace,
        "spans": spans,
        "model": model,
        "env": config.env,
        "schedulers": schedulers(policies, backfills, args.estimate, config.env.estimate),
        "attrs": attrs,
        "scored": scored_line(trace, part, spec),
    }


def with_recorded(policies: list[str], trace: Trace, spans: list, explicit: bool) -> list[str]:
    """The policies, with the recorded schedule last by default when every window has it
    (SWF field 3). Asked for explicitly where a window lacks it: TraceError naming the job."""
    everywhere = all(has_recorded(trace, f, f + n) for f, n in spans)
    if explicit and RECORDED in policies and not everywhere:
        first, jobs = next((f, n) for f, n in spans if not has_recorded(trace, f, f + n))
        recorded(trace, first, jobs)  # raises, naming the first job without field 3
    return policies if explicit or not everywhere else [*policies, RECORDED]


def embedded_name(config: TrainConfig) -> str:
    data = config.data
    return f"synthetic ({data.synthetic_jobs} jobs, seed {data.synthetic_seed})"


def scored_line(trace: Trace, part: dict, spec: dict) -> str:
    """Which jobs the table scores, in words (printed above it)."""
    return f"scored: {trace.source}, {scored_jobs(part, spec)}"


def gpu_table(loaded: tuple[dict, Path], config: TrainConfig, args: argparse.Namespace) -> None:
    """A GPU-mode run: its agent against every heuristic pair on held-out windows
    (docs/gpu.md), printed; the HDF5 results file is for HPC runs."""
    if args.trace or args.out:
        raise ValueError("--trace and --out do not apply to a GPU-mode run")
    if args.split == "train":
        raise ValueError("--split train: a GPU-mode run has validation and held-out windows")
    validation = args.split == "validation"
    if validation and config.data.trace != "synthetic" and not config.gpu.validation_jobs:
        raise ValueError(
            "--split validation: the run kept no validation jobs (gpu.validation_jobs)"
        )
    policy = trained_policy(loaded, config, SLOT_FEATURES, GLOBAL_FEATURES)
    windows = args.windows or config.run.eval_windows
    rows = gpu_training.compare(config, policy, windows, validation)
    print(gpu_training.teacher_line(config))
    print("".join(f"{k:>16}" for k in rows[0]))
    for row in rows:
        print("".join(f"{v:>16.3f}" if isinstance(v, float) else f"{v:>16}" for v in row.values()))


def gather(outcomes: list[Outcome], setup: dict, comm: MPI.Comm) -> list[Outcome] | None:
    """Every rank's outcomes on rank 0, ordered by scheduler, backfill, window; None
    elsewhere."""
    parts = comm.gather(outcomes, root=0)
    if parts is None:
        return None
    order = setup["schedulers"]
    return sorted(
        (o for part in parts for o in part),
        key=lambda o: (order.index((o.policy, o.backfill, o.estimate)), o.window),
    )


def print_table(summary: dict, scored: str) -> None:
    print(scored)
    head = "".join(f"{m:>16}" for m in EPISODE_METRICS)
    print(f"{'scheduler':<20}{'backfill':<14}{'windows':>8}{head}")
    for row in range(len(summary["policy"])):
        name = scheduler_label(summary["policy"][row], summary["estimate"][row])
        print(
            f"{name:<20}{summary['backfill'][row]:<14}{summary['windows'][row]:>8}"
            + "".join(f"{summary[m + '_mean'][row]:>16.3f}" for m in EPISODE_METRICS)
        )
    if RECORDED in summary["policy"]:
        print(f"{RECORDED}: {RECORDED_NOTE}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m ddppo_hpc.evaluate",
        description=__doc__.split("`: ", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--checkpoint", help="a training run directory or its checkpoint.pt")
    p.add_argument("--trace", help="SWF file or dataset directory (default: see above)")
    p.add_argument(
        "--policies",
        type=names((TRAINED, *POLICIES, RECORDED)),
        help="e.g. ddppo,sjf,f1 (default: ddppo with --checkpoint, every order, and recorded "
        "when the trace has SWF field 3 for every window)",
    )
    p.add_argument("--backfill", type=names(BACKFILLS), help="e.g. none,easy (default: the run's)")
    p.add_argument(
        "--estimate",
        type=names(ESTIMATES),
        default=list(ESTIMATES),
        help="what heuristics' backfilling takes as a job's runtime: request, predicted "
        "(EASY++) or both (default: request,predicted)",
    )
    p.add_argument(
        "--split",
        choices=PARTS,
        default="test",
        help="the part of the trace the windows lie in (default: test; GPU runs: test or "
        "validation)",
    )
    p.add_argument(
        "--allow-train-jobs",
        action="store_true",
        help="with --split train: score the trained policy on jobs it trained on",
    )
    p.add_argument("--protocol", choices=("rlscheduler",), help="the default windows")
    p.add_argument("--windows", type=bounded_int(1), metavar="N", help="N windows, random starts")
    p.add_argument("--jobs", type=bounded_int(1), metavar="M", help="jobs per window (--windows)")
    p.add_argument(
        "--seed", type=bounded_int(0, SEED_MAX), default=0, help="seed of the window starts (0)"
    )
    p.add_argument("--full", action="store_true", help="one window: the whole part")
    p.add_argument("--out", metavar="RESULTS.h5", help="write the HDF5 results file")
    args = p.parse_args(argv)
    if (args.windows is None) != (args.jobs is None):
        p.error("--windows and --jobs go together")
    if sum((args.protocol is not None, args.windows is not None, args.full)) > 1:
        p.error("choose one of --protocol, --windows/--jobs, --full")
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def main(argv: list[str] | None = None, comm: MPI.Comm | None = None) -> int:
    """The command line; `comm` (default: the MPI world) shares out the windows."""
    args = parse_args(argv)
    comm = comm or MPI.COMM_WORLD
    # The policy's batches are small: one thread per rank. Idle OpenMP threads spin, and on
    # a shared or oversubscribed node that cost 100x the CPU time of the work itself.
    torch.set_num_threads(1)
    try:
        if args.out and comm.rank == 0:  # the writer: it finds out before the others wait
            check_output(args.out)
        loaded = load_checkpoint(args.checkpoint) if args.checkpoint else None
        config = run_config(loaded)
        if config.gpu.mode != "off":
            gpu_table(loaded, config, args)
            return 0
        setup = prepare(args, loaded, config)
        error = None
    except (ConfigError, TraceError, OSError, ValueError) as e:
        error = str(e)
    # Every rank stops if any could not start (a file one node cannot see, say): none is
    # left waiting for the others in the gather.
    errors = [e for e in comm.allgather(error) if e]
    try:
        if errors:
            raise ValueError(error or errors[0])
        outcomes = gather(run_rank(setup, comm.rank, comm.size), setup, comm)
        if outcomes is None:
            return 0
        results = results_of(outcomes, setup["trace"], {**setup["attrs"], "ranks": comm.size})
        if args.out:
            write_results(args.out, results)
    except (OSError, ValueError) as e:
        print(f"python -m ddppo_hpc.evaluate: error: {e}", file=sys.stderr)
        return 2
    print_table(results.summary, setup["scored"])
    return 0


if __name__ == "__main__":
    run(main)
