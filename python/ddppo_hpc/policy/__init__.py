"""Scheduling policies over the environment's job slots: they return logits per slot and a
state value. A recurrent policy (gtrxl) also has `initial_memory(batch)`, takes the memory
as a fourth argument and returns a third output that `remember` turns into the memory
after a decision; `decide` drives both kinds (docs/policies.md)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.distributions import Categorical

from ddppo_hpc.config import PolicyConfig
from ddppo_hpc.env.vector import CLUSTER_FEATURES, JOB_FEATURES
from ddppo_hpc.policy.gtrxl import GTrXLPolicy
from ddppo_hpc.policy.pooling import pooled
from ddppo_hpc.rl.ppo import masked_distribution

POLICIES = ("mlp", "attention", "gtrxl", "dual")


class JobScoringMLP(nn.Module):
    """RLScheduler's kernel design (Zhang et al., SC'20): one small network scores every job
    slot from its features and the cluster's, so the policy is independent of slot order
    and size; the value head reads the mean of the valid slots' hidden features. Only the
    valid slots are computed (a window's queue rarely fills its slots); the others' logits
    are 0, which the masked distribution ignores."""

    def __init__(
        self, hidden: int = 32, slot_features: int = JOB_FEATURES, cluster: int = CLUSTER_FEATURES
    ):
        super().__init__()
        self.encode = nn.Sequential(
            nn.Linear(slot_features + cluster, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
        )
        self.score = nn.Linear(hidden, 1)
        self.value = nn.Sequential(
            nn.Linear(hidden + cluster, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def forward(self, jobs, cluster, mask):
        rows = mask.nonzero()[:, 0]  # the environment of each valid slot
        h = self.encode(torch.cat([jobs[mask], cluster[rows]], dim=-1))
        logits = jobs.new_zeros(mask.shape).masked_scatter(mask, self.score(h).squeeze(-1))
        total = h.new_zeros(len(mask), h.shape[1]).index_add(0, rows, h)
        mean = total / mask.sum(1, keepdim=True).clamp(min=1)
        return logits, self.value(torch.cat([mean, cluster], dim=-1)).squeeze(-1)


class AttentionPolicy(nn.Module):
    """Self-attention over the job window: each job's score sees the other waiting jobs."""

    def __init__(
        self,
        hidden: int = 32,
        heads: int = 4,
        layers: int = 1,
        slot_features: int = JOB_FEATURES,
        cluster: int = CLUSTER_FEATURES,
    ):
        super().__init__()
        self.embed = nn.Linear(slot_features + cluster, hidden)
        layer = nn.TransformerEncoderLayer(
            hidden, heads, dim_feedforward=2 * hidden, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.score = nn.Linear(hidden, 1)
        self.value = nn.Sequential(
            nn.Linear(hidden + cluster, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def forward(self, jobs, cluster, mask):
        slots = jobs.shape[1]
        x = self.embed(torch.cat([jobs, cluster.unsqueeze(1).expand(-1, slots, -1)], dim=-1))
        h = self.encoder(x, src_key_padding_mask=~mask)
        return self.score(h).squeeze(-1), self.value(pooled(h, mask, cluster)).squeeze(-1)


class DualPolicy(nn.Module):
    """The GPU dual agent (docs/gpu.md, "Environments"): an ordering network scores the
    waiting jobs and a placement network scores the GPUs, both RLScheduler-style kernels;
    global feature 0 says which step it is (1: placement), and that network's logits and
    value are used. One module, so that one PPO loss trains both on the shared reward."""

    def __init__(self, hidden: int, slot_features: int, cluster: int):
        super().__init__()
        self.order = JobScoringMLP(hidden, slot_features, cluster)
        self.place = JobScoringMLP(hidden, slot_features, cluster)

    def forward(self, jobs, cluster, mask):
        order_logits, order_value = self.order(jobs, cluster, mask)
        place_logits, place_value = self.place(jobs, cluster, mask)
        placing = cluster[:, :1] > 0.5
        return (
            torch.where(placing, place_logits, order_logits),
            torch.where(placing[:, 0], place_value, order_value),
        )


def build_policy(
    config: PolicyConfig, slot_features: int = JOB_FEATURES, cluster: int = CLUSTER_FEATURES
) -> nn.Module:
    """`slot_features` and `cluster` are the environment's widths (GPU mode: its slots')."""
    if config.name == "mlp":
        return JobScoringMLP(config.hidden, slot_features, cluster)
    if config.name == "dual":
        return DualPolicy(config.hidden, slot_features, cluster)
    if config.name == "attention":
        return AttentionPolicy(config.hidden, config.heads, config.layers, slot_features, cluster)
    if config.name == "gtrxl":
        return GTrXLPolicy(
            config.hidden,
            config.heads,
            config.layers,
            config.memory,
            config.sect,
            config.gate_bias,
            slot_features,
            cluster,
        )
    raise ValueError(f"unknown policy '{config.name}' (choose from {', '.join(POLICIES)})")


def initial_memory(
    policy: nn.Module, batch: int, device: torch.device | str
) -> torch.Tensor | None:
    """A recurrent policy's memory at the start of `batch` episodes; None for the others."""
    initial = getattr(policy, "initial_memory", None)
    return None if initial is None else initial(batch).to(device)


def decide(
    policy: nn.Module,
    obs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    memory: torch.Tensor | None,
    pick: Callable[[Categorical], torch.Tensor],
) -> tuple[torch.Tensor, Categorical, torch.Tensor, torch.Tensor | None]:
    """One decision per environment: (actions, distribution, values, memory after the
    decision). `obs` is (jobs, cluster, mask) on the policy's device; `pick` chooses actions
    from the distribution (sampling or greedy); the distribution and values are on the CPU."""
    if memory is None:
        logits, values = policy(*obs)
    else:
        logits, values, candidates = policy(*obs, memory)
    dist = masked_distribution(logits.cpu(), obs[2].cpu())
    actions = pick(dist)
    if memory is not None:
        memory = policy.remember(memory, candidates, actions.to(memory.device))
    return actions, dist, values.cpu(), memory


def reset_ended(memory: torch.Tensor | None, ended, initial: torch.Tensor | None) -> None:
    """Rows of environments whose episode just ended (`ended`: [B] bools) go back to the
    initial memory, in place."""
    if memory is not None:
        ended = torch.as_tensor(ended, device=memory.device)
        memory[ended] = initial[ended]
