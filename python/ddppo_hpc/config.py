"""Typed training configuration: one dataclass per component, loaded from YAML, overridden
from the command line (`ppo.lr=1e-4`), validated with messages that name the key."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ddppo_hpc.data.source import load_scale_problem, source_problem
from ddppo_hpc.data.split import DEFAULT_SPLIT, split_problem
from ddppo_hpc.io import reason


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the file or key."""


@dataclass
class DataConfig:
    # "synthetic" (the embedded workload), an SWF file or a dataset directory; or a list of
    # them, each a path or {path: P, weight: W}: a rank's environments are shared out among
    # the sources in proportion to W (default 1), each on its own machine size
    trace: str | list = "synthetic"
    # jobs of the embedded workload, all ranks together (GPU mode: DL jobs per rank)
    synthetic_jobs: int = 60_000
    synthetic_seed: int = 0  # the embedded workload's seed
    machine_procs: int = 256  # machine of the embedded workload
    # train / validation / test fractions of the trace's jobs in submit order: ranks share
    # out the train part; `evaluate` scores the test part, `--split validation` the other
    split: list = field(default_factory=lambda: list(DEFAULT_SPLIT))
    # submit-time factors (below 1: a higher offered load): each source's environments are
    # dealt round-robin among them, so that every batch sees every load
    load_scale: list = field(default_factory=lambda: [1.0])


@dataclass
class EnvConfig:
    num_envs: int = 16  # environments per rank
    window_jobs: int = 256  # jobs per episode
    max_queue: int = 64  # K: job slots in the observation
    backfill: str = "easy"  # none | easy | conservative
    # the order of backfill scans (the agent picks the job to run or wait for; backfilling
    # then tries the others in this heuristic's order): fcfs | sjf | wfp3 | unicep | f1
    backfill_order: str = "fcfs"
    # the runtime estimates of the backfill scans (and of reward_baseline's run): request
    # (the users' requested times) | predicted (EASY++, docs/simulation.md)
    estimate: str = "request"
    reward: str = "bsld"  # bsld | wait | utilization | fairshare
    # none, a heuristic (fcfs | sjf | wfp3 | unicep | f1), or best: the reward becomes the
    # difference to that heuristic's on the same window (less variance, same optimum); best:
    # to the run with the lowest avg bsld among every heuristic order (fcfs, sjf, wfp3,
    # unicep, f1, sjbf) on that window, each backfilling in its own order with env.backfill
    # and env.estimate (docs/environment.md, "Best heuristic")
    reward_baseline: str = "none"
    # bsld and wait: each job's share of the reward at the step it starts, not all of it at
    # the episode's end (same episode sums; the value function then predicts only the future)
    dense_reward: bool = False
    reward_scale: float = 100.0  # rewards are divided by this before learning
    # the agent may also wait: action K starts nothing until the next arrival or completion
    # (no backfill scan: nothing is committed); masked when nothing runs and nothing is left
    # to arrive; the heuristics never wait (docs/environment.md, "Waiting")
    wait: bool = False
    # each job slot also shows its EASY++ predicted runtime and its user's history (recent
    # runtime / request, recent runtime, jobs running and waiting), and the cluster features
    # summarise the queue past slot K (count, work, sizes); causal: only jobs completed by
    # now count. Off: the observation of before, so older checkpoints load
    # (docs/environment.md, "History")
    history: bool = False
    # backfill scans (easy or conservative) are the agent's: while a committed job waits, it
    # starts the jobs of its choice among those the backfill allows now, one a step, or stops
    # the scan (action K); the heuristics start the backfill scan's jobs
    # (docs/environment.md, "Agent backfilling")
    agent_backfill: bool = False
    # each job slot also shows its rank among the visible jobs under SJF, WFP3, UNICEP and
    # SJBF (EASY++ predictions), as feature 10 does under F1 (docs/environment.md, "Heuristic
    # ranks"). Off: the observation of before
    heuristic_ranks: bool = False
    # per job slot, after the ranks: how long until the job fits, the running jobs ending at
    # start + requested time (docs/environment.md, "Fit times")
    fit_times: bool = False
    # whose picks ppo.imitation_updates copies: backfill_order (that heuristic's) | best (per
    # episode, the heuristic order with the lowest avg bsld on its window, as reward_baseline
    # best finds it; docs/environment.md, "Best heuristic") | rollout (per pick, of the
    # heuristics' picks the one after which backfill_order does best on the window, simulated
    # on the true runtimes; docs/environment.md, "The rollout teacher")
    teacher: str = "backfill_order"
    # with teacher best: the jobs from the episode's start on which the heuristics' runs choose
    # the teacher (0: the episode's window_jobs); a longer stretch than the episode sees what
    # a greedy order costs later (docs/environment.md, "Best heuristic")
    teacher_jobs: int = 0
    # the agent picks only among the orders' picks: of the visible jobs, the mask keeps FCFS's
    # (slot 0) and the one each of F1, SJF, WFP3, UNICEP and SJBF ranks first (at most 6, and
    # the wait); needs heuristic_ranks (docs/environment.md, "Order picks")
    order_picks: bool = False
    # an action is a rule, a heuristic order (fcfs, sjf, wfp3, unicep, f1, sjbf) with a
    # backfill of action_backfills: the order's pick starts or is committed and the backfill
    # scans are the rule's until the next decision, so following one rule is that rule's run
    # (docs/environment.md, "Order actions")
    order_actions: bool = False
    # with order_actions: the backfills an action may name with its order ([]: env.backfill
    # alone), e.g. [easy, conservative]: 12 actions, every order x backfill reachable exactly
    action_backfills: list = field(default_factory=list)


@dataclass
class PolicyConfig:
    """The network (docs/policies.md describes each policy and key)."""

    name: str = "mlp"  # mlp (RLScheduler's job-scoring kernel) | attention | gtrxl
    hidden: int = 32  # embedding width D
    heads: int = 4  # attention, gtrxl: attention heads (must divide hidden)
    layers: int = 1  # attention, gtrxl: transformer blocks
    memory: int = 16  # gtrxl: M, the episode's last decisions each block attends to
    sect: bool = True  # gtrxl: squeeze-and-excitation gates on the input channels (SECT)
    gate_bias: float = 2.0  # gtrxl: b_g of the GRU gates; larger starts closer to identity


@dataclass
class PPOConfig:
    updates: int = 50
    rollout_steps: int = 128  # T: steps per environment per update
    epochs: int = 4
    minibatches: int = 4  # per epoch, the same count on every rank
    lr: float = 3e-4
    anneal_lr: bool = False  # lr falls linearly to 0 over the updates (CleanRL's default)
    gamma: float = 1.0
    gae_lambda: float = 0.97
    clip: float = 0.2
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    max_grad_norm: float = 0.5
    # the first updates copy the environment's heuristic (HPC: env.teacher's pick, by default
    # the backfill order's; GPU: gpu.order + best_fit): rollouts follow it and the loss is
    # its cross-entropy plus the value loss (behaviour cloning) among the slots the heuristic
    # can choose (not the wait, env.wait or gpu.wait, which stays to PPO); they count in
    # `updates`
    imitation_updates: int = 0
    # who acts in those updates' rollouts: teacher (behaviour cloning, above) | policy
    # (DAgger: the policy's sampled actions step, and the teacher's picks at the states they
    # reach are the labels, so the copy learns where its own mistakes lead)
    imitation_rollout: str = "teacher"
    # the imitation updates' loss: cross_entropy (of the teacher's pick, above) | costs (with
    # env.order_actions: at each state, the rules of least window avg bsld if followed from
    # there on, that state weighted by what a random rule loses; docs/environment.md "Rule
    # costs")
    imitation_loss: str = "cross_entropy"
    # after the imitation updates, PPO's loss adds this times the cross-entropy of the
    # teacher's pick among the teacher's slots (the wait stays to PPO) at every rollout state
    # whose slots show it (a behaviour-cloning term as in DAPG, Rajeswaran et al., 2018): the
    # policy leaves the teacher only where the advantage pays for it; 0: off
    imitation_coef: float = 0.0
    # true: imitation's cross-entropy (and imitation_coef's) also covers the slots the teacher
    # never takes (the wait; GPU mode's set-aside), so the copy starts from the teacher's never
    # taking them and PPO learns where they pay, instead of from whatever probability the
    # untrained slot had (docs/gpu.md, "Why trained runs fail on some seeds")
    imitation_wait: bool = False


@dataclass
class DistConfig:
    sync_frac: float = 0.6  # once this fraction of ranks finished a rollout, the rest stop
    min_rollout_frac: float = 0.25  # but never before this fraction of the steps
    preemption: bool = True
    slow_rank: int = -1  # a rank to slow down artificially (tests and benchmarks)
    slow_factor: float = 1.0  # that rank runs this many times slower (rollout and learning)


@dataclass
class RunConfig:
    seed: int = 0  # environments use seed + rank * num_envs + i
    device: str = "auto"  # auto | cpu | cuda
    checkpoint_every: int = 10  # updates
    eval_windows: int = 10  # held-out windows for the final comparison
    eval_jobs: int = 0  # jobs per validation window (0: env.window_jobs)
    # every checkpoint_every updates, score the greedy policy on eval_windows windows of
    # eval_jobs jobs at the start of the validation part of every source, at every
    # data.load_scale factor; keep the weights with the lowest geometric mean over those
    # sets of their mean avg bsld in best.pt (HPC queue mode)
    keep_best: bool = False


@dataclass
class GpuConfig:
    """GPU-cluster mode (docs/gpu.md): `data.trace` is then a Philly or Alibaba dataset
    directory, a Philly CSV, or "synthetic" (DL jobs, `data.synthetic_jobs` per rank)."""

    mode: str = "off"  # off (HPC queue) | placement (agent places, `order` orders) | dual
    order: str = "srtf"  # the ordering heuristic in placement mode: fifo | srtf | las
    racks: int = 2
    machines_per_rack: int = 4
    gpus_per_machine: int = 8
    models: str = "V100M32,V100M16,P100,T4"  # GPU models, cycled over the machines
    # the trace's own node list as the machines instead (Alibaba: their GPUs, CPU, memory
    # and models, in racks of `machines_per_rack` consecutive nodes; docs/gpu.md, "Topology")
    nodes_topology: bool = False
    # with nodes_topology: one in `nodes_every` nodes of each GPU model and GPU count, a
    # smaller machine with every type (docs/gpu.md, "Load and machine size")
    nodes_every: int = 1
    link_costs: str = "1,4,16"  # same machine, same rack, across racks
    comm_penalty: float = 0.05
    speed_noise: float = 0.2  # log-normal sigma of the hidden per-machine speed factors
    speed_seed: int = 0
    load: float = 0.9  # offered load of the synthetic DL jobs
    # submit times x this factor, traces and synthetic jobs alike (below 1: a higher offered
    # load; the analogue of data.load_scale; docs/gpu.md, "Load and machine size")
    load_scale: float = 1.0
    holdout_jobs: int = 4096  # the trace's last jobs, kept out of training for evaluation
    # the jobs just before the held-out ones, also kept out of training: settings are
    # chosen on them (`evaluate --split validation`), so that the held-out score stays unbiased
    validation_jobs: int = 0
    w_jct: float = 1.0  # reward weights: average JCT (hours)
    w_makespan: float = 0.0  # makespan (hours)
    w_comm: float = 0.1  # average communication cost (per cross-rack link cost)
    # none, or a placement heuristic (first_fit | best_fit | random | speed_fit): rewards
    # become the difference to `order` + that placement on the same window, job by job
    # (less variance, same optimum)
    reward_baseline: str = "none"
    # the agents may also wait: start nothing until the next arrival or completion (a job
    # that would be spread now can wait for a machine; docs/gpu.md, "Environments")
    wait: bool = False
    # only jobs that fit now are committed, and the wait is valid only in a placement step
    # while no other waiting job fits: no decision delays a job that could start
    # (docs/gpu.md, "Environments"); the reward baseline is then the wait rule
    non_blocking: bool = False
    # with wait and non_blocking: the wait also sets the head aside (back to the queue until
    # time advances, the other jobs that fit may start) while it would end sooner on
    # faster GPUs that free later; the baseline and the teacher are then the hold rule
    # (docs/gpu.md, "The set-aside hold")
    set_aside: bool = False
    # with set_aside: false makes the baseline and the teacher the wait rule instead of the
    # hold rule (the agent may set aside, its teacher never does; docs/gpu.md, "The
    # set-aside hold")
    teacher_holds: bool = True
    # config: the teacher and reward baseline are `order` + `reward_baseline` as given |
    # training_best: the rule with the lowest mean avg JCT on the training windows, chosen
    # once when training starts; `order` and `reward_baseline` become its own (docs/gpu.md,
    # "The teacher the training windows choose") | training_geomean: the same, by the
    # geometric mean over the windows of the rule's avg JCT / the window's best rule's
    teacher: str = "config"


@dataclass
class TrainConfig:
    data: DataConfig = field(default_factory=DataConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    run: RunConfig = field(default_factory=RunConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def action_backfills_problem(value: object) -> str | None:
    """What is wrong with `value` as `env.action_backfills`: a list of distinct backfills."""
    known = ("none", "easy", "conservative")
    if not isinstance(value, list) or any(b not in known for b in value):
        return f"must be a list of backfills ({', '.join(known)}), not {value!r}"
    if len(set(value)) < len(value):
        return f"lists a backfill twice: {value!r}"
    return None


CHOICES = {
    ("env", "backfill"): ("none", "easy", "conservative"),
    ("env", "reward"): ("bsld", "wait", "utilization", "fairshare"),
    ("env", "reward_baseline"): ("none", "fcfs", "sjf", "wfp3", "unicep", "f1", "best"),
    ("env", "teacher"): ("backfill_order", "best", "rollout"),
    ("env", "backfill_order"): ("fcfs", "sjf", "wfp3", "unicep", "f1"),
    ("env", "estimate"): ("request", "predicted"),
    ("policy", "name"): ("mlp", "attention", "gtrxl", "dual"),
    ("gpu", "mode"): ("off", "placement", "dual"),
    ("gpu", "order"): ("fifo", "srtf", "las"),
    ("gpu", "reward_baseline"): ("none", "first_fit", "best_fit", "random", "speed_fit"),
    ("gpu", "teacher"): ("config", "training_best", "training_geomean"),
    ("ppo", "imitation_rollout"): ("teacher", "policy"),
    ("ppo", "imitation_loss"): ("cross_entropy", "costs"),
    ("run", "device"): ("auto", "cpu", "cuda"),
}
POSITIVE = {
    ("data", "synthetic_jobs"),
    ("data", "machine_procs"),
    ("env", "num_envs"),
    ("env", "window_jobs"),
    ("env", "max_queue"),
    ("env", "reward_scale"),
    ("policy", "hidden"),
    ("policy", "heads"),
    ("policy", "layers"),
    ("policy", "memory"),
    ("ppo", "updates"),
    ("ppo", "rollout_steps"),
    ("ppo", "epochs"),
    ("ppo", "minibatches"),
    ("ppo", "lr"),
    ("run", "checkpoint_every"),
    ("gpu", "racks"),
    ("gpu", "machines_per_rack"),
    ("gpu", "gpus_per_machine"),
    ("gpu", "nodes_every"),
    ("gpu", "load_scale"),
}
# Keys whose values are lists or several types: what is wrong with a value, or None.
CHECKED = {
    ("data", "trace"): source_problem,
    ("data", "split"): split_problem,
    ("data", "load_scale"): load_scale_problem,
    ("env", "action_backfills"): action_backfills_problem,
}
# What `--resume` may change: how long and how fast the run learns from here, its
# checkpoints, device and evaluation, and the distribution (dist.*). Every other key shapes
# the environments, the network or the data the checkpoint's state belongs to.
RESUMABLE = {
    ("ppo", "updates"),
    ("ppo", "lr"),
    ("ppo", "anneal_lr"),
    ("ppo", "clip"),
    ("ppo", "value_coef"),
    ("ppo", "entropy_coef"),
    ("ppo", "max_grad_norm"),
    ("run", "checkpoint_every"),
    ("run", "device"),
    ("run", "eval_windows"),
    ("run", "eval_jobs"),
    *(("dist", f.name) for f in dataclasses.fields(DistConfig)),
}


def _set(config: TrainConfig, section: str, key: str, value: object, where: str) -> None:
    part = getattr(config, str(section), None)
    if part is None or not dataclasses.is_dataclass(part):
        raise ConfigError(f"{where}: unknown section '{section}'")
    fields = {f.name: f for f in dataclasses.fields(part)}
    if key not in fields:
        raise ConfigError(f"{where}: unknown key '{section}.{key}' (known: {', '.join(fields)})")
    name = f"{where}: '{section}.{key}'"
    check = CHECKED.get((section, key))
    if check is None:
        setattr(part, key, _convert(value, type(getattr(part, key)), name))
        return
    problem = check(value)
    if problem:
        raise ConfigError(f"{name}: {problem}")
    setattr(part, key, value)


def _convert(value: object, kind: type, name: str) -> object:
    if kind is bool and isinstance(value, str):
        value = {"true": True, "false": False}.get(value.lower(), value)
    if kind is float and isinstance(value, (int, str)) and not isinstance(value, bool):
        with contextlib.suppress(ValueError):
            value = float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ConfigError(f"{name} must be {kind.__name__}, not {value!r}")
    if kind is float and not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, not {value!r}")
    return value


def _validate(config: TrainConfig) -> None:
    for (section, key), allowed in CHOICES.items():
        if getattr(getattr(config, section), key) not in allowed:
            raise ConfigError(f"'{section}.{key}' must be one of {', '.join(allowed)}")
    for section, key in POSITIVE:
        if getattr(getattr(config, section), key) <= 0:
            raise ConfigError(f"'{section}.{key}' must be positive")
    if config.policy.name != "mlp" and config.policy.hidden % config.policy.heads:
        raise ConfigError(
            f"'policy.hidden' ({config.policy.hidden}) must be a multiple of 'policy.heads' "
            f"({config.policy.heads})"
        )
    if config.env.dense_reward and config.env.reward not in ("bsld", "wait"):
        raise ConfigError(
            f"'env.dense_reward' needs 'env.reward' bsld or wait (a sum over jobs), "
            f"not {config.env.reward}"
        )
    if config.env.wait and config.gpu.mode != "off":
        raise ConfigError("'env.wait' is for the HPC queue (gpu.mode: off); GPU mode: 'gpu.wait'")
    if config.env.agent_backfill and config.gpu.mode != "off":
        raise ConfigError("'env.agent_backfill' is for the HPC queue (gpu.mode: off)")
    if config.env.teacher_jobs < 0:
        raise ConfigError("'env.teacher_jobs' must be at least 0 (0: env.window_jobs)")
    if config.env.teacher_jobs and config.env.teacher != "best":
        raise ConfigError("'env.teacher_jobs' needs 'env.teacher' best")
    for key in (
        "heuristic_ranks",
        "fit_times",
        "teacher",
        "teacher_jobs",
        "order_picks",
        "order_actions",
    ):
        if config.gpu.mode != "off" and getattr(config.env, key) != getattr(EnvConfig, key):
            raise ConfigError(f"'env.{key}' is for the HPC queue (gpu.mode: off)")
    if config.env.order_picks and not config.env.heuristic_ranks:
        raise ConfigError("'env.order_picks' needs 'env.heuristic_ranks' true (the orders' picks)")
    if config.env.order_picks and config.env.agent_backfill:
        raise ConfigError("'env.order_picks' cannot be used with 'env.agent_backfill'")
    for key in ("order_picks", "agent_backfill"):
        if config.env.order_actions and getattr(config.env, key):
            raise ConfigError(f"'env.order_actions' cannot be used with 'env.{key}'")
    backfills = config.env.action_backfills
    if backfills and not config.env.order_actions:
        raise ConfigError("'env.action_backfills' needs 'env.order_actions' true")
    if backfills and config.env.backfill not in backfills:
        raise ConfigError(
            f"'env.action_backfills' ({', '.join(backfills)}) must hold 'env.backfill'"
            f" ({config.env.backfill}), the backfill before the first decision"
        )
    if config.env.order_actions and config.env.teacher == "rollout":
        raise ConfigError("'env.order_actions' cannot be used with 'env.teacher' rollout")
    if config.env.agent_backfill and config.env.backfill == "none":
        raise ConfigError("'env.agent_backfill' needs 'env.backfill' easy or conservative")
    listed = len(config.data.trace) if isinstance(config.data.trace, list) else 1
    if listed > config.env.num_envs:
        raise ConfigError(
            f"'data.trace' lists {listed} sources: 'env.num_envs' ({config.env.num_envs}) must "
            "give each at least one environment"
        )
    if config.gpu.mode != "off" and (
        isinstance(config.data.trace, list) or config.data.load_scale != [1.0]
    ):
        raise ConfigError(
            "a list of sources in 'data.trace' and 'data.load_scale' are for the HPC queue "
            "(gpu.mode: off)"
        )
    if config.gpu.nodes_every != 1 and not config.gpu.nodes_topology:
        raise ConfigError(
            "'gpu.nodes_every' samples the trace's node list: it needs 'gpu.nodes_topology: true'"
        )
    if config.gpu.set_aside and not (config.gpu.wait and config.gpu.non_blocking):
        raise ConfigError("'gpu.set_aside' needs 'gpu.wait' and 'gpu.non_blocking'")
    if not config.gpu.teacher_holds and not config.gpu.set_aside:
        raise ConfigError(
            "'gpu.teacher_holds: false' says the teacher does not set aside: it needs "
            "'gpu.set_aside: true' (without it no rule sets aside)"
        )
    if config.gpu.teacher != "config" and config.gpu.mode == "off":
        raise ConfigError(f"'gpu.teacher: {config.gpu.teacher}' is for GPU mode (gpu.mode)")
    if config.run.keep_best and config.gpu.mode != "off":
        raise ConfigError("'run.keep_best' is for the HPC queue (gpu.mode: off)")
    if config.ppo.imitation_coef < 0:
        raise ConfigError("'ppo.imitation_coef' must be at least 0")
    if config.ppo.imitation_updates < 0:
        raise ConfigError("'ppo.imitation_updates' must be at least 0")
    if config.ppo.imitation_loss == "costs" and not config.env.order_actions:
        raise ConfigError("'ppo.imitation_loss: costs' needs 'env.order_actions' true (the rules)")
    if config.run.eval_jobs < 0:
        raise ConfigError("'run.eval_jobs' must be at least 0 (0: env.window_jobs)")
    if config.dist.slow_factor < 1:
        raise ConfigError("'dist.slow_factor' must be at least 1")
    if not 0 < config.dist.sync_frac <= 1 or not 0 < config.dist.min_rollout_frac <= 1:
        raise ConfigError("'dist.sync_frac' and 'dist.min_rollout_frac' must be in (0, 1]")
    _check_minibatches(config)
    expected = {"off": ("mlp", "attention", "gtrxl"), "placement": ("mlp",), "dual": ("dual",)}
    if config.policy.name not in expected[config.gpu.mode]:
        raise ConfigError(
            f"'gpu.mode: {config.gpu.mode}' needs 'policy.name' "
            + ", ".join(expected[config.gpu.mode])
        )


def fewest_rollout_steps(rollout_steps: int, min_rollout_frac: float) -> int:
    """The steps a preempted rollout keeps at the least (dist.preemption)."""
    return math.ceil(min_rollout_frac * rollout_steps)


def _check_minibatches(config: TrainConfig) -> None:
    """Every rank runs `ppo.minibatches` optimizer steps (all-reduces) per epoch whatever its
    sample count: each minibatch must hold a sample even on a rank cut short by preemption."""
    env, ppo, dist = config.env, config.ppo, config.dist
    if dist.preemption:
        steps = fewest_rollout_steps(ppo.rollout_steps, dist.min_rollout_frac)
        how = "env.num_envs x ceil(dist.min_rollout_frac x ppo.rollout_steps), as preemption "
        how += "may cut rollouts short"
    else:
        steps, how = ppo.rollout_steps, "env.num_envs x ppo.rollout_steps"
    fewest = env.num_envs * steps
    if ppo.minibatches > fewest:
        raise ConfigError(
            f"'ppo.minibatches' ({ppo.minibatches}) must not exceed the fewest samples a rank "
            f"holds in an update, {how}: {env.num_envs} x {steps} = {fewest}"
        )


def load_config(path: str | Path | None, overrides: list[str] = ()) -> TrainConfig:
    """Defaults, then the YAML file's sections, then `section.key=value` overrides."""
    config = TrainConfig()
    if path is not None:
        try:
            document = yaml.safe_load(Path(path).read_text()) or {}
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file") from None
        except OSError as e:
            raise ConfigError(f"{path}: cannot read: {reason(e)}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a YAML file (not UTF-8 text)") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        _set_sections(config, document, str(path))
    return apply_overrides(config, overrides)


def _set_sections(config: TrainConfig, document: object, where: str) -> None:
    if not isinstance(document, dict):
        raise ConfigError(f"{where}: expected sections (data:, env:, ppo:, ...)")
    for section, values in document.items():
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: section '{section}' must hold keys")
        for key, value in values.items():
            _set(config, section, key, value, where)


def apply_overrides(config: TrainConfig, overrides: list[str]) -> TrainConfig:
    """`section.key=value` items (values parsed as YAML), then validation."""
    for item in overrides:
        name, sep, value = item.partition("=")
        section, dot, key = name.partition(".")
        if not sep or not dot:
            raise ConfigError(f"override '{item}' is not section.key=value")
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"command line: '{name}': {value!r} is not a YAML value") from None
        _set(config, section, key, value, "command line")
    _validate(config)
    return config


def from_dict(document: dict, overrides: list[str] = (), where: str = "checkpoint") -> TrainConfig:
    """The configuration saved in a checkpoint, with overrides (e.g. more updates); errors in
    the saved keys name `where`."""
    config = TrainConfig()
    _set_sections(config, document, where)
    return apply_overrides(config, overrides)


def resume_config(document: dict, overrides: list[str] = ()) -> TrainConfig:
    """A checkpoint's configuration with the overrides of a `--resume`: only RESUMABLE keys
    may take another value."""
    saved, config = from_dict(document), from_dict(document, overrides)
    for section in dataclasses.fields(config):
        before, after = getattr(saved, section.name), getattr(config, section.name)
        for key in dataclasses.fields(after):
            old, new = getattr(before, key.name), getattr(after, key.name)
            if old != new and (section.name, key.name) not in RESUMABLE:
                may = ", ".join(f"{s}.{k}" for s, k in sorted(RESUMABLE) if s != "dist")
                raise ConfigError(
                    f"command line: '{section.name}.{key.name}' cannot change on --resume (the "
                    f"run has {old!r}); only {may} and dist.* may: start a new run to change it"
                )
    return config
