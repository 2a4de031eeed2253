"""A seeded synthetic generator of deep-learning jobs for GPU clusters (docs/gpu.md).

Shaped after the Philly trace (Jeon et al., USENIX ATC'19): most jobs take one GPU, a few
take 2 to 32; runtimes are log-normal with a median of 20 minutes and a long tail (capped
at 3 days); arrivals are Poisson, their rate set so that the offered load (GPU-seconds
asked per second) is `load` times the cluster's GPUs. Each GPU asks for 6 CPU cores and
24 GiB of memory (an 8-GPU node of the Alibaba list holds 8 such shares); user k of
`users` submits with probability proportional to 1 / k. The jobs depend only on the
arguments.
"""

from __future__ import annotations

import numpy as np

from ddppo_hpc.data.gpu import ALIBABA_DTYPES, GpuTrace

GPU_SIZES = np.array([1, 2, 4, 8, 16, 32])
GPU_PROBS = np.array([0.72, 0.09, 0.09, 0.07, 0.02, 0.01])
RUNTIME_MEDIAN, RUNTIME_SIGMA, RUNTIME_MAX = 1200.0, 1.5, 3 * 86400.0
CPU_PER_GPU, MEMORY_PER_GPU = 6000, 24_576


def generate_dl_jobs(
    jobs: int, cluster_gpus: int, load: float = 0.9, users: int = 16, seed: int = 0
) -> GpuTrace:
    """`jobs` DL jobs for a cluster of `cluster_gpus` GPUs (larger sizes are left out)."""
    if jobs < 1 or cluster_gpus < 1 or users < 1 or not load > 0:
        raise ValueError("jobs, cluster GPUs and users must be >= 1 and the load > 0")
    rng = np.random.default_rng(seed)
    sizes, probs = GPU_SIZES[cluster_gpus >= GPU_SIZES], GPU_PROBS[cluster_gpus >= GPU_SIZES]
    gpus = rng.choice(sizes, size=jobs, p=probs / probs.sum())
    runtime = np.minimum(
        np.round(RUNTIME_MEDIAN * np.exp(RUNTIME_SIGMA * rng.standard_normal(jobs))), RUNTIME_MAX
    )
    mean_work = float((gpus * runtime).mean())
    gaps = rng.exponential(mean_work / (load * cluster_gpus), size=jobs)
    submit = np.floor(np.cumsum(gaps) - gaps[0])
    weights = 1.0 / np.arange(1, users + 1)
    user = rng.choice(users, size=jobs, p=weights / weights.sum())
    columns = {
        "id": np.arange(1, jobs + 1),
        "submit": submit,
        "runtime": runtime,
        "requested_time": runtime,
        "procs": gpus,
        "user": user,
        "group": np.full(jobs, -1),
        "queue": np.full(jobs, -1),
        "cpu_milli": gpus * CPU_PER_GPU,
        "memory_mib": gpus * MEMORY_PER_GPU,
        "num_gpu": gpus,
        "gpu_milli": np.full(jobs, 1000),
        "gpu_spec": np.full(jobs, -1),
        "qos": np.full(jobs, -1),
        "scheduled": submit,
        "pod_phase": np.full(jobs, -1),
    }
    columns = {name: columns[name].astype(dtype) for name, dtype in ALIBABA_DTYPES.items()}
    dropped = {"negative_runtime": 0, "no_procs": 0, "too_large": 0}
    machine = {"kind": "gpu_pool", "gpus": cluster_gpus}
    meta = {"kind": "dljobs", "jobs": jobs, "load": load, "users": users, "seed": seed}
    return GpuTrace(columns, dropped, machine, meta)
