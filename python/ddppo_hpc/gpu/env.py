"""A batch of GPU-cluster environments stepped in C++ (docs/gpu.md, "Environments"): the
placement agent alone (the ordering is a heuristic) or the dual agent (ordering, then
placement)."""

from __future__ import annotations

import numpy as np

from ddppo_hpc import _core
from ddppo_hpc.env.vector import VecSchedulingEnv
from ddppo_hpc.gpu.topology import Cluster
from ddppo_hpc.gpu.workload import GpuWorkload

SLOT_FEATURES = _core.GPU_SLOT_FEATURES
GLOBAL_FEATURES = _core.GPU_GLOBAL_FEATURES
GPU_EPISODE_METRICS = (
    "avg_jct",
    "makespan",
    "avg_comm_cost",
    "gpu_utilization",
    "avg_queue_delay",
)
MODES = ("placement", "dual")


def teacher_of(baseline: str) -> str:
    """The placement imitation clones and the plan feature shows under a reward baseline
    (docs/gpu.md, "Environments")."""
    return "speed_fit" if baseline == "speed_fit" else "best_fit"


class VecGpuEnv(VecSchedulingEnv):
    """`num_envs` environments on episodes of `window_jobs` consecutive jobs of `workload`
    on `cluster`, from seeded random starts (environment i uses seed `seed + i`).

    The observation has the keys of VecSchedulingEnv so that the same trainer and
    storage serve both: `jobs` holds the S = max(max_queue, GPUs) slots ([B, S,
    SLOT_FEATURES]: waiting jobs in an ordering step, GPUs in a placement step),
    `cluster` the global features ([B, GLOBAL_FEATURES], feature 0 = 1 in a placement
    step) and `action_mask` the valid slots; an ordering step shows the waiting jobs in
    `order`'s order. Rewards: per started job, -(w_jct * JCT / 1 h + w_comm * comm cost /
    link_cross) / window_jobs; at the end, -w_makespan * makespan / 1 h. With `baseline`
    (a placement heuristic), each term is taken relative to the same job's (the window's)
    under `order` + `baseline` on the same window. With `wait`, the last slot is the wait
    action (start nothing until the next arrival or completion). With `non_blocking`, only
    jobs that fit now are committed (an ordering step shows the first K of them) and the
    wait is valid only in a placement step while no other waiting job fits now. With
    `set_aside` (needs both), the wait is valid only while the hold rule would set the head
    aside, and does that (no plain wait); the baseline and heuristic_actions() are the hold
    rule's, and imitation clones its waits too (docs/gpu.md, "The set-aside hold"); with
    `teacher_holds` False they are the wait rule's instead (the agent may set aside, its
    teacher never does). Episode ends, state() and load_state() work as in
    VecSchedulingEnv.
    """

    METRICS = GPU_EPISODE_METRICS
    SCORE = "avg_jct"

    def __init__(
        self,
        workload: GpuWorkload,
        cluster: Cluster,
        num_envs: int,
        window_jobs: int = 256,
        max_queue: int = 32,
        mode: str = "placement",
        order: str = "srtf",
        weights: tuple[float, float, float] = (1.0, 0.0, 0.1),
        seed: int = 0,
        baseline: str = "none",
        wait: bool = False,
        non_blocking: bool = False,
        set_aside: bool = False,
        teacher_holds: bool = True,
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, not {num_envs}")
        if mode not in MODES:
            raise ValueError(f"unknown GPU mode '{mode}' (choose from {', '.join(MODES)})")
        self.workload, self.num_envs, self.window_jobs = workload, num_envs, window_jobs
        self.order = order
        self._core = _core.GpuBatchEnv(
            *workload.core_columns(),
            cluster.core(),
            window_jobs,
            max_queue,
            mode == "dual",
            order,
            *weights,
            baseline,
            wait,
            non_blocking,
            set_aside,
            teacher_holds,
            [seed + i for i in range(num_envs)],
        )
        s = self._core.slots
        self.max_queue = s  # slots per observation, as the trainer sizes its storage
        # An episode has at most one ordering step and g placement steps per job, a wait
        # per arrival or completion, and per arrival or completion a set-aside of each job
        # (with the ordering step that follows it).
        steps = window_jobs * (
            1 + int(workload.gpus.max()) + 2 * wait + 4 * window_jobs * set_aside
        )
        self._allocate(s, SLOT_FEATURES, GLOBAL_FEATURES, steps)
        # only the hold rule waits
        self.teacher_slots = s - (wait and not (set_aside and teacher_holds))
        # what imitation clones and the plan feature shows (docs/gpu.md, "Environments")
        self.teacher = teacher_of(baseline)

    def heuristic_actions(
        self, order: str | None = None, placement: str | None = None
    ) -> np.ndarray:
        """The heuristics' action in each environment's current step (an ordering step: the
        slot showing `order`'s pick, -1 when no slot shows it); `order` defaults to the
        environment's, `placement` to its teacher."""
        order, placement = order or self.order, placement or self.teacher
        actions = np.zeros(self.num_envs, dtype=np.int32)
        self._core.heuristic_actions(order, placement, actions)
        return actions

    def decision(self, i: int = 0) -> tuple[float, int, int]:
        """Environment i's clock, number of waiting jobs and committed job (its index in
        the workload; -1 when none): for traces of decisions."""
        return self._core.decision(i)
