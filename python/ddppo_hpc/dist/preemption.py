"""Straggler preemption (Wijmans et al., "DD-PPO", ICLR 2020): once a fraction `sync_frac`
of the ranks have finished their rollout, the others stop early, but never before
`min_rollout_frac` of the steps. Finished ranks tell the others with non-blocking MPI
messages; a rank still collecting polls for them between steps, so no rank ever waits."""

from __future__ import annotations

import math

from mpi4py import MPI

from ddppo_hpc.config import fewest_rollout_steps

TAG = 7301


class Preemption:
    def __init__(
        self, comm: MPI.Comm, sync_frac: float, min_rollout_frac: float, enabled: bool = True
    ):
        self.comm = comm
        self.needed = math.ceil(sync_frac * comm.Get_size())
        self.min_rollout_frac = min_rollout_frac
        self.enabled = enabled and comm.Get_size() > 1
        self.update = -1
        self.finished = 0
        self.sent: list[MPI.Request] = []

    def begin(self, update: int) -> None:
        """A new rollout; messages about earlier ones are dropped as they arrive."""
        MPI.Request.Waitall(self.sent)
        self.sent = []
        self.update, self.finished = update, 0

    def should_stop(self, step: int, steps: int) -> bool:
        """Whether to end this rollout after `step` steps of `steps`."""
        if not self.enabled or step < fewest_rollout_steps(steps, self.min_rollout_frac):
            return False
        status = MPI.Status()
        while self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=TAG, status=status):
            if self.comm.recv(source=status.Get_source(), tag=TAG) == self.update:
                self.finished += 1
        return self.finished >= self.needed

    def finish(self) -> None:
        """This rank collected all its steps: tell every other rank, without waiting."""
        if not self.enabled:
            return
        for rank in range(self.comm.Get_size()):
            if rank != self.comm.Get_rank():
                self.sent.append(self.comm.isend(self.update, dest=rank, tag=TAG))
