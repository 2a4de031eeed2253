"""Pure-Python reference of the GPU-cluster contract in docs/gpu.md.

Written for readability, as an oracle for the C++ simulator: every rule of the doc maps
to a few lines below. Jobs are GpuJob records; the cluster is a list of RefMachine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TOLERANCE = 1e-6
MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class GpuJob:
    id: int
    submit: float
    runtime: float
    gpus: int
    cpu: float = 0.0
    mem: float = 0.0
    user: int = 0  # dense user id


@dataclass(frozen=True)
class RefMachine:
    rack: int
    gpus: int
    speed: float = 1.0
    cpu: float = 0.0
    mem: float = 0.0
    nominal: float = 1.0  # what speed_fit sees (the true speed is `speed`)


def splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def comm_cost(machines, gpu_machine, gpus, links) -> float:
    """Mean link cost over the pairs of `gpus` (0 for one GPU), pair by pair."""
    if len(gpus) < 2:
        return 0.0
    total, pairs = 0.0, 0
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            ma, mb = gpu_machine[a], gpu_machine[b]
            if ma == mb:
                total += links[0]
            elif machines[ma].rack == machines[mb].rack:
                total += links[1]
            else:
                total += links[2]
            pairs += 1
    return total / pairs


class RefCluster:
    def __init__(self, machines: list[RefMachine], links=(1.0, 4.0, 16.0), penalty=0.05):
        self.machines, self.links, self.penalty = machines, links, penalty
        self.gpu_machine = [m for m, mach in enumerate(machines) for _ in range(mach.gpus)]
        self.owner = [None] * len(self.gpu_machine)  # job id holding each GPU
        self.free_cpu = [m.cpu for m in machines]
        self.free_mem = [m.mem for m in machines]

    def slots(self, m: int, job: GpuJob) -> int:
        free = sum(1 for g, mm in enumerate(self.gpu_machine) if mm == m and self.owner[g] is None)
        for capacity, demand in ((self.free_cpu[m], job.cpu), (self.free_mem[m], job.mem)):
            if demand > 0:
                free = min(free, math.floor((capacity + TOLERANCE) / (demand / job.gpus)))
        return free

    def fits(self, job: GpuJob) -> bool:
        return sum(self.slots(m, job) for m in range(len(self.machines))) >= job.gpus

    def available(self, job: GpuJob) -> list[int]:
        return [
            g
            for g, m in enumerate(self.gpu_machine)
            if self.owner[g] is None and self.slots(m, job) > 0
        ]

    def take(self, gpu: int, job: GpuJob) -> None:
        m = self.gpu_machine[gpu]
        self.owner[gpu] = job.id
        self.free_cpu[m] -= job.cpu / job.gpus
        self.free_mem[m] -= job.mem / job.gpus

    def release(self, job: GpuJob, gpus: list[int]) -> None:
        for gpu in gpus:
            m = self.gpu_machine[gpu]
            self.owner[gpu] = None
            self.free_cpu[m] += job.cpu / job.gpus
            self.free_mem[m] += job.mem / job.gpus

    def duration(self, job: GpuJob, gpus: list[int]) -> tuple[float, float]:
        cost = comm_cost(self.machines, self.gpu_machine, gpus, self.links)
        factor = 1.0 if len(gpus) < 2 else 1 + self.penalty * max(0.0, cost - self.links[0])
        slowest = min(self.machines[self.gpu_machine[g]].speed for g in gpus)
        return job.runtime * factor / slowest, cost

    def best_fit(self, job: GpuJob) -> list[int]:
        n = len(self.machines)
        slots = [self.slots(m, job) for m in range(n)]
        racks = sorted({mach.rack for mach in self.machines})
        rack_slots = {
            r: sum(slots[m] for m in range(n) if self.machines[m].rack == r) for r in racks
        }
        singles = [m for m in range(n) if slots[m] >= job.gpus]
        if singles:
            order = [min(singles, key=lambda m: (slots[m], m))]
        else:
            by_slots = sorted(range(n), key=lambda m: (-slots[m], m))
            fitting = [r for r in racks if rack_slots[r] >= job.gpus]
            if fitting:
                rack = min(fitting, key=lambda r: (rack_slots[r], r))
                by_slots = [m for m in by_slots if self.machines[m].rack == rack]
            order = by_slots
        return self.take_from(order, slots, job.gpus)

    def take_from(self, order, slots, g) -> list[int]:
        plan = []
        for m in order:
            free = [x for x, mm in enumerate(self.gpu_machine) if mm == m and self.owner[x] is None]
            plan += free[: min(slots[m], g - len(plan))]
        return plan

    def speed_fit(self, job: GpuJob) -> list[int]:
        """docs/gpu.md: best_fit's levels; in a level, the group with the highest pace
        (fewest slots, lowest index on ties), then its machines at or above the pace."""
        n, g = len(self.machines), job.gpus
        slots = [self.slots(m, job) for m in range(n)]
        racks = sorted({mach.rack for mach in self.machines})
        in_rack = {r: [m for m in range(n) if self.machines[m].rack == r] for r in racks}
        groups = [[m] for m in range(n) if slots[m] >= g]
        if not groups:
            groups = [in_rack[r] for r in racks if sum(slots[m] for m in in_rack[r]) >= g]
        if not groups:
            groups = [list(range(n))]

        def pace(group):
            # the highest speed v with g slots on the group's machines of speed >= v
            speeds = sorted({self.machines[m].nominal for m in group}, reverse=True)
            for v in speeds:
                if sum(slots[m] for m in group if self.machines[m].nominal >= v) >= g:
                    return v
            raise AssertionError("the group holds g slots")

        best = min(
            range(len(groups)),
            key=lambda k: (-pace(groups[k]), sum(slots[m] for m in groups[k]), k),
        )
        v = pace(groups[best])
        fast = [m for m in groups[best] if self.machines[m].nominal >= v]
        return self.take_from(sorted(fast, key=lambda m: (-slots[m], m)), slots, g)


def attained(jobs, schedule, t, users) -> list[float]:
    service = [0.0] * users
    for job in jobs:
        if job.id in schedule:
            start, end, _, _ = schedule[job.id]
            service[job.user] += job.gpus * (min(t, end) - start)
    return service


def pick(order: str, waiting: list[GpuJob], jobs, schedule, t) -> GpuJob:
    if order == "fifo":
        return waiting[0]
    if order == "srtf":
        return min(waiting, key=lambda j: j.runtime)  # min keeps the first of ties
    service = attained(jobs, schedule, t, max(j.user for j in jobs) + 1)
    return min(waiting, key=lambda j: service[j.user])


def ranking(order: str, waiting: list[GpuJob], jobs, schedule, t) -> list[GpuJob]:
    """The waiting jobs in the ordering's order, ties by queue position."""
    rest, ranked = list(waiting), []
    while rest:
        ranked.append(pick(order, rest, jobs, schedule, t))
        rest.remove(ranked[-1])
    return ranked


def worth_holding(cluster: RefCluster, job: GpuJob, t: float, schedule) -> bool:
    """docs/gpu.md, "The set-aside hold": the job, which fits now, would end sooner at the
    nominal speed v of the machines of nominal speed >= v, started when their free slots and
    the GPUs their running jobs return (at those jobs' ends) first hold its GPUs, than at the
    fastest pace it can get now."""
    machines = cluster.machines
    sooner = math.inf
    for v in sorted({m.nominal for m in machines}, reverse=True):
        group = [m for m, mach in enumerate(machines) if mach.nominal >= v]
        free = sum(cluster.slots(m, job) for m in group)
        if free >= job.gpus:
            return sooner < t + job.runtime / v
        ends = sorted(
            schedule[owner][1]
            for gpu, owner in enumerate(cluster.owner)
            if owner is not None and cluster.gpu_machine[gpu] in group
        )
        if job.gpus - free <= len(ends):
            sooner = min(sooner, ends[job.gpus - free - 1] + job.runtime / v)
    return False


def simulate(jobs, machines, order="fifo", placement="first_fit", seed=0, links=(1, 4, 16),
             penalty=0.05, wait=False, hold=False):  # fmt: skip
    """{job id: (start, end, comm cost, GPUs)} for jobs in (submit, id) order. With `wait`,
    the ordering commits the first job in its order that fits now and otherwise waits. With
    `hold` too, a committed job worth holding goes back to the queue, set aside until time
    advances."""
    cluster = RefCluster(machines, links, penalty)
    pending, waiting, running, schedule = list(jobs), [], [], {}
    t, head, draws, aside = jobs[0].submit, None, 0, set()
    position = {job.id: k for k, job in enumerate(jobs)}
    while len(schedule) < len(jobs):
        for job, gpus in [r for r in running if schedule[r[0].id][1] <= t]:
            cluster.release(job, gpus)
            running.remove((job, gpus))
        while pending and pending[0].submit <= t:
            waiting.append(pending.pop(0))
        if head is None and waiting:
            ranked = ranking(order, waiting, jobs, schedule, t)
            if wait or hold:  # nothing that fits: wait for the next event
                ranked = [j for j in ranked if cluster.fits(j) and j.id not in aside]
            head = ranked[0] if ranked else None
            if head is not None:
                waiting.remove(head)
        if hold and head is not None and worth_holding(cluster, head, t, schedule):
            aside.add(head.id)
            waiting = sorted([*waiting, head], key=lambda j: position[j.id])
            head = None
            continue  # the next decision at the same t, without it
        if head is not None and cluster.fits(head):
            if placement in ("best_fit", "speed_fit"):
                gpus = getattr(cluster, placement)(head)
                for gpu in gpus:
                    cluster.take(gpu, head)
            else:
                gpus = []
                for _ in range(head.gpus):
                    free = cluster.available(head)
                    k = 0
                    if placement == "random":
                        k = splitmix64(seed ^ splitmix64(draws)) % len(free)
                        draws += 1
                    gpus.append(free[k])
                    cluster.take(free[k], head)
            duration, cost = cluster.duration(head, gpus)
            schedule[head.id] = (t, t + duration, cost, gpus)
            running.append((head, gpus))
            head = None
            continue  # the next decision at the same t, after zero-length jobs end
        times = [schedule[j.id][1] for j, _ in running] + [p.submit for p in pending[:1]]
        t, aside = max(t, min(times)), set()
    return schedule
