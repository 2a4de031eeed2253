"""`python -m ddppo_hpc.train`: DD-PPO training of a scheduling policy over MPI and Horovod.

    python -m ddppo_hpc.train --config configs/demo.yaml            (size 1)
    mpirun -n 2 python -m ddppo_hpc.train --config configs/demo.yaml
    srun -N 32 python -m ddppo_hpc.train --config configs/paper-scale.yaml --run-dir $RUN

Every rank collects rollouts from its own environments and trace share; gradients are
averaged by Horovod's ring all-reduce (no central learner); slow ranks are cut short once
enough ranks have finished (dist.sync_frac). SIGTERM/SIGUSR1 checkpoint and exit 0 at the
next update, writing `STOPPED` (the update) into the run directory; `--resume` continues
from its checkpoint. A run that reaches its last update writes `COMPLETED` (the update
count). A new run refuses a run directory that holds a run, unless `--force`.
"""

from __future__ import annotations

import argparse
import copy
import math
import time
from pathlib import Path

import numpy as np
import torch
from mpi4py import MPI

from ddppo_hpc.args import run
from ddppo_hpc.config import EnvConfig, TrainConfig, load_config, resume_config
from ddppo_hpc.data.source import at_load, part_trace, rank_train_trace, sources
from ddppo_hpc.data.trace import Trace
from ddppo_hpc.dist import context, control, sync
from ddppo_hpc.dist.preemption import Preemption
from ddppo_hpc.env import VecSchedulingEnv
from ddppo_hpc.env.mixed import MixedVecEnv, dealt, shares
from ddppo_hpc.evaluate import policy_env_options, run_policy
from ddppo_hpc.gpu import training as gpu_training
from ddppo_hpc.log import logger
from ddppo_hpc.metrics_log import MetricsLog, baseline_bslds, score_name
from ddppo_hpc.policy import build_policy, decide, initial_memory, reset_ended
from ddppo_hpc.rl import RolloutStorage, cost_loss, gae, imitation_loss, ppo_loss
from ddppo_hpc.sim import protocol_windows


def make_env(config: TrainConfig, rank: int, size: int) -> VecSchedulingEnv | MixedVecEnv:
    """This rank's environments: HPC queue ones, or GPU-cluster ones (`gpu.mode`). With several
    sources or load factors (data.trace, data.load_scale), a batch of groups, one per source
    and factor, in that order: environment i keeps seed run.seed + rank * num_envs + i."""
    if config.gpu.mode != "off":
        return gpu_training.make_env(config, rank, size)
    env, data = config.env, config.data
    found = sources(data)
    groups, first = [], config.run.seed + rank * env.num_envs
    for source, count in zip(found, shares([s.weight for s in found], env.num_envs)):
        trace = rank_train_trace(source, data, rank, size, env.window_jobs)
        for factor, n in dealt(count, data.load_scale):
            groups.append(queue_envs(at_load(trace, factor), n, env, first))
            first += n
    return groups[0] if len(groups) == 1 else MixedVecEnv(groups)


def queue_envs(trace: Trace, n: int, env: EnvConfig, seed: int) -> VecSchedulingEnv:
    """`n` HPC queue environments on `trace` as `env` configures them, seeds from `seed`."""
    return VecSchedulingEnv(
        trace,
        n,
        env.window_jobs,
        backfill=env.backfill,
        reward=env.reward,
        seed=seed,
        baseline=env.reward_baseline,
        dense=env.dense_reward,
        teacher=env.teacher,
        teacher_jobs=env.teacher_jobs,
        **policy_env_options(env),
    )


class Trainer:
    def __init__(self, config: TrainConfig, ctx: context.Context, run_dir: Path):
        self.config, self.ctx, self.run_dir = config, ctx, run_dir
        env, ppo = config.env, config.ppo
        self.env = make_env(config, ctx.rank, ctx.size)
        _, slots, features = self.env.jobs.shape  # the environment's observation widths
        cluster = self.env.cluster.shape[1]
        torch.manual_seed(config.run.seed)  # the same initial weights everywhere
        self.policy = build_policy(config.policy, features, cluster).to(ctx.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=ppo.lr, eps=1e-5)
        self.generator = torch.Generator().manual_seed(config.run.seed + ctx.rank)
        # A recurrent policy's memory per environment (None for the others).
        self.initial = initial_memory(self.policy, env.num_envs, ctx.device)
        self.memory = None if self.initial is None else self.initial.clone()
        self.storage = RolloutStorage(
            ppo.rollout_steps,
            env.num_envs,
            slots,
            features,
            cluster,
            None if self.initial is None else self.initial.shape[1:],
            costs=ppo.imitation_loss == "costs",
            teacher=ppo.imitation_coef > 0,
        )
        self.preemption = Preemption(
            ctx.comm, config.dist.sync_frac, config.dist.min_rollout_frac, config.dist.preemption
        )
        self.update = 0
        self.best = math.inf  # run.keep_best: the lowest validation score so far
        self.validation = None  # run.keep_best: the validation part's jobs, once read
        self.obs, _ = self.env.reset()

    def observe(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(jobs, cluster, mask) on the policy's device."""
        keys = ("jobs", "cluster", "action_mask")
        return tuple(torch.from_numpy(obs[k]).to(self.ctx.device) for k in keys)

    def value(self, obs: dict) -> torch.Tensor:
        """The state values of an observation (with the current memory), on the CPU."""
        memory = [] if self.memory is None else [self.memory]
        return self.policy(*self.observe(obs), *memory)[1].cpu()

    def act(self, obs: dict) -> tuple[torch.Tensor, ...]:
        """(the actions to step, the actions to learn from, their log-probabilities, values,
        the memory they were decided with); the current memory moves on past the decision.
        The two differ only while imitating with ppo.imitation_rollout `policy` (DAgger): the
        policy's sampled actions step, the teacher's picks are learnt."""

        def sample(dist):
            # On the CPU with this rank's generator: reproducible, and saved in checkpoints.
            return torch.multinomial(dist.probs, 1, generator=self.generator).squeeze(1)

        pick, teacher = sample, None
        if self.imitating():
            teacher = torch.from_numpy(self.env.heuristic_actions()).long().clamp(min=0)
            if self.config.ppo.imitation_rollout == "teacher":  # the rollout follows it
                pick = lambda dist: teacher  # noqa: E731
        memory = self.memory
        actions, dist, values, self.memory = decide(self.policy, self.observe(obs), memory, pick)
        learnt = actions if teacher is None else teacher
        return actions, learnt, dist.log_prob(learnt), values, memory

    def imitated_slots(self) -> int:
        """The slots that imitation's cross-entropy covers: the teacher's, or with
        ppo.imitation_wait every slot (the wait and the set-aside too)."""
        if self.config.ppo.imitation_wait:
            return self.storage.mask.shape[2]
        return self.env.teacher_slots

    def imitating(self) -> bool:
        """Whether this update copies the environment's heuristic (ppo.imitation_updates)."""
        return self.update < self.config.ppo.imitation_updates

    @torch.no_grad()
    def rollout(self) -> dict:
        """Up to T steps of every environment; stops early when preempted."""
        config, storage = self.config, self.storage
        storage.used = 0
        self.preemption.begin(self.update)
        start, scores = time.perf_counter(), []
        steps = config.ppo.rollout_steps
        for step in range(1, steps + 1):
            began = time.perf_counter()
            actions, learnt, logprobs, values, memory = self.act(self.obs)
            storage.insert(self.obs, learnt, logprobs, values, memory)
            if storage.teacher is not None:
                storage.teacher[storage.used] = torch.from_numpy(self.env.heuristic_actions())
            if self.imitating():  # cloned among imitated_slots() (not the wait by default)
                storage.mask[storage.used, :, self.imitated_slots() :] = False
                if storage.costs is not None:  # relative to the cheapest slot cloned
                    costs = self.env.rule_costs()[:, : self.imitated_slots()]
                    relative = costs - costs.min(axis=1, keepdims=True)
                    storage.costs[storage.used, :, : costs.shape[1]] = torch.from_numpy(relative)
            self.obs, reward, terminated, _, info = self.env.step(actions.numpy())
            reset_ended(self.memory, terminated, self.initial)  # a new episode remembers nothing
            storage.outcome(reward / config.env.reward_scale, terminated)
            ended = info[self.env.SCORE][terminated].tolist()
            scores.extend(zip(ended, baseline_bslds(self.env, terminated, config)))
            self.stall(time.perf_counter() - began)
            if step < steps and self.preemption.should_stop(step, steps):
                break
        if storage.used == steps:
            self.preemption.finish()
        last_value = self.value(self.obs)
        return {
            "steps": storage.used,
            "seconds": time.perf_counter() - start,
            "episode_scores": scores,
            "last_value": last_value,
        }

    def learn(self, last_value: torch.Tensor) -> dict:
        """PPO epochs over this rank's samples, gradients averaged over ranks by samples."""
        ppo, s = self.config.ppo, self.storage
        t = s.used
        if ppo.anneal_lr:  # a function of the update count alone, so resume keeps it
            for group in self.optimizer.param_groups:
                group["lr"] = ppo.lr * (1 - self.update / ppo.updates)
        advantages, returns = gae(
            s.rewards[:t], s.values[:t], s.dones[:t], last_value, ppo.gamma, ppo.gae_lambda
        )
        batch = {
            "jobs": s.flat("jobs"),
            "cluster": s.flat("cluster"),
            "mask": s.flat("mask"),
            "actions": s.flat("actions"),
            "logprobs": s.flat("logprobs"),
            "returns": returns.reshape(-1),
            "advantages": sync.normalize_advantages(advantages.reshape(-1)),
        }
        if s.memory is not None:
            batch["memory"] = s.flat("memory")
        if self.imitating() and s.costs is not None:
            batch["costs"] = s.flat("costs")
        if not self.imitating() and s.teacher is not None:
            batch["teacher"] = s.flat("teacher")
        samples = len(batch["actions"])
        total = sync.all_sum(torch.tensor([float(samples)]), "samples").item()
        stats = []
        for _ in range(ppo.epochs):
            order = torch.randperm(samples, generator=self.generator)
            # Exactly `minibatches` parts on every rank, however many samples preemption left
            # it (config.py keeps each part non-empty): the ranks run the same all-reduces.
            for part in order.tensor_split(ppo.minibatches):
                began = time.perf_counter()
                minibatch = {k: v[part].to(self.ctx.device) for k, v in batch.items()}
                if "costs" in minibatch:
                    loss, st = cost_loss(self.policy, minibatch, ppo.value_coef, ppo.entropy_coef)
                elif self.imitating():
                    loss, st = imitation_loss(self.policy, minibatch, ppo.value_coef)
                else:
                    loss, st = ppo_loss(
                        self.policy,
                        minibatch,
                        ppo.clip,
                        ppo.value_coef,
                        ppo.entropy_coef,
                        ppo.imitation_coef,
                        self.imitated_slots(),
                    )
                self.optimizer.zero_grad()
                loss.backward()
                self.stall(time.perf_counter() - began)
                sync.average_gradients(self.policy, samples / total)
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), ppo.max_grad_norm)
                self.optimizer.step()
                stats.append(st)
        return {
            name: float(np.mean([getattr(st, name) for st in stats])) for name in vars(stats[0])
        }

    def stall(self, seconds: float) -> None:
        """On the rank configured as slow, waits (slow_factor - 1) times `seconds`: that
        rank then computes slow_factor times slower (tests and benchmarks of preemption)."""
        if self.ctx.rank == self.config.dist.slow_rank:
            time.sleep((self.config.dist.slow_factor - 1) * seconds)

    def validate(self) -> tuple[float, bool]:
        """(score, whether it is the best so far): the greedy policy's mean avg bsld over
        run.eval_windows consecutive windows of run.eval_jobs jobs from the validation
        part's first job (the last clipped at its end), per source and data.load_scale
        factor; with several sets, the geometric mean of their scores (each trace and load
        counts alike, whatever its bsld scale)."""
        env, data, run = self.config.env, self.config.data, self.config.run
        if self.validation is None:  # read once per run, at the first validation
            parts = [part_trace(s, data, "validation")[0] for s in sources(data)]
            self.validation = [at_load(t, f) for t in parts for f in data.load_scale]
        policy = copy.deepcopy(self.policy).cpu()
        scores, jobs = [], run.eval_jobs or env.window_jobs
        for trace in self.validation:
            windows = protocol_windows(len(trace), 0, run.eval_windows, jobs)
            runs = run_policy(policy, trace, dict(enumerate(windows)), env, env.backfill)
            scores.append(np.mean([metrics["avg_bsld"] for _, _, metrics in runs]))
        score = float(np.exp(np.mean(np.log(scores))))
        improved = score < self.best
        self.best = min(self.best, score)
        return score, improved

    def save(self) -> None:
        shared = {
            "config": self.config.to_dict(),
            "update": self.update,
            "model": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "best_validation": self.best,
        }
        mine = {"generator": self.generator.get_state(), "env": self.env.state()}
        if self.memory is not None:
            mine["memory"] = self.memory.cpu()
        control.save_checkpoint(self.run_dir, self.ctx.comm, shared, mine)

    def restore(self) -> None:
        shared, mine = control.load_checkpoint(self.run_dir, self.ctx.comm)
        self.policy.load_state_dict(shared["model"])
        self.optimizer.load_state_dict(shared["optimizer"])
        for group in self.optimizer.param_groups:  # ppo.lr may change on resume
            group["lr"] = self.config.ppo.lr
        self.generator.set_state(mine["generator"])
        self.obs = self.env.load_state(mine["env"])
        if self.memory is not None:
            self.memory = mine["memory"].to(self.ctx.device)
        self.update = shared["update"]
        self.best = shared.get("best_validation", math.inf)


def start(config: TrainConfig, ctx: context.Context, run_dir: Path, resume: bool) -> Trainer:
    """This rank's trainer, from the checkpoint when resuming."""
    trainer = Trainer(config, ctx, run_dir)
    if resume:
        trainer.restore()
    return trainer


def open_log(config: TrainConfig, run_dir: Path, resumed: int | None) -> MetricsLog:
    """The run's metrics (a resumed run keeps the rows up to update `resumed`); a run that
    goes on is no longer completed or stopped."""
    control.clear_markers(run_dir)
    return MetricsLog(run_dir / control.METRICS, config.ppo.updates, resumed, score_name(config))


def log_update(log: MetricsLog, config: TrainConfig, update: int, losses: dict, ranks) -> None:
    """One row from every rank's (rollout seconds, steps, episodes' (score, baseline's))."""
    times, steps, scores = zip(*ranks)
    log.record(
        update,
        losses,
        list(times),
        list(steps),
        config.ppo.rollout_steps,
        [b for rank in scores for b in rank],
        config.env.num_envs,
    )


def train(
    config: TrainConfig,
    ctx: context.Context,
    run_dir: Path,
    resume: bool,
    force: bool = False,
    stop: control.StopFlag | None = None,
) -> Trainer:
    """Trains to `ppo.updates`. Rank 0 writes the run directory; an error that any rank meets
    (a bad trace, an unreadable checkpoint, a full disk) is a RunError on every rank. `stop`:
    the flag that main() installed before the setup, so that a signal during it stops the
    run at its first update instead of killing it."""
    stop = stop or control.StopFlag()
    comm, updates = ctx.comm, config.ppo.updates

    def on_rank0(work, *args):
        return control.collectively(comm, work, *args, rank0_only=True)

    if not resume:
        on_rank0(control.prepare_run_dir, run_dir, force)
    trainer = control.collectively(comm, start, config, ctx, run_dir, resume)
    sync.broadcast_state(trainer.policy, trainer.optimizer)  # rank 0's state everywhere
    resumed = trainer.update if resume else None
    log = on_rank0(open_log, config, run_dir, resumed)
    while trainer.update < updates:
        rollout = trainer.rollout()
        losses = trainer.learn(rollout["last_value"])
        trainer.update += 1
        mine = (rollout["seconds"], rollout["steps"], rollout["episode_scores"])
        ranks = comm.gather(mine, root=0)
        on_rank0(log_update, log, config, trainer.update, losses, ranks)
        if stop.any_rank(comm):
            trainer.save()
            on_rank0(control.write_marker, run_dir, control.STOPPED, trainer.update)
            logger.info(f"stopped by signal at update {trainer.update}; resume with --resume")
            return trainer
        if trainer.update % config.run.checkpoint_every == 0 or trainer.update == updates:
            checkpoint(trainer, run_dir)
    on_rank0(control.write_marker, run_dir, control.COMPLETED, trainer.update)
    return trainer


def checkpoint(trainer: Trainer, run_dir: Path) -> None:
    """Saves the checkpoint; with run.keep_best, rank 0 first scores the policy on the
    validation part and, when it is the best so far, keeps the checkpoint as best.pt."""
    comm = trainer.ctx.comm
    if not trainer.config.run.keep_best:
        trainer.save()
        return
    score, improved = comm.bcast(
        control.collectively(comm, trainer.validate, rank0_only=True), root=0
    )
    trainer.save()
    if improved:
        control.collectively(comm, control.keep_as_best, run_dir, rank0_only=True)
    best = f"best so far, kept as {control.BEST}" if improved else f"best {trainer.best:.3f}"
    logger.info(f"update {trainer.update}: validation mean avg bsld {score:.3f} ({best})")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m ddppo_hpc.train",
        description=__doc__.split("`: ", 1)[1],
        epilog="overrides: section.key=value (config.py documents every key), e.g. ppo.lr=1e-4 "
        "env.num_envs=32",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help="YAML configuration (default: built-in defaults)")
    p.add_argument("--run-dir", help="checkpoints and metrics (default runs/<config name>)")
    begin = p.add_mutually_exclusive_group()
    begin.add_argument(
        "--resume", action="store_true", help="continue from the run dir's checkpoint"
    )
    begin.add_argument(
        "--force",
        action="store_true",
        help="start over in a run dir that holds a run (removes its checkpoint.pt, metrics.h5, "
        "COMPLETED and STOPPED, nothing else)",
    )
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    return p.parse_args(argv)


def run_config(args: argparse.Namespace, run_dir: Path) -> TrainConfig:
    """The configuration file's, or on --resume the checkpoint's; with the overrides."""
    if args.resume:
        return resume_config(control.checkpoint_config(run_dir), args.overrides)
    return load_config(args.config, args.overrides)


def main(argv: list[str] | None = None) -> int:
    stop = control.StopFlag()  # first: Slurm's --signal may come while the setup runs
    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    name = Path(args.config).stem if args.config else "default"
    run_dir = Path(args.run_dir or Path("runs") / name)
    try:
        config = control.collectively(comm, run_config, args, run_dir)
        if not args.resume:  # a resumed run keeps its checkpoint's teacher
            config = gpu_training.choose_teacher(config, comm)
        ctx = context.init(config.run.device)
        train(config, ctx, run_dir, args.resume, args.force, stop)
    except (control.RunError, context.LaunchError) as e:  # on every rank: rank 0 says it
        if comm.Get_rank() == 0:
            logger.error(f"python -m ddppo_hpc.train: error: {e}")
        return 2
    return 0


if __name__ == "__main__":
    run(main)
