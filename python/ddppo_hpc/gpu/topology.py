"""GPU-cluster topologies: racks of machines of GPUs, machine speeds and the communication
cost model (docs/gpu.md, "Topology")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ddppo_hpc import _core

# Relative training throughput per GPU model, V100 = 1 (docs/gpu.md, "Machine speeds").
MODEL_SPEEDS = {
    "P100": 0.6,
    "T4": 0.45,
    "V100M16": 1.0,
    "V100M32": 1.0,
    "A10": 0.9,
    "G2": 1.3,
    "G3": 1.6,
}
NODE_CPU_MILLI, NODE_MEMORY_MIB = 96_000, 393_216  # an 8-GPU node of the Alibaba list
LINK_COSTS = (1.0, 4.0, 16.0)  # same machine (NVLink), same rack, across racks
COMM_PENALTY = 0.05


@dataclass(frozen=True)
class Machines:
    """Per machine: rack, GPUs, CPU (milli-cores), memory (MiB) and GPU model."""

    rack: np.ndarray
    gpus: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    model: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.gpus)

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())

    def nominal_speeds(self) -> np.ndarray:
        return np.array([MODEL_SPEEDS.get(m, 1.0) for m in self.model])

    def fits_empty(self, gpus: np.ndarray, cpu: np.ndarray, mem: np.ndarray) -> np.ndarray:
        """Per job: whether it fits the empty cluster (slots of docs/gpu.md, "Jobs")."""
        keys, inverse = np.unique(np.stack([gpus, cpu, mem], axis=1), axis=0, return_inverse=True)
        fits = np.array([self._slots(*key) >= key[0] for key in keys], dtype=bool)
        return fits[inverse.reshape(-1)]

    def _slots(self, g: float, cpu: float, mem: float) -> int:
        slots = self.gpus.astype(np.int64)
        for capacity, demand in ((self.cpu, cpu), (self.mem, mem)):
            if demand > 0:
                slots = np.minimum(slots, np.floor((capacity + 1e-6) / (demand / g)))
        return int(slots.sum())


def uniform(
    racks: int, machines_per_rack: int, gpus_per_machine: int, models: tuple[str, ...]
) -> Machines:
    """`racks` x `machines_per_rack` machines of `gpus_per_machine` GPUs; machine m has
    model models[m % len(models)]."""
    for name, value in (
        ("racks", racks),
        ("machines per rack", machines_per_rack),
        ("GPUs per machine", gpus_per_machine),
    ):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    if not models:
        raise ValueError("at least one GPU model is needed")
    n = racks * machines_per_rack
    return Machines(
        rack=np.arange(n) // machines_per_rack,
        gpus=np.full(n, gpus_per_machine),
        cpu=np.full(n, float(NODE_CPU_MILLI) * gpus_per_machine / 8),
        mem=np.full(n, float(NODE_MEMORY_MIB) * gpus_per_machine / 8),
        model=tuple(models[m % len(models)] for m in range(n)),
    )


def from_nodes(nodes: list[dict], machines_per_rack: int, every: int = 1) -> Machines:
    """The Alibaba node list's machines with GPUs, in file order; consecutive groups of
    `machines_per_rack` form racks (the list has no rack information). With `every` = k,
    only the 1st, (k+1)-th, ... node of each type (GPU model and GPU count): a machine about
    k times smaller that keeps every type (docs/gpu.md, "Load and machine size")."""
    if machines_per_rack < 1:
        raise ValueError(f"machines per rack must be at least 1, not {machines_per_rack}")
    if every < 1:
        raise ValueError(f"nodes every must be at least 1, not {every}")
    kept = sampled([n for n in nodes if n["gpus"] > 0], every)
    if not kept:
        raise ValueError("the node list has no machine with a GPU")
    return Machines(
        rack=np.arange(len(kept)) // machines_per_rack,
        gpus=np.array([n["gpus"] for n in kept]),
        cpu=np.array([float(n["cpu_milli"]) for n in kept]),
        mem=np.array([float(n["memory_mib"]) for n in kept]),
        model=tuple(n["model"] for n in kept),
    )


def sampled(nodes: list[dict], every: int) -> list[dict]:
    """The nodes whose rank among the nodes of their type (model, GPUs), in list order, is a
    multiple of `every`."""
    seen: dict[tuple, int] = {}
    kept = []
    for n in nodes:
        rank = seen.get((n["model"], n["gpus"]), 0)
        seen[(n["model"], n["gpus"])] = rank + 1
        if rank % every == 0:
            kept.append(n)
    return kept


def true_speeds(machines: Machines, speed_noise: float, speed_seed: int) -> np.ndarray:
    """nominal * exp(speed_noise * z), z standard normal from `speed_seed`, one per machine."""
    if speed_noise < 0:
        raise ValueError(f"speed noise must be >= 0, not {speed_noise}")
    z = np.random.default_rng(speed_seed).standard_normal(len(machines))
    return machines.nominal_speeds() * np.exp(speed_noise * z)


@dataclass(frozen=True)
class Cluster:
    """Machines with the communication-cost model and the speed uncertainty."""

    machines: Machines
    link_costs: tuple[float, float, float] = LINK_COSTS
    comm_penalty: float = COMM_PENALTY
    speed_noise: float = 0.0
    speed_seed: int = 0
    speeds: tuple[float, ...] | None = None  # measured true speeds, instead of drawn ones

    @property
    def total_gpus(self) -> int:
        return self.machines.total_gpus

    def core(self) -> _core.Topology:
        """The C++ topology; raises ValueError on impossible values."""
        m = self.machines
        t = _core.Topology()
        t.rack = m.rack.astype(np.int32).tolist()
        t.gpus = m.gpus.astype(np.int32).tolist()
        t.cpu, t.mem = m.cpu.tolist(), m.mem.tolist()
        t.nominal = m.nominal_speeds().tolist()
        if self.speeds is None:
            t.speed = true_speeds(m, self.speed_noise, self.speed_seed).tolist()
        else:
            t.speed = list(self.speeds)
        t.link_machine, t.link_rack, t.link_cross = map(float, self.link_costs)
        t.comm_penalty = float(self.comm_penalty)
        t.validate()
        return t
