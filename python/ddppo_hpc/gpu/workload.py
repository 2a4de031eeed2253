"""GPU jobs for the simulator, from the Philly or Alibaba trace files, a dataset directory
of the trace store, or the synthetic DL-job generator."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ddppo_hpc.data import gpu
from ddppo_hpc.data.convert import input_kind
from ddppo_hpc.data.store import CORE_COLUMNS, TraceStore
from ddppo_hpc.data.trace import TraceError
from ddppo_hpc.gpu.topology import Machines, from_nodes

COLUMNS = ("id", "submit", "runtime", "gpus", "cpu", "mem", "user")


@dataclass(frozen=True)
class GpuWorkload:
    """Jobs in (submit, id) order: GPUs, CPU (milli-cores) and memory (MiB) requests (0:
    none), base runtime, user (-1: unknown). `nodes` is the trace's own node list, if any."""

    id: np.ndarray
    submit: np.ndarray
    runtime: np.ndarray
    gpus: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    user: np.ndarray
    dropped: dict[str, int] = field(default_factory=dict)
    source: str = "<memory>"
    nodes: list[dict] | None = None

    def __len__(self) -> int:
        return len(self.id)

    def select(self, keep: np.ndarray) -> GpuWorkload:
        return replace(self, **{name: getattr(self, name)[keep] for name in COLUMNS})

    def slice(self, start: int, stop: int) -> GpuWorkload:
        return self.select(slice(start, stop))

    def at_load(self, factor: float) -> GpuWorkload:
        """The same jobs with their submit times x `factor` (below 1: they arrive faster, a
        higher offered load; docs/gpu.md, "Load and machine size")."""
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"load scale must be a positive number, not {factor}")
        return self if factor == 1 else replace(self, submit=self.submit * factor)

    def offered_load(self, begin: int, end: int, total_gpus: int) -> float | None:
        """Jobs begin .. end-1's GPU work at base speed over what the cluster can serve while
        they arrive: sum(gpus x runtime) / (GPUs x (last submit - first submit)); None when
        they all arrive at once. Above 1 the queue grows without bound."""
        span = float(self.submit[end - 1] - self.submit[begin])
        if span <= 0:
            return None
        work = float(np.sum(self.gpus[begin:end] * self.runtime[begin:end]))
        return work / (total_gpus * span)

    def arrival_load(self, begin: int, end: int, total_gpus: int) -> float | None:
        """The part of that work that falls within the arrivals if every job started at its
        submit: sum(gpus x min(runtime, last submit - submit)) / (GPUs x (last submit - first
        submit)); None when they all arrive at once. Above 1 some job must wait; unlike the
        offered load, a long job counts only its time before the last arrival."""
        last = float(self.submit[end - 1])
        span = last - float(self.submit[begin])
        if span <= 0:
            return None
        within = np.minimum(self.runtime[begin:end], last - self.submit[begin:end])
        return float(np.sum(self.gpus[begin:end] * within)) / (total_gpus * span)

    def core_columns(self) -> tuple:
        """What the C++ core reads, in its argument order (users as dense ids)."""
        users, index = np.unique(self.user, return_inverse=True)
        return (
            self.id.astype(np.int64),
            self.submit.astype(np.float64),
            self.runtime.astype(np.float64),
            self.gpus.astype(np.int32),
            self.cpu.astype(np.float64),
            self.mem.astype(np.float64),
            index.reshape(-1).astype(np.int32),
            max(len(users), 1),
        )

    def fitted(self, machines: Machines) -> GpuWorkload:
        """Without the jobs that cannot fit the empty cluster, counted as `too_large`."""
        fits = machines.fits_empty(self.gpus, self.cpu, self.mem)
        if not fits.any():
            raise TraceError(
                f"{self.source}: no job fits the cluster of {machines.total_gpus} GPUs"
            )
        dropped = dict(self.dropped)
        dropped["too_large"] = dropped.get("too_large", 0) + int((~fits).sum())
        return replace(self.select(fits), dropped=dropped)


def from_columns(columns: dict, dropped: dict, source: str, nodes=None) -> GpuWorkload:
    """From store or reader columns: `procs` are the GPUs; `cpu_milli` and `memory_mib`
    where the trace has them (Alibaba, synthetic), else 0."""
    n = len(columns["id"])
    return GpuWorkload(
        id=columns["id"],
        submit=columns["submit"],
        runtime=columns["runtime"],
        gpus=columns["procs"].astype(np.int32),
        cpu=columns.get("cpu_milli", np.zeros(n)).astype(np.float64),
        mem=columns.get("memory_mib", np.zeros(n)).astype(np.float64),
        user=columns["user"],
        dropped=dict(dropped),
        source=source,
        nodes=nodes,
    )


def from_trace(trace: gpu.GpuTrace, source: str) -> GpuWorkload:
    return from_columns(trace.columns, trace.dropped, source, trace.machine.get("nodes"))


def from_store(path: str | Path, start: int = 0, jobs: int | None = None) -> GpuWorkload:
    """Jobs start .. start+jobs-1 of a dataset directory holding a GPU trace."""
    store = TraceStore(path)
    kind = store.manifest.get("kind")
    extra = ("cpu_milli", "memory_mib") if kind in ("alibaba", "dljobs") else ()
    columns = store.columns(start, jobs, (*CORE_COLUMNS, *extra))
    dropped = store.manifest.get("dropped", {})
    return from_columns(columns, dropped, str(path), store.manifest["machine"].get("nodes"))


def load(paths: list[str]) -> GpuWorkload:
    """A dataset directory, a Philly job CSV, or an Alibaba pod CSV with its node CSV."""
    if len(paths) == 1 and Path(paths[0]).is_dir():
        return from_store(paths[0])
    kinds = {input_kind(p): p for p in paths}
    if set(kinds) == {"philly"} and len(paths) == 1:
        return from_trace(gpu.read_philly(paths[0]), paths[0])
    if set(kinds) == {"alibaba_pods", "alibaba_nodes"} and len(paths) == 2:
        trace = gpu.read_alibaba(kinds["alibaba_pods"], kinds["alibaba_nodes"])
        return from_trace(trace, kinds["alibaba_pods"])
    names = ", ".join(f"{p} ({input_kind(p)})" for p in paths)
    raise TraceError(
        f"cannot use {names}: give a dataset directory, a Philly job CSV, or an Alibaba pod "
        "CSV with its node CSV"
    )


def node_machines(workload: GpuWorkload, machines_per_rack: int, every: int = 1) -> Machines:
    """The trace's own machines (the Alibaba node list), one in `every` of each type."""
    if workload.nodes is None:
        raise TraceError(f"{workload.source}: this trace has no node list (Alibaba has one)")
    return from_nodes(workload.nodes, machines_per_rack, every)
