"""Scheduling policies over the environment's job slots: they return masked-out logits per
slot and a state value."""

from __future__ import annotations

import torch
from torch import nn

from ddppo_hpc.env.vector import CLUSTER_FEATURES, JOB_FEATURES

POLICIES = ("mlp", "attention", "dual")


class JobScoringMLP(nn.Module):
    """RLScheduler's kernel design (Zhang et al., SC'20): one small network scores every job
    slot from its features and the cluster's, so the policy is independent of slot order
    and size; the value head reads the mean of the valid slots' hidden features."""

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
        slots = jobs.shape[1]
        x = torch.cat([jobs, cluster.unsqueeze(1).expand(-1, slots, -1)], dim=-1)
        h = self.encode(x)
        return self.score(h).squeeze(-1), self.value(pooled(h, mask, cluster)).squeeze(-1)


class AttentionPolicy(nn.Module):
    """Self-attention over the job window: each job's score sees the other waiting jobs."""

    def __init__(self, hidden: int = 32, heads: int = 4, layers: int = 1):
        super().__init__()
        self.embed = nn.Linear(JOB_FEATURES + CLUSTER_FEATURES, hidden)
        layer = nn.TransformerEncoderLayer(
            hidden, heads, dim_feedforward=2 * hidden, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.score = nn.Linear(hidden, 1)
        self.value = nn.Sequential(
            nn.Linear(hidden + CLUSTER_FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, 1)
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


def pooled(h: torch.Tensor, mask: torch.Tensor, cluster: torch.Tensor) -> torch.Tensor:
    """Mean of the valid slots' features, with the cluster features."""
    weights = mask.unsqueeze(-1).float()
    mean = (h * weights).sum(1) / weights.sum(1).clamp(min=1)
    return torch.cat([mean, cluster], dim=-1)


def build_policy(
    name: str, hidden: int, slot_features: int = JOB_FEATURES, cluster: int = CLUSTER_FEATURES
) -> nn.Module:
    """`slot_features` and `cluster` are the environment's widths (GPU mode: its slots')."""
    if name == "mlp":
        return JobScoringMLP(hidden, slot_features, cluster)
    if name == "dual":
        return DualPolicy(hidden, slot_features, cluster)
    if name == "attention":
        return AttentionPolicy(hidden)
    raise ValueError(f"unknown policy '{name}' (choose from {', '.join(POLICIES)})")
