"""GPU mode of training and evaluation: the cluster, each rank's jobs and the held-out
windows from the configuration (config.GpuConfig)."""

from __future__ import annotations

import numpy as np
import torch

from ddppo_hpc.config import ConfigError, TrainConfig
from ddppo_hpc.data.dljobs import generate_dl_jobs
from ddppo_hpc.gpu import ORDERS, PLACEMENTS, simulate_gpu
from ddppo_hpc.gpu.env import GPU_EPISODE_METRICS, VecGpuEnv
from ddppo_hpc.gpu.topology import Cluster, Machines, uniform
from ddppo_hpc.gpu.workload import GpuWorkload, from_trace, load, node_machines
from ddppo_hpc.rl.ppo import masked_distribution

HELD_OUT_SEED = 987_654  # the synthetic jobs' seed for evaluation


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


def make_env(config: TrainConfig, rank: int, size: int) -> VecGpuEnv:
    """This rank's environments: its own synthetic jobs, or its block of the training jobs."""
    cluster = cluster_of(config)
    if config.data.trace == "synthetic":
        jobs = workload_of(config, cluster, config.run.seed + 1000 * rank)
    else:
        train = split(config, workload_of(config, cluster, 0))[0]
        jobs = train.slice(rank * len(train) // size, (rank + 1) * len(train) // size)
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
    )


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
    ordering's first waiting job that fits now, else wait; docs/gpu.md, "Heuristics"), on
    consecutive held-out windows of `env.window_jobs` jobs (with `validation`: on the
    validation jobs instead): rows of mean metrics over the windows."""
    cluster = cluster_of(config)
    if config.data.trace == "synthetic":
        held = workload_of(config, cluster, HELD_OUT_SEED + validation)
    else:
        held = split(config, workload_of(config, cluster, 0))[2 - validation]
    n = config.env.window_jobs
    firsts = list(range(0, len(held) - n + 1, n))[:windows]
    if not firsts:
        raise ConfigError(f"no held-out window of {n} jobs in {len(held)} jobs")
    env = env_for(config, held, cluster, 1, config.run.seed)
    name = f"agent ({config.gpu.mode})"
    rows = {name: [episode(env, f, greedy(policy)) for f in firsts]}
    for order in ORDERS:
        for placement in PLACEMENTS:
            for wait in (False, True):
                key = f"{order}+{placement}" + "+wait" * wait
                rows[key] = [
                    simulate_gpu(held, cluster, order, placement, 0, f, n, wait).metrics
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
