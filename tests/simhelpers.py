"""Converts between the reference's Job lists and the C++ side's Traces; tiny size-1
trainings; where the shared real traces are."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from hypothesis import strategies as st
from reference_sim import Job

from ddppo_hpc.data import convert
from ddppo_hpc.data.gpu import ALIBABA_NODES_HEADER, ALIBABA_PODS_HEADER
from ddppo_hpc.data.trace import Trace
from ddppo_hpc.sim import simulate


def trace_of(jobs: list[Job], machine_procs: int) -> Trace:
    """A Trace of already-clean jobs, ordered as the reference orders them."""
    jobs = sorted(jobs, key=lambda j: (j.submit, j.id))
    return Trace(
        id=np.array([j.id for j in jobs], dtype=np.int64),
        submit=np.array([j.submit for j in jobs], dtype=np.float64),
        runtime=np.array([j.runtime for j in jobs], dtype=np.float64),
        requested_time=np.array([j.requested_time for j in jobs], dtype=np.float64),
        procs=np.array([j.procs for j in jobs], dtype=np.int32),
        user=np.array([j.user for j in jobs], dtype=np.int64),
        group=np.full(len(jobs), -1, dtype=np.int64),
        queue=np.full(len(jobs), -1, dtype=np.int64),
        machine_procs=machine_procs,
    )


def cpp_starts(
    jobs: list[Job], machine_procs: int, policy: str, backfill: str, estimate: str = "request"
) -> dict:
    """The C++ simulator's start time of each job, by id (the reference's format)."""
    trace = trace_of(jobs, machine_procs)
    result = simulate(trace, policy, backfill, estimate=estimate)
    return dict(zip(trace.id.tolist(), result.start_time.tolist()))


def random_jobs(rng: np.random.Generator, n: int, machine_procs: int) -> list[Job]:
    """Ties in submit, runtimes of 0 and past their request, three users, sizes up to the
    machine."""
    submit = np.cumsum(rng.integers(0, 6, n))
    runtime = rng.integers(0, 40, n)
    request = np.maximum(runtime + rng.integers(-5, 30, n), 0)
    procs = rng.integers(1, machine_procs + 1, n)
    user = rng.integers(0, 3, n)
    return [
        Job(i + 1, float(submit[i]), float(runtime[i]), int(procs[i]), float(request[i]),
            int(user[i]))
        for i in range(n)
    ]  # fmt: skip


@st.composite
def far_plans(draw, max_jobs: int, users: int = 1):
    """Up to `max_jobs` jobs of 1 to `users` users on 2 to 16 procs arriving in bursts, of a
    few sizes (the whole machine among them: the queue holds far more work than the longest
    request), with requests from 1 s to 100 s and runtimes at most their requests, often far
    below (with several users the EASY++ predictions then differ from the requests and
    change as jobs end): long conservative plans (tests/unit/test_conservative_*.py)."""
    machine = draw(st.integers(2, 16))
    sizes = [machine] + draw(st.lists(st.integers(1, machine), min_size=1, max_size=3))
    owners = draw(st.integers(1, users))
    jobs, submit = [], 0
    for i in range(draw(st.integers(max_jobs // 2, max_jobs))):
        submit += draw(st.sampled_from([0, 0, 0, 1, 7]))
        requested = draw(st.sampled_from([1, 3, 10, 30, 100]))
        runtime = draw(st.sampled_from([requested, requested // 2, requested // 10, 0]))
        procs = draw(st.sampled_from(sizes))
        user = draw(st.integers(0, owners - 1))
        jobs.append(Job(i + 1, float(submit), float(runtime), procs, float(requested), user))
    return jobs, machine


def jobs_of(trace: Trace, begin: int = 0, end: int | None = None) -> list[Job]:
    """The reference's Jobs for rows begin .. end-1 of a Trace."""
    return [
        Job(int(trace.id[i]), float(trace.submit[i]), float(trace.runtime[i]),
            int(trace.procs[i]), float(trace.requested_time[i]), int(trace.user[i]))
        for i in range(begin, len(trace) if end is None else end)
    ]  # fmt: skip


# A training run of a few seconds: the overrides the training tests start from.
TINY_TRAINING = [
    "data.synthetic_jobs=3000",
    "env.num_envs=4",
    "env.window_jobs=64",
    "env.max_queue=16",
    "ppo.rollout_steps=24",
    "ppo.minibatches=2",
    "ppo.epochs=2",
    "run.checkpoint_every=100",
]


# A GPU-mode run of a few seconds: synthetic DL jobs on one rack of 2 machines of 4 GPUs.
TINY_GPU = [
    "data.synthetic_jobs=800",
    "env.num_envs=2",
    "env.window_jobs=32",
    "env.max_queue=8",
    "env.reward_scale=1.0",
    "ppo.rollout_steps=16",
    "ppo.minibatches=2",
    "ppo.epochs=1",
    "ppo.updates=2",
    "gpu.racks=1",
    "gpu.machines_per_rack=2",
    "gpu.gpus_per_machine=4",
    "run.checkpoint_every=100",
]


def train_run(run_dir, *overrides: str, resume: bool = False) -> None:
    """A size-1 training into `run_dir` with these overrides (TINY_TRAINING is the caller's
    to pass), or its --resume."""
    args = ["--run-dir", str(run_dir), *(["--resume"] if resume else []), *overrides]
    subprocess.run([sys.executable, "-m", "ddppo_hpc.train", *args], check=True,
                   capture_output=True, timeout=300)  # fmt: skip


def straight_and_resumed(tmp_path, options: list[str], stop: int, updates: int = 4) -> tuple:
    """The checkpoints of a run of `updates` updates and of one stopped after `stop` and
    resumed to `updates` (tmp_path/straight and tmp_path/resumed)."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train_run(straight, *options, f"ppo.updates={updates}")
    train_run(resumed, *options, f"ppo.updates={stop}")
    train_run(resumed, f"ppo.updates={updates}", resume=True)
    return tuple(torch.load(d / "checkpoint.pt", weights_only=False) for d in (straight, resumed))


def traces_dir() -> Path:
    """The shared real traces (../shared/traces from the project root, or $DDPPO_TRACES)."""
    root = Path(__file__).resolve().parent.parent
    return Path(os.environ.get("DDPPO_TRACES", root.parent / "shared" / "traces"))


def assert_restored_alike(env, again, rng, steps: int) -> None:
    """`again`, loaded with `env.state()`, shows env's observation and then steps as env does
    under the same random valid actions (observations, masks, rewards)."""
    obs = again.load_state(env.state())
    assert np.array_equal(obs["jobs"], env.jobs) and np.array_equal(obs["cluster"], env.cluster)
    assert np.array_equal(obs["action_mask"], env.mask.view(bool))
    for _ in range(steps):
        actions = env.random_actions(rng)
        a, ra, *_ = env.step(actions)
        b, rb, *_ = again.step(actions)
        assert np.array_equal(a["jobs"], b["jobs"]) and np.array_equal(ra, rb)
        assert np.array_equal(a["action_mask"], b["action_mask"])


# The jobs of test_gpu_sim.JOBS as a Philly extract: A (0 s, 100 s, 1 GPU), B (0, 10, 2),
# C (1, 20, 1), D (2, 10, 3).
PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:00:00,100.0,1,100.0,aa
2017-10-09 07:00:00,10.0,2,20.0,bb
2017-10-09 07:00:01,20.0,1,20.0,aa
2017-10-09 07:00:02,10.0,3,30.0,bb
"""
# The 2-machine, 4-GPU cluster in one rack.
SMALL_GPU = ["--racks", "1", "--machines-per-rack", "2", "--gpus-per-machine", "2"]


def run_gpu(*args) -> subprocess.CompletedProcess:
    """`python -m ddppo_hpc.gpu ARGS`, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "ddppo_hpc.gpu", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def alibaba_store(directory: Path, nodes: list[str], pods: list[str]) -> Path:
    """An Alibaba GPU 2023 extract (pod and node CSV rows) converted to a store in
    `directory`; the store's path."""

    for name, header, rows in (
        ("pods", ALIBABA_PODS_HEADER, pods),
        ("nodes", ALIBABA_NODES_HEADER, nodes),
    ):
        (directory / f"{name}.csv").write_text("\n".join([",".join(header), *rows]) + "\n")
    convert.convert([directory / "pods.csv", directory / "nodes.csv"], directory / "store")
    return directory / "store"
