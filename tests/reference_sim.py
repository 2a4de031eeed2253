"""Pure-Python reference simulator of the contract in docs/simulation.md.

Written for readability: every rule of the doc maps to a few lines below. It is used by the
tests as an oracle for the C++ simulator, so it must stay obviously correct, not fast.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

POLICIES = ("fcfs", "sjf", "wfp3", "unicep", "f1", "sjbf")
BACKFILLS = ("none", "easy", "conservative")
ESTIMATES = ("request", "predicted")

# on_shadow(t, head_id, shadow_time): called at every EASY scan (debug hook for the tests).
ShadowHook = Callable[[float, int, float], None]
# choose(waiting jobs in policy order) -> the job to pick: another picker than the policy's
# (the benchmarks drive it with random picks, like an RL agent).
ChooseHook = Callable[[list["Job"]], "Job"]


@dataclass(frozen=True)
class Job:
    id: int
    submit: float
    runtime: float
    procs: int
    requested_time: float
    user: int = -1


def score(policy: str, job: Job, t: float) -> float:
    """The heuristic score of `job` at decision time `t` (lower runs first); sjbf's needs
    the users' history: _Sim.score."""
    w = t - job.submit
    r = job.requested_time if job.requested_time >= 1 else 0.1
    s = job.submit if job.submit >= 1 else 0.1
    n = job.procs
    if policy == "fcfs":
        return s
    if policy == "sjf":
        return r
    if policy == "wfp3":
        return -math.pow(w / r, 3.0) * n
    if policy == "unicep":
        log2_n = math.log2(n) if n != 1 else 1e-15
        return -w / (log2_n * r)
    if policy == "f1":
        return math.log10(r) * n + 870 * math.log10(s)
    raise ValueError(f"unknown policy {policy!r}")


def _profile(
    t: float,
    free0: int,
    ends: list[tuple[float, int]],
    reservations: list[tuple[float, float, int]],
) -> list[tuple[float, int]]:
    """Free procs over time as steps [(time, level)], sorted, the first one at `t`.

    level(tau) = free0 + procs of running jobs with estimated end <= tau
                 - procs of reservations [a, b) with a <= tau < b.
    """
    deltas: dict[float, int] = defaultdict(int)
    deltas[t] += 0
    for end, procs in ends:
        deltas[end] += procs
    for a, b, procs in reservations:
        deltas[a] -= procs
        deltas[b] += procs
    steps, level = [], free0
    for time in sorted(deltas):
        level += deltas[time]
        steps.append((time, level))
    return steps


def _earliest_start(steps: list[tuple[float, int]], procs: int, d: float) -> float:
    """Smallest tau among t and the rise times where the profile is >= procs on [tau, tau+d)."""
    for i, (tau, level) in enumerate(steps):
        rises = True
        if not rises or level < procs:
            continue
        if all(lv >= procs for time, lv in steps[i + 1 :] if time < tau + d):
            return tau
    raise AssertionError("a job always fits once every running job and reservation has ended")


def _shadow_time(ends: list[tuple[float, int]], free: int, procs: int) -> float:
    """EASY: walk the running jobs by estimated end, adding their procs, until `procs` fit."""
    for end, released in ends:
        free += released
        if free >= procs:
            return end
    raise AssertionError("the committed job fits once every running job has ended")


@dataclass
class _Sim:
    policy: str
    backfill: str
    on_shadow: ShadowHook | None
    choose: ChooseHook | None = None
    estimate: str = "request"
    free: int = 0
    waiting: list[Job] = field(default_factory=list)
    running: list[tuple[float, Job]] = field(default_factory=list)  # (start, job)
    committed: Job | None = None
    starts: dict[int, float] = field(default_factory=dict)
    # EASY++: per user, (end, submit, id, runtime) of the completed jobs, sorted (the most
    # recent last); the started jobs not yet in it; each started job's prediction p_run.
    history: dict[int, list[tuple]] = field(default_factory=lambda: defaultdict(list))
    not_in_history: list[tuple[float, Job]] = field(default_factory=list)
    predicted_run: dict[int, float] = field(default_factory=dict)

    def score(self, job: Job, t: float) -> float:
        if self.policy == "sjbf":
            p = self.prediction(job)
            return p if p >= 1 else 0.1
        return score(self.policy, job, t)

    def ordered(self, t: float) -> list[Job]:
        """Waiting jobs (the committed one excluded) by score at t, then submit, then id."""
        return sorted(self.waiting, key=lambda j: (self.score(j, t), j.submit, j.id))

    def prediction(self, job: Job) -> float:
        """p(J, t) from the history at t: the mean runtime of the user's two most recently
        completed jobs (or the only one's), capped by the request; the request without."""
        done = self.history[job.user] if job.user >= 0 else []
        if not done:
            return job.requested_time
        last = [runtime for *_, runtime in done[-2:]]
        mean = last[0] if len(last) == 1 else (last[0] + last[1]) / 2
        return min(mean, job.requested_time)

    def runtime_estimate(self, job: Job) -> float:
        """What backfilling takes as the job's runtime if it started now."""
        return self.prediction(job) if self.estimate == "predicted" else job.requested_time

    def start(self, job: Job, t: float) -> None:
        self.starts[job.id] = t
        self.predicted_run[job.id] = self.prediction(job)
        self.not_in_history.append((t, job))
        if job in self.waiting:
            self.waiting.remove(job)
        if job.runtime > 0:  # a runtime-0 job returns its procs at once and never runs
            self.running.append((t, job))
            self.free -= job.procs

    def apply_completions(self, t: float) -> None:
        ended = [(s, j) for s, j in self.running if s + j.runtime <= t]
        for s, j in ended:
            self.running.remove((s, j))
            self.free += j.procs
        # The history at t: every job that ended by t and started before t (a runtime-0 job
        # started at t joins at the next event time).
        done = [(s, j) for s, j in self.not_in_history if s < t and s + j.runtime <= t]
        for s, j in done:
            self.not_in_history.remove((s, j))
            bisect.insort(self.history[j.user], (s + j.runtime, j.submit, j.id, j.runtime))

    def decide(self, t: float) -> None:
        """Steps 1 and 2 of the decision model at time t."""
        if self.committed is not None:
            if self.committed.procs > self.free:
                self.scan(t)
                return
            self.start(self.committed, t)
            self.committed = None
        while self.waiting:
            job = self.choose(self.ordered(t)) if self.choose else self.ordered(t)[0]
            if job.procs > self.free:
                self.waiting.remove(job)
                self.committed = job
                self.scan(t)
                return
            self.start(job, t)

    def scan(self, t: float) -> None:
        if self.backfill == "easy":
            self.easy_scan(t)
        elif self.backfill == "conservative":
            self.conservative_scan(t)
        elif self.backfill != "none":
            raise ValueError(f"unknown backfill {self.backfill!r}")

    def estimated_end(self, s: float, job: Job, t: float) -> float:
        """Of a job running since s: with predictions start + p_run until it outruns them;
        else, or then, max(start + requested_time, t)."""
        if self.estimate == "predicted" and s + self.predicted_run[job.id] > t:
            return s + self.predicted_run[job.id]
        return max(s + job.requested_time, t)

    def estimated_ends(self, t: float) -> list[tuple[float, int]]:
        """(estimated end at t, procs) of every running job, by estimated end."""
        return sorted((self.estimated_end(s, j, t), j.procs) for s, j in self.running)

    def easy_scan(self, t: float) -> None:
        head = self.committed
        ends = self.estimated_ends(t)
        shadow = _shadow_time(ends, self.free, head.procs)
        extra = self.free + sum(p for e, p in ends if e <= shadow) - head.procs
        if self.on_shadow is not None:
            self.on_shadow(t, head.id, shadow)
        for job in self.ordered(t):
            if job.procs > self.free:
                continue
            if t + self.runtime_estimate(job) <= shadow:
                self.start(job, t)
            elif job.procs <= extra:
                extra -= job.procs
                self.start(job, t)

    def conservative_scan(self, t: float) -> None:
        ends = self.estimated_ends(t)
        free0 = self.free
        reservations: list[tuple[float, float, int]] = []
        for job in [self.committed, *self.ordered(t)]:
            d = self.runtime_estimate(job)
            tau = _earliest_start(_profile(t, free0, ends, reservations), job.procs, d)
            # The committed job never fits the real free procs here, so it is always reserved.
            if tau == t and job.procs <= self.free:
                self.start(job, t)
                if job.runtime > 0:
                    reservations.append((t, t + d, job.procs))
            else:
                reservations.append((tau, tau + d, job.procs))


def simulate(
    jobs: list[Job],
    machine_procs: int,
    policy: str,
    backfill: str,
    on_shadow: ShadowHook | None = None,
    choose: ChooseHook | None = None,
    estimate: str = "request",
) -> dict[int, float]:
    """Start time of every job; `jobs` are cleaned and ordered by (submit, id)."""
    if not jobs:
        return {}
    if estimate not in ESTIMATES:
        raise ValueError(f"unknown estimate {estimate!r}")
    sim = _Sim(policy, backfill, on_shadow, choose, estimate, free=machine_procs)
    next_arrival = 0
    t = jobs[0].submit
    while True:
        while next_arrival < len(jobs) and jobs[next_arrival].submit <= t:
            sim.waiting.append(jobs[next_arrival])
            next_arrival += 1
        sim.apply_completions(t)
        sim.decide(t)
        events = [s + j.runtime for s, j in sim.running]
        if next_arrival < len(jobs):
            events.append(jobs[next_arrival].submit)
        if not events:
            break
        t = min(events)
    assert not sim.waiting and sim.committed is None, "jobs left waiting on an idle machine"
    return sim.starts


def metrics(jobs: list[Job], starts: dict[int, float], machine_procs: int) -> dict:
    """The metrics of docs/simulation.md over `jobs` (non-empty, all started)."""
    waits = [starts[j.id] - j.submit for j in jobs]
    bslds = [max(1.0, (w + j.runtime) / max(j.runtime, 10)) for w, j in zip(waits, jobs)]
    makespan = max(starts[j.id] + j.runtime for j in jobs) - jobs[0].submit
    work = sum(j.procs * j.runtime for j in jobs)
    by_user: dict[int, list[float]] = defaultdict(list)
    for b, j in zip(bslds, jobs):
        by_user[j.user].append(b)
    user_bslds = [sum(v) / len(v) for v in by_user.values()]
    jain = sum(user_bslds) ** 2 / (len(user_bslds) * sum(x * x for x in user_bslds))
    return {
        "jobs": len(jobs),
        "avg_wait": sum(waits) / len(jobs),
        "max_wait": max(waits),
        "avg_bsld": sum(bslds) / len(jobs),
        "max_bsld": max(bslds),
        "utilization": work / (machine_procs * makespan) if makespan > 0 else 0.0,
        "makespan": makespan,
        "jain_user_bsld": jain,
    }
