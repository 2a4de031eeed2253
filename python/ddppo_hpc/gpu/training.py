"""GPU mode of training and evaluation: the cluster, each rank's jobs and the held-out
windows from the configuration (config.GpuConfig)."""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
from mpi4py import MPI

from ddppo_hpc.config import ConfigError, TrainConfig
from ddppo_hpc.data.dljobs import generate_dl_jobs
from ddppo_hpc.dist import control
from ddppo_hpc.gpu import ORDERS, PLACEMENTS, simulate_gpu
from ddppo_hpc.gpu.env import GPU_EPISODE_METRICS, VecGpuEnv, teacher_of
from ddppo_hpc.gpu.topology import Cluster, Machines, uniform
from ddppo_hpc.gpu.workload import GpuWorkload, from_trace, load, node_machines
from ddppo_hpc.log import logger
from ddppo_hpc.rl.ppo import masked_distribution

HELD_OUT_SEED = 987_654  # the synthetic jobs' seed for evaluation
# The placements a GPU environment can teach: imitation clones them and the observation's
# plan feature shows them (docs/gpu.md, "The teacher the training windows choose").
TEACHER_PLACEMENTS = ("best_fit", "speed_fit")


def cluster_of(config: TrainConfig) -> Cluster:
    g = config.gpu
    try:
        links = tuple(float(x) for x in g.link_costs.split(","))
    except ValueError:
        links = ()
    if len(links) != 3:
        raise ConfigError(f"'gpu.link_costs' must be three numbers, not {g.link_costs!r}")
    if g.nodes_topology:
        machines = trace_machines(config)
    else:
        models = tuple(m for m in g.models.split(",") if m)
        machines = uniform(g.racks, g.machines_per_rack, g.gpus_per_machine, models)
    return Cluster(machines, links, g.comm_penalty, g.speed_noise, g.speed_seed)


def trace_machines(config: TrainConfig) -> Machines:
    """`data.trace`'s own node list (`gpu.nodes_topology`)."""
    if config.data.trace != "synthetic":
        workload = load([config.data.trace])
        if workload.nodes is not None:
            return node_machines(workload, config.gpu.machines_per_rack, config.gpu.nodes_every)
    raise ConfigError(
        f"'gpu.nodes_topology' needs a trace with a node list (Alibaba), not {config.data.trace!r}"
    )


def workload_of(config: TrainConfig, cluster: Cluster, seed: int) -> GpuWorkload:
    """The whole workload at `gpu.load_scale` (jobs that never fit the cluster dropped)."""
    data = config.data
    if data.trace == "synthetic":
        trace = generate_dl_jobs(
            data.synthetic_jobs, cluster.total_gpus, config.gpu.load, seed=seed
        )
        workload = from_trace(trace, "synthetic DL jobs")
    else:
        workload = load([data.trace])
    return workload.at_load(config.gpu.load_scale).fitted(cluster.machines)


def split(
    config: TrainConfig, workload: GpuWorkload
) -> tuple[GpuWorkload, GpuWorkload, GpuWorkload]:
    """(training jobs, the `gpu.validation_jobs` before the held-out ones, the last
    `gpu.holdout_jobs` held out): neither of the last two is trained on."""
    held, valid = config.gpu.holdout_jobs, config.gpu.validation_jobs
    if held < 0 or valid < 0 or held + valid >= len(workload) - config.env.window_jobs:
        raise ConfigError(
            f"'gpu.holdout_jobs' {held} and 'gpu.validation_jobs' {valid} leave no training "
            f"window in {len(workload)} jobs"
        )
    cut, end = len(workload) - held - valid, len(workload) - held
    return workload.slice(0, cut), workload.slice(cut, end), workload.slice(end, len(workload))


def training_jobs(config: TrainConfig, rank: int = 0) -> GpuWorkload:
    """The jobs training runs on: rank `rank`'s own synthetic jobs, or the trace's training
    part (all ranks together)."""
    cluster = cluster_of(config)
    if config.data.trace == "synthetic":
        return workload_of(config, cluster, config.run.seed + 1000 * rank)
    return split(config, workload_of(config, cluster, 0))[0]


def make_env(config: TrainConfig, rank: int, size: int) -> VecGpuEnv:
    """This rank's environments: its own synthetic jobs, or its block of the training jobs."""
    cluster = cluster_of(config)
    jobs = training_jobs(config, rank)
    if config.data.trace != "synthetic":
        jobs = jobs.slice(rank * len(jobs) // size, (rank + 1) * len(jobs) // size)
    return env_for(
        config, jobs, cluster, config.env.num_envs, config.run.seed + rank * config.env.num_envs
    )


def env_for(config: TrainConfig, jobs: GpuWorkload, cluster: Cluster, num_envs: int, seed: int):
    g, env = config.gpu, config.env
    weights = (g.w_jct, g.w_makespan, g.w_comm)
    return VecGpuEnv(
        jobs,
        cluster,
        num_envs,
        env.window_jobs,
        env.max_queue,
        g.mode,
        g.order,
        weights,
        seed,
        g.reward_baseline,
        g.wait,
        g.non_blocking,
        g.set_aside,
        g.teacher_holds,
    )


def holds(config: TrainConfig) -> bool:
    """Whether the teacher and reward baseline are hold rules (docs/gpu.md, "The set-aside
    hold")."""
    return config.gpu.set_aside and config.gpu.teacher_holds


def rule_name(order: str, placement: str, wait: bool, hold: bool = False) -> str:
    return f"{order}+{placement}" + ("+hold" if hold else "+wait" * wait)


def window_starts(jobs: GpuWorkload, n: int) -> list[int]:
    """The first jobs of the consecutive windows of `n` jobs that `jobs` holds."""
    return list(range(0, len(jobs) - n + 1, n))


def rule_scores(config: TrainConfig, jobs: GpuWorkload) -> list[tuple[float, str, str]]:
    """(score, order, placement) of every rule a teacher can be, lowest first (ties: ORDERS,
    then TEACHER_PLACEMENTS order), on the consecutive windows of `env.window_jobs` of `jobs`
    (training_jobs(config): rank 0's with synthetic jobs); wait rules when
    `gpu.non_blocking` (hold rules with `gpu.set_aside` unless `gpu.teacher_holds` is
    false), as the environment's reward
    baseline is then one. The score is
    `gpu.teacher`'s: training_best the mean avg JCT over the windows, training_geomean the
    geometric mean of each window's avg JCT over the best candidate's on it (a window whose
    best is 0 counts 1 for every rule)."""
    cluster, n = cluster_of(config), config.env.window_jobs
    firsts = window_starts(jobs, n)
    if not firsts:
        raise ConfigError(f"'gpu.teacher': no training window of {n} jobs in {len(jobs)} jobs")
    wait, hold = config.gpu.non_blocking, holds(config)
    rules = [(o, p) for o in ORDERS for p in TEACHER_PLACEMENTS]
    jct = np.array(
        [
            [
                simulate_gpu(jobs, cluster, o, p, 0, f, n, wait, hold).metrics["avg_jct"]
                for f in firsts
            ]
            for o, p in rules
        ]
    )
    if config.gpu.teacher == "training_geomean":
        best = jct.min(axis=0)
        ratio = np.where(best > 0, jct / np.where(best > 0, best, 1.0), 1.0)
        score = np.exp(np.log(ratio).mean(axis=1))
    else:
        score = jct.mean(axis=1)
    return sorted(
        ((float(s), o, p) for s, (o, p) in zip(score, rules, strict=True)), key=lambda x: x[0]
    )


SCORE_NAMES = {
    "training_best": ("the lowest mean avg JCT", "{:,.0f} s"),
    "training_geomean": ("the lowest geometric mean of avg JCT / the window's best", "{:.4f}"),
}


def with_teacher(config: TrainConfig) -> TrainConfig:
    """With `gpu.teacher` training_best or training_geomean, a copy whose `gpu.order` and
    `gpu.reward_baseline` are the rule_scores() winner's, logged on stderr; else `config`."""
    if config.gpu.teacher == "config":
        return config
    began = time.perf_counter()
    jobs = training_jobs(config)
    scores = rule_scores(config, jobs)
    chosen = copy.deepcopy(config)
    _, chosen.gpu.order, chosen.gpu.reward_baseline = scores[0]
    kind = config.gpu.non_blocking, holds(config)
    what, unit = SCORE_NAMES[config.gpu.teacher]
    ranked = ", ".join(f"{rule_name(o, p, *kind)} {unit.format(s)}" for s, o, p in scores)
    windows = len(window_starts(jobs, config.env.window_jobs))
    logger.info(
        f"gpu.teacher {config.gpu.teacher}: {rule_name(*scores[0][1:], *kind)}, {what} on the "
        f"{windows} training windows ({ranked}; {time.perf_counter() - began:.1f} s)"
    )
    return chosen


def choose_teacher(config: TrainConfig, comm: MPI.Comm) -> TrainConfig:
    """with_teacher() on rank 0, its result on every rank (a ConfigError on rank 0 is a
    RunError on every rank)."""
    if config.gpu.teacher == "config":
        return config
    return comm.bcast(control.collectively(comm, with_teacher, config, rank0_only=True), root=0)


def teacher_line(config: TrainConfig) -> str:
    """The run's teacher and reward baseline as a rule, and where it came from."""
    g = config.gpu
    rule = rule_name(g.order, teacher_of(g.reward_baseline), g.non_blocking, holds(config))
    if g.teacher != "config":
        return f"teacher: {rule} (gpu.teacher {g.teacher}: the best on the training windows)"
    return f"teacher: {rule} (gpu.order and gpu.reward_baseline)"


def episode(env: VecGpuEnv, first: int, decide) -> dict:
    """The metrics of environment 0's episode on the window at `first`, `decide(obs)` giving
    each step's actions."""
    env.reset()
    obs = env.begin_at([first])
    while True:
        obs, _, terminated, _, info = env.step(decide(obs))
        if terminated[0]:
            return {name: float(info[name][0]) for name in GPU_EPISODE_METRICS}


def greedy(policy: torch.nn.Module):
    """The policy's most probable actions."""

    @torch.no_grad()
    def decide(obs: dict) -> np.ndarray:
        jobs, cluster = torch.from_numpy(obs["jobs"]), torch.from_numpy(obs["cluster"])
        mask = torch.from_numpy(obs["action_mask"])
        logits, _ = policy(jobs, cluster, mask)
        return masked_distribution(logits, mask).probs.argmax(dim=1).int().numpy()

    return decide


def compare(
    config: TrainConfig, policy: torch.nn.Module, windows: int | None, validation: bool = False
) -> list[dict]:
    """The policy against every heuristic pair, each also as a wait rule (`+wait`: the
    ordering's first waiting job that fits now, else wait; docs/gpu.md, "Heuristics") and as
    a hold rule (`+hold`: the wait rule that also sets aside, "The set-aside hold"), on
    consecutive held-out windows of `env.window_jobs` jobs (with `validation`: on the
    validation jobs instead): rows of mean metrics over the windows."""
    cluster = cluster_of(config)
    if config.data.trace == "synthetic":
        held = workload_of(config, cluster, HELD_OUT_SEED + validation)
    else:
        held = split(config, workload_of(config, cluster, 0))[2 - validation]
    n = config.env.window_jobs
    firsts = window_starts(held, n)[:windows]
    if not firsts:
        raise ConfigError(f"no held-out window of {n} jobs in {len(held)} jobs")
    env = env_for(config, held, cluster, 1, config.run.seed)
    name, began = f"agent ({config.gpu.mode})", time.perf_counter()
    rows = {name: []}
    for k, first in enumerate(firsts, 1):  # the agent is the slow part: its progress
        rows[name].append(episode(env, first, greedy(policy)))
        logger.info(
            f"agent window {k}/{len(firsts)}: avg JCT {rows[name][-1]['avg_jct']:,.0f} s "
            f"({time.perf_counter() - began:.0f} s)"
        )
    for order in ORDERS:
        for placement in PLACEMENTS:
            for wait, hold in ((False, False), (True, False), (False, True)):
                rows[rule_name(order, placement, wait, hold)] = [
                    simulate_gpu(held, cluster, order, placement, 0, f, n, wait, hold).metrics
                    for f in firsts
                ]
    return [
        {
            "scheduler": key,
            "windows": len(firsts),
            **{m: float(np.mean([r[m] for r in results])) for m in GPU_EPISODE_METRICS},
        }
        for key, results in rows.items()
    ]
