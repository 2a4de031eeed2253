"""Agent backfilling against the pure-Python reference: a random agent's picks and backfill
decisions, made in the reference with its own reading of docs/environment.md ("Agent
backfilling"), replayed in the environment: the same masks at every decision and the same
start times, on random small traces under every policy, EASY and conservative, with the requests and
with the EASY++ predictions as estimates."""

import numpy as np
import pytest
import reference_sim
from reference_sim import _earliest_start, _profile, _shadow_time
from simhelpers import random_jobs, trace_of

from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.sim import ESTIMATES, POLICIES

MACHINE = 8
STOP = "stop"


class AgentReference(reference_sim._Sim):
    """The reference whose backfill scans ask `agent(waiting, allowed)` for the job to start
    (None: stop) while some job is allowed."""

    agent = None

    def easy_scan(self, t: float) -> None:
        head = self.committed
        ends = self.estimated_ends(t)
        shadow = _shadow_time(ends, self.free, head.procs)
        extra = self.free + sum(p for e, p in ends if e <= shadow) - head.procs

        def by_shadow(job):
            return t + self.runtime_estimate(job) <= shadow

        while True:
            allowed = [
                j
                for j in self.waiting
                if j.procs <= self.free and (by_shadow(j) or j.procs <= extra)
            ]
            job = self.agent(self.waiting, allowed) if allowed else None
            if job is None:
                return
            if not by_shadow(job):
                extra -= job.procs
            self.start(job, t)

    def conservative_scan(self, t: float) -> None:
        while True:
            ends, reservations, allowed = self.estimated_ends(t), [], []
            for job in [self.committed, *self.ordered(t)]:
                d = self.runtime_estimate(job)
                tau = _earliest_start(_profile(t, self.free, ends, reservations), job.procs, d)
                if tau == t and job.procs <= self.free:  # never the committed job
                    allowed.append(job)
                reservations.append((tau, tau + d, job.procs))
            job = self.agent(self.waiting, allowed) if allowed else None
            if job is None:
                return
            self.start(job, t)


def reference_decisions(jobs, policy, backfill, estimate, rng, monkeypatch):
    """The reference's start times and its decisions in order: (mask over the waiting jobs
    in queue order, True for a backfill decision, the slot chosen or STOP)."""
    decisions = []

    def pick(ordered):
        waiting = sorted(ordered, key=lambda j: (j.submit, j.id))
        slot = int(rng.integers(len(waiting)))
        decisions.append(([True] * len(waiting), False, slot))
        return waiting[slot]

    def backfill_agent(waiting, allowed):
        choice = int(rng.integers(len(allowed) + 1))
        job = allowed[choice] if choice < len(allowed) else None
        mask = [j in allowed for j in waiting]
        decisions.append((mask, True, STOP if job is None else waiting.index(job)))
        return job

    monkeypatch.setattr(AgentReference, "agent", staticmethod(backfill_agent))
    monkeypatch.setattr(reference_sim, "_Sim", AgentReference)
    starts = reference_sim.simulate(jobs, MACHINE, policy, backfill, choose=pick, estimate=estimate)
    return [starts[j.id] for j in jobs], decisions


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("estimate", ESTIMATES)
@pytest.mark.parametrize("backfill", ["easy", "conservative"])
@pytest.mark.parametrize("policy", POLICIES)
def test_random_decisions_match_the_reference(policy, backfill, estimate, seed, monkeypatch):
    rng = np.random.default_rng(seed)
    jobs = random_jobs(rng, 40, MACHINE)
    expected, decisions = reference_decisions(jobs, policy, backfill, estimate, rng, monkeypatch)
    k = len(jobs)  # every waiting job is visible
    env = VecSchedulingEnv(trace_of(jobs, MACHINE), 1, k, k, backfill, policy,
                           estimate=estimate, agent_backfill=True)  # fmt: skip
    obs, _ = env.reset()
    assert sum(backfilling for _, backfilling, _ in decisions) > 5
    for step, (mask, backfilling, slot) in enumerate(decisions):
        shown = obs["action_mask"][0]
        assert shown[: len(mask)].tolist() == mask, step
        assert not shown[len(mask) : k].any() and shown[k] == backfilling, step
        assert obs["cluster"][0, -4] == backfilling
        obs, _, terminated, _, _ = env.step(np.array([k if slot == STOP else slot], np.int32))
        assert terminated[0] == (step == len(decisions) - 1)
    assert env.last_start_times(0).tolist() == expected
