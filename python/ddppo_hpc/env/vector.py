"""A batch of scheduling environments stepped in C++ (the contract: ARCHITECTURE.md, "RL
environment contract"; features and rewards: docs/environment.md)."""

from __future__ import annotations

import numpy as np

from ddppo_hpc import _core
from ddppo_hpc.data.trace import Trace
from ddppo_hpc.sim import POLICIES

JOB_FEATURES = _core.JOB_FEATURES
CLUSTER_FEATURES = _core.CLUSTER_FEATURES
HISTORY_JOB_FEATURES = _core.HISTORY_JOB_FEATURES
HISTORY_CLUSTER_FEATURES = _core.HISTORY_CLUSTER_FEATURES
BACKFILL_CLUSTER_FEATURES = _core.BACKFILL_CLUSTER_FEATURES
RANK_JOB_FEATURES = _core.RANK_JOB_FEATURES
FIT_JOB_FEATURES = _core.FIT_JOB_FEATURES
REWARDS = ("bsld", "wait", "utilization", "fairshare")
# With order actions, action k follows order k (docs/environment.md, "Order actions").
ORDER_ACTIONS = POLICIES
EPISODE_METRICS = ("avg_bsld", "avg_wait", "utilization", "jain_user_bsld")


def feature_widths(
    history: bool,
    agent_backfill: bool = False,
    heuristic_ranks: bool = False,
    fit_times: bool = False,
    order_actions: bool = False,
    action_backfills: int = 1,
) -> tuple[int, int]:
    """(job slot, cluster) feature counts of the observation, with or without `history`,
    `agent_backfill`, `heuristic_ranks`, `fit_times` and `order_actions` (with
    `action_backfills` backfills to name)."""
    jobs = JOB_FEATURES + HISTORY_JOB_FEATURES * history + RANK_JOB_FEATURES * heuristic_ranks
    rules = len(ORDER_ACTIONS) + (action_backfills if action_backfills > 1 else 0)
    jobs += FIT_JOB_FEATURES * fit_times + rules * order_actions
    cluster = CLUSTER_FEATURES + HISTORY_CLUSTER_FEATURES * history
    return jobs, cluster + BACKFILL_CLUSTER_FEATURES * agent_backfill


def user_indices(user: np.ndarray) -> tuple[np.ndarray, int]:
    """(dense 0-based id per job, number of ids) of the users: the known users (>= 0) in
    sorted order, then one id per job whose log gives no user (SWF -1), which is a user of
    its own: a log without users is not one user who owns the whole machine."""
    known = user >= 0
    users, index = np.unique(user[known], return_inverse=True)
    dense = np.empty(len(user), dtype=np.int32)
    dense[known] = index
    dense[~known] = len(users) + np.arange(np.count_nonzero(~known))
    return dense, len(users) + np.count_nonzero(~known)


class VecSchedulingEnv:
    """`num_envs` environments, each on episodes of `window_jobs` consecutive jobs of `trace`
    from seeded random starts (environment i uses seed `seed + i`).

    Observations are the first `max_queue` waiting jobs in FCFS order (`jobs`, shape
    [B, K, JOB_FEATURES]), cluster features ([B, CLUSTER_FEATURES]) and `action_mask`
    ([B, K], True where a job can be picked). An action is a slot index. With `wait`, slot K
    is the wait (start nothing until the next arrival or completion): `jobs` and
    `action_mask` have K + 1 rows, the last the wait slot's. Finished episodes
    restart at once: `terminated[i]` marks the step that ended one, whose metrics are in
    `info`, and row i already shows the next episode. The returned arrays are reused by
    the next step: copy what must outlive it, and do not write into them (the core clears
    only the rows it filled last). With `history`, every job slot also has the
    EASY++ prediction and its user's history, and the cluster features summarise the queue
    past slot K (`jobs` has `job_features`, `cluster` `cluster_features` columns;
    docs/environment.md, "History"). `estimate` (request or predicted, the EASY++
    predictions) is the runtime estimate of the backfill scans and the reward baseline's run.
    With `agent_backfill`, backfill scans are decisions too: the mask shows the jobs the
    backfill allows to start now and slot K stops the scan; the cluster features say whether
    it is one (docs/environment.md, "Agent backfilling"). With `heuristic_ranks`, every job
    slot also has its rank under SJF, WFP3, UNICEP and SJBF, after the other features; with
    `order_picks` (which needs them) the mask shows only the visible jobs that some order
    picks first (docs/environment.md, "Order picks"). With `order_actions`, an action is a
    rule: order k % 6 of ORDER_ACTIONS with backfill k // 6 of `action_backfills` (empty:
    `backfill`): the order's pick among the visible jobs starts or is committed and the backfill
    scans are the rule's until the next decision; slot k shows rule k's pick, with a 1 in its
    order's column (and its backfill's, with several) at the end of the row
    (docs/environment.md, "Order actions"). `teacher` is whose picks
    heuristic_actions() gives: `policy`'s (`backfill_order`) or, with `best`, those of the
    heuristic order that scores the lowest avg bsld on the episode's window (with
    `teacher_jobs` N longer than it, on the N jobs from its start); `baseline` `best` makes
    the reward relative to the window's best run (docs/environment.md, "Best heuristic").
    """

    METRICS = EPISODE_METRICS  # the episode metrics in `info`, in the core's column order
    SCORE = "avg_bsld"  # the metric that training logs per episode
    _pick_columns: tuple[int, ...] = ()  # with order_picks: the rank features, F1's first

    def __init__(
        self,
        trace: Trace,
        num_envs: int,
        window_jobs: int = 1024,
        max_queue: int = 128,
        backfill: str = "easy",
        policy: str = "fcfs",
        reward: str = "bsld",
        seed: int = 0,
        baseline: str = "none",
        dense: bool = False,
        wait: bool = False,
        history: bool = False,
        estimate: str = "request",
        agent_backfill: bool = False,
        heuristic_ranks: bool = False,
        fit_times: bool = False,
        teacher: str = "backfill_order",
        teacher_jobs: int = 0,
        order_picks: bool = False,
        order_actions: bool = False,
        action_backfills: tuple[str, ...] = (),
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, not {num_envs}")
        if teacher_jobs < 0:
            raise ValueError(f"teacher_jobs must be at least 0, not {teacher_jobs}")
        if order_picks and (agent_backfill or not heuristic_ranks):
            raise ValueError("order_picks needs heuristic_ranks, and agent_backfill off")
        if order_actions and (agent_backfill or order_picks or teacher == "rollout"):
            raise ValueError(
                "order_actions cannot be used with agent_backfill, order_picks or the rollout"
                " teacher"
            )
        if order_picks:  # F1's rank (feature 10), then SJF's and the other heuristic ranks
            ranks = JOB_FEATURES + HISTORY_JOB_FEATURES * history
            self._pick_columns = (JOB_FEATURES - 1, *range(ranks, ranks + RANK_JOB_FEATURES))
        user_index, users = user_indices(trace.user)
        self.trace = trace
        self.num_envs, self.max_queue, self.window_jobs = num_envs, max_queue, window_jobs
        self._core = _core.BatchEnv(
            *trace.core_columns(),
            user_index,
            users,
            trace.machine_procs,
            window_jobs,
            max_queue,
            policy,
            backfill,
            estimate,
            reward,
            baseline,
            dense,
            wait,
            history,
            agent_backfill,
            heuristic_ranks,
            fit_times,
            teacher,
            teacher_jobs,
            order_actions,
            list(action_backfills),
            [seed + i for i in range(num_envs)],
        )
        self.job_features = self._core.job_features
        self.cluster_features = self._core.cluster_features
        # An episode has one pick or backfill start per job, and a wait or stop per arrival
        # or completion.
        self._allocate(
            self._core.slots,
            self.job_features,
            self.cluster_features,
            window_jobs * (1 + 2 * (wait or agent_backfill)),
        )
        # The heuristics never wait or stop.
        self.teacher_slots = self._core.slots - wait if order_actions else max_queue

    def _allocate(self, slots: int, features: int, cluster: int, decisions: int) -> None:
        """The arrays the core writes into (handed to it once), and the log of the current
        episode's actions per environment (at most `decisions`): enough to resume it."""
        b = self.num_envs
        self.teacher_slots = slots  # the slots the heuristic (heuristic_actions) can choose
        self.jobs = np.zeros((b, slots, features), dtype=np.float32)
        self.cluster = np.zeros((b, cluster), dtype=np.float32)
        self.mask = np.zeros((b, slots), dtype=np.uint8)
        self.reward = np.zeros(b, dtype=np.float32)
        self.done = np.zeros(b, dtype=np.uint8)
        self.episode_start = np.zeros(b, dtype=np.int64)
        self.episode_metrics = np.zeros((b, len(self.METRICS)), dtype=np.float64)
        self._actions = np.zeros(b, dtype=np.int32)
        self._core.set_outputs(
            self.jobs,
            self.cluster,
            self.mask,
            self.reward,
            self.done,
            self.episode_start,
            self.episode_metrics,
        )
        self._log = np.zeros((b, decisions), dtype=np.int32)
        self._logged = np.zeros(b, dtype=np.int64)

    def observation(self) -> dict[str, np.ndarray]:
        if self._pick_columns:
            self._keep_order_picks()
        return {"jobs": self.jobs, "cluster": self.cluster, "action_mask": self.mask.view(bool)}

    def _keep_order_picks(self) -> None:
        """Masks every visible job that no order picks first: FCFS picks slot 0, F1 and the
        heuristic_ranks orders the job they rank 0. The wait slot keeps its mask."""
        jobs = self.jobs[:, : self.max_queue]
        picked = (jobs[:, :, list(self._pick_columns)] == 0).any(axis=2)
        picked[:, 0] = True
        self.mask[:, : self.max_queue] &= picked

    def reset(self) -> tuple[dict[str, np.ndarray], dict]:
        self._core.reset()
        self._logged[:] = 0
        return self.observation(), {"episode_start": self.episode_start}

    def state(self) -> dict:
        """Where every environment stands: its episode number and that episode's actions."""
        return {
            "episodes": [self._core.episodes(i) - 1 for i in range(self.num_envs)],
            "actions": [self._log[i, : self._logged[i]].tolist() for i in range(self.num_envs)],
        }

    def load_state(self, state: dict) -> dict[str, np.ndarray]:
        """Puts every environment back where `state()` found it; returns the observation."""
        for i, (episode, actions) in enumerate(zip(state["episodes"], state["actions"])):
            self._core.restore(i, episode, actions)
            self._log[i, : len(actions)] = actions
            self._logged[i] = len(actions)
        self._core.observe()
        return self.observation()

    def step(self, actions: np.ndarray) -> tuple:
        """(observation, reward, terminated, truncated, info), batched."""
        self._actions[:] = actions
        self._core.step(self._actions)
        terminated = self.done.view(bool)
        self._log[np.arange(self.num_envs), self._logged] = self._actions
        self._logged += 1
        self._logged[terminated] = 0
        info = {"episode_start": self.episode_start}
        info.update({name: self.episode_metrics[:, k] for k, name in enumerate(self.METRICS)})
        return self.observation(), self.reward, terminated, np.zeros_like(terminated), info

    def begin_at(self, starts: list[int]) -> dict[str, np.ndarray]:
        """Starts environment i on the window at starts[i] (evaluation on chosen windows)."""
        for i, start in enumerate(starts):
            self._core.begin_at(i, start)
            self._logged[i] = 0
        self._core.observe()
        return self.observation()

    def last_start_times(self, i: int) -> np.ndarray:
        """Start times of the jobs (in trace order) of environment i's last finished episode,
        whose first job is `info["episode_start"][i]` of the step that ended it."""
        return self._core.last_start_times(i)

    def window_trace(self, i: int) -> Trace:
        """The trace that environment i's windows come from (every one's, here)."""
        return self.trace

    def teacher(self, i: int) -> str:
        """The heuristic that heuristic_actions() follows in environment i's episode."""
        return self._core.teacher(i)

    def last_best(self, i: int) -> tuple[str, float]:
        """(the best heuristic, its avg bsld) on environment i's last finished episode's
        window; the bsld is NaN unless `teacher` or `baseline` is `best`."""
        return self._core.last_best(i)

    def last_baseline_bsld(self, i: int) -> float:
        """The reward baseline's avg bsld on environment i's last finished episode's window
        (as the environment ran it; NaN without a baseline)."""
        return self._core.last_baseline_bsld(i)

    def heuristic_actions(self) -> np.ndarray:
        """The teacher's pick among each environment's visible jobs (with order actions, the
        teacher's order)."""
        actions = np.zeros(self.num_envs, dtype=np.int32)
        self._core.heuristic_actions(actions)
        return actions

    def rule_costs(self, arrivals: bool = True, runtimes: bool = True) -> np.ndarray:
        """With order actions, [B, slots]: each environment's window avg bsld if it follows
        rule k from now on, and with wait if it waits now and then follows the best rule (on
        the true runtimes and the window's later arrivals: a training signal,
        docs/environment.md "Rule costs"). Without `arrivals` no job arrives after now in the
        rollouts, without `runtimes` each job runs for its estimate; then a cost is the avg
        bsld of the jobs not started yet that the rollout starts, on the runtimes it gives
        them."""
        costs = np.zeros((self.num_envs, self._core.slots), dtype=np.float64)
        self._core.rule_costs(costs, arrivals, runtimes)
        return costs

    def random_actions(self, rng: np.random.Generator) -> np.ndarray:
        """A uniformly random valid slot per environment (the wait among them)."""
        # Counts in the narrowest type that holds them: at B = 64 the int64 temporaries were
        # 130 KB a step, written afresh each time, enough to push the core's state out of L2.
        counts = np.cumsum(self.mask, axis=1, dtype=np.min_scalar_type(self.mask.shape[1]))
        draw = (rng.random(self.num_envs) * counts[:, -1]).astype(counts.dtype)
        return (counts > draw[:, None]).argmax(axis=1).astype(np.int32)
