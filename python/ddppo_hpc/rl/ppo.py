"""Proximal Policy Optimization (Schulman et al., 2017) with GAE (Schulman et al., 2016),
for policies over masked job slots."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.distributions import Categorical


class RolloutStorage:
    """T steps of B environments, preallocated; `used` steps are filled (DD-PPO may stop a
    rollout early). With `memory_shape` (a recurrent policy's memory per environment), each
    step also keeps the memory the decision was made with, so that the update recomputes
    exactly the rollout's log-probabilities."""

    def __init__(
        self,
        steps: int,
        num_envs: int,
        slots: int,
        job_features: int,
        cluster_features: int,
        memory_shape: tuple[int, ...] | None = None,
        costs: bool = False,
        teacher: bool = False,
    ):
        t, b = steps, num_envs
        self.jobs = torch.zeros(t, b, slots, job_features)
        self.cluster = torch.zeros(t, b, cluster_features)
        self.mask = torch.zeros(t, b, slots, dtype=torch.bool)
        self.actions = torch.zeros(t, b, dtype=torch.long)
        self.logprobs = torch.zeros(t, b)
        self.values = torch.zeros(t, b)
        self.rewards = torch.zeros(t, b)
        self.dones = torch.zeros(t, b)  # 1 where the episode ended after the step's action
        self.memory = None if memory_shape is None else torch.zeros(t, b, *memory_shape)
        # With `costs`: each slot's cost to go at the step (cost_loss), 0 where masked.
        self.costs = torch.zeros(t, b, slots) if costs else None
        # With `teacher`: the teacher's pick at the step, -1 where no slot shows it
        # (teacher_cross_entropy).
        self.teacher = torch.zeros(t, b, dtype=torch.long) if teacher else None
        self.used = 0

    def insert(self, obs: dict, actions, logprobs, values, memory=None) -> None:
        """A step's observation, the memory it was seen with, and the decision (copied: the
        environment reuses its arrays)."""
        t = self.used
        self.jobs[t] = torch.from_numpy(obs["jobs"])
        self.cluster[t] = torch.from_numpy(obs["cluster"])
        self.mask[t] = torch.from_numpy(obs["action_mask"])
        self.actions[t], self.logprobs[t], self.values[t] = actions, logprobs, values
        if self.memory is not None:
            self.memory[t] = memory

    def outcome(self, rewards, dones) -> None:
        """What the step's actions brought; the step is then complete."""
        self.rewards[self.used] = torch.as_tensor(rewards)
        self.dones[self.used] = torch.as_tensor(dones, dtype=torch.float32)
        self.used += 1

    def flat(self, name: str) -> torch.Tensor:
        """The filled steps of a field, environments flattened into one batch dimension."""
        values = getattr(self, name)[: self.used]
        return values.reshape(-1, *values.shape[2:])


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_value: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns, [T, B]. `dones[t]` cuts the bootstrap after step t;
    `last_value` is the value of the observation after the last step."""
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(last_value)
    next_value = last_value
    for t in reversed(range(rewards.shape[0])):
        alive = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * alive - values[t]
        running = delta + gamma * lam * alive * running
        advantages[t] = running
        next_value = values[t]
    return advantages, advantages + values


@dataclass
class PPOStats:
    policy_loss: float
    value_loss: float
    entropy: float
    approx_kl: float
    clip_fraction: float


def masked_distribution(logits: torch.Tensor, mask: torch.Tensor) -> Categorical:
    """A categorical over the valid slots only: masked slots get probability exactly 0."""
    return Categorical(logits=logits.masked_fill(~mask, torch.finfo(logits.dtype).min))


def _evaluate(
    policy, batch: dict[str, torch.Tensor]
) -> tuple[Categorical, torch.Tensor, torch.Tensor]:
    """The policy on a minibatch: (distribution, log-probabilities of the stored actions,
    the value loss). A recurrent policy gets the stored memory of each sample."""
    memory = [batch["memory"]] if "memory" in batch else []
    logits, values = policy(batch["jobs"], batch["cluster"], batch["mask"], *memory)[:2]
    dist = masked_distribution(logits, batch["mask"])
    return dist, dist.log_prob(batch["actions"]), 0.5 * (values - batch["returns"]).pow(2).mean()


def imitation_loss(
    policy, batch: dict[str, torch.Tensor], value_coef: float
) -> tuple[torch.Tensor, PPOStats]:
    """Behaviour cloning on one minibatch: the cross-entropy of the stored actions (a
    teacher's), with the value loss on the teacher's returns."""
    dist, logprobs, value_loss = _evaluate(policy, batch)
    policy_loss = -logprobs.mean()
    stats = PPOStats(policy_loss.item(), value_loss.item(), dist.entropy().mean().item(), 0.0, 0.0)
    return policy_loss + value_coef * value_loss, stats


def cost_loss(
    policy, batch: dict[str, torch.Tensor], value_coef: float, entropy_coef: float
) -> tuple[torch.Tensor, PPOStats]:
    """Cost-sensitive imitation (AggreVaTe, Ross and Bagnell, 2014) on one minibatch, by
    weighted classification: the cross-entropy of the state's cheapest slots (batch["costs"],
    each relative to the state's cheapest, are 0 there; ties share the target), each state
    weighted by what a uniformly random valid slot loses there (weights over the minibatch's
    mean: a state where every slot costs the same teaches nothing); with the entropy bonus
    and the value loss."""
    dist, _, value_loss = _evaluate(policy, batch)
    costs, valid = batch["costs"], batch["mask"]
    cheapest = (costs == 0) & valid
    target = cheapest / cheapest.sum(dim=1, keepdim=True)
    regret = (costs * valid).sum(dim=1) / valid.sum(dim=1)
    weight = regret / regret.mean().clamp(min=torch.finfo(regret.dtype).tiny)
    policy_loss = (weight * -(target * dist.logits).sum(dim=1)).mean()
    entropy = dist.entropy().mean()
    stats = PPOStats(policy_loss.item(), value_loss.item(), entropy.item(), 0.0, 0.0)
    return policy_loss + value_coef * value_loss - entropy_coef * entropy, stats


def teacher_cross_entropy(
    dist: Categorical, mask: torch.Tensor, teacher: torch.Tensor, slots: int
) -> torch.Tensor:
    """The mean cross-entropy of the teacher's picks among the valid slots before `slots`
    (the teacher's: not the wait), over the samples whose pick a valid slot shows (0 with
    none)."""
    pick = teacher.clamp(min=0)[:, None]
    shown = (teacher >= 0) & (teacher < slots) & mask.gather(1, pick).squeeze(1)
    if not shown.any():
        return dist.logits.new_zeros(())
    choices = mask[shown].clone()
    choices[:, slots:] = False
    logp = dist.logits[shown]
    among = logp.masked_fill(~choices, -torch.inf).logsumexp(dim=1)
    return (among - logp.gather(1, pick[shown]).squeeze(1)).mean()


def ppo_loss(
    policy,
    batch: dict[str, torch.Tensor],
    clip: float,
    value_coef: float,
    entropy_coef: float,
    imitation_coef: float = 0.0,
    teacher_slots: int = 0,
) -> tuple[torch.Tensor, PPOStats]:
    """The clipped surrogate, value and entropy terms on one minibatch (advantages already
    normalised); with batch["teacher"], plus `imitation_coef` times the teacher's
    cross-entropy among its `teacher_slots` (ppo.imitation_coef)."""
    dist, logprobs, value_loss = _evaluate(policy, batch)
    ratio = torch.exp(logprobs - batch["logprobs"])
    advantages = batch["advantages"]
    surrogate = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip, 1 + clip) * advantages)
    policy_loss = -surrogate.mean()
    entropy = dist.entropy().mean()
    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy
    if "teacher" in batch:
        loss = loss + imitation_coef * teacher_cross_entropy(
            dist, batch["mask"], batch["teacher"], teacher_slots
        )
    with torch.no_grad():
        stats = PPOStats(
            policy_loss=policy_loss.item(),
            value_loss=value_loss.item(),
            entropy=entropy.item(),
            approx_kl=((ratio - 1) - torch.log(ratio)).mean().item(),
            clip_fraction=((ratio - 1).abs() > clip).float().mean().item(),
        )
    return loss, stats
