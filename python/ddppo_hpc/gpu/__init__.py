"""GPU-cluster mode: the Python facade over the C++ GPU simulator (semantics: docs/gpu.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddppo_hpc import _core
from ddppo_hpc.gpu.topology import Cluster, Machines
from ddppo_hpc.gpu.workload import GpuWorkload

ORDERS = ("fifo", "srtf", "las")
PLACEMENTS = ("first_fit", "best_fit", "random", "speed_fit")
METRICS = (
    "avg_jct",
    "makespan",
    "avg_comm_cost",
    "gpu_utilization",
    "avg_queue_delay",
)


@dataclass(frozen=True)
class GpuResult:
    """A simulated window: jobs `begin .. end-1`, each job's start, end, communication cost
    and GPUs (`gpus[k]` lists job begin + k's GPUs in the order they were chosen)."""

    begin: int
    end: int
    start_time: np.ndarray
    end_time: np.ndarray
    comm_cost: np.ndarray
    gpus: list[np.ndarray]
    metrics: dict


def simulate_gpu(
    workload: GpuWorkload,
    cluster: Cluster,
    order: str = "fifo",
    placement: str = "first_fit",
    seed: int = 0,
    start: int = 0,
    jobs: int | None = None,
    wait: bool = False,
    hold: bool = False,
) -> GpuResult:
    """Simulates jobs `start .. start+jobs-1` (clipped at the end) on the empty cluster;
    `seed` drives the random placement; with `wait`, the wait rule orders (`order`'s first
    waiting job that fits now, else nothing until the next arrival or completion); with
    `hold` (`wait` or not), the hold rule: the wait rule that also sets a job aside while
    holding it is worth it (docs/gpu.md, "The set-aside hold")."""
    if order not in ORDERS:
        raise ValueError(f"unknown ordering '{order}' (choose from {', '.join(ORDERS)})")
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement '{placement}' (choose from {', '.join(PLACEMENTS)})")
    if not 0 <= start < len(workload):
        raise ValueError(f"--start {start} is outside the workload's {len(workload)} jobs")
    if jobs is not None and jobs <= 0:
        raise ValueError(f"--jobs must be positive, not {jobs}")
    end = len(workload) if jobs is None else min(len(workload), start + jobs)
    starts, ends, comm, flat, metrics = _core.simulate_gpu(
        *workload.core_columns(), cluster.core(), order, placement, seed, start, end, wait, hold
    )
    bounds = np.cumsum(workload.gpus[start:end])[:-1]
    return GpuResult(start, end, starts, ends, comm, np.split(flat, bounds), metrics)


__all__ = ["METRICS", "ORDERS", "PLACEMENTS", "Cluster", "GpuResult", "Machines", "simulate_gpu"]
