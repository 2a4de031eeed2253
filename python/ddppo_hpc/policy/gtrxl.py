"""Gated Transformer-XL (Parisotto et al., ICML 2020, "Stabilizing Transformers for
Reinforcement Learning") over the job window, with a segment memory of the last M
decisions of the episode, and SECT: squeeze-and-excitation (Hu et al., CVPR 2018) over the
job-feature and cluster channels before the transformer. docs/policies.md describes both.

Memory layout, one tensor per environment batch: [B, M, L * D + 1], oldest entry first.
Entry m holds, for each of the L blocks, the D-wide embedding of one past decision at that
block's input (Transformer-XL keeps every layer's hidden states of the previous segment),
and a last channel that is 1 for a real decision and 0 for an empty slot.
"""

from __future__ import annotations

import torch
from torch import nn

from ddppo_hpc.env.vector import CLUSTER_FEATURES, JOB_FEATURES
from ddppo_hpc.policy.pooling import masked_mean, pooled


class SECT(nn.Module):
    """Per-channel gates for the job features and the cluster features, computed from
    pooled statistics (masked mean and max of every job feature over the valid slots, and
    the cluster features): squeeze, a bottleneck MLP, then 2 * sigmoid. The excitation's
    last layer starts at zero, so every gate is exactly 1 at initialisation."""

    def __init__(
        self, reduction: int = 2, slot_features: int = JOB_FEATURES, cluster: int = CLUSTER_FEATURES
    ):
        super().__init__()
        self.slot_features = slot_features
        channels = slot_features + cluster
        squeezed = max(channels // reduction, 4)
        self.excite = nn.Sequential(
            nn.Linear(2 * slot_features + cluster, squeezed),
            nn.ReLU(),
            nn.Linear(squeezed, channels),
        )
        nn.init.zeros_(self.excite[2].weight)
        nn.init.zeros_(self.excite[2].bias)

    def gates(self, jobs, cluster, mask) -> torch.Tensor:
        """[B, slot features + cluster features] gates in (0, 2)."""
        mean = masked_mean(jobs, mask)
        peak = jobs.masked_fill(~mask.unsqueeze(-1), torch.finfo(jobs.dtype).min).amax(1)
        peak = torch.where(mask.any(1, keepdim=True), peak, torch.zeros_like(peak))
        return 2 * torch.sigmoid(self.excite(torch.cat([mean, peak, cluster], dim=-1)))

    def forward(self, jobs, cluster, mask):
        gates = self.gates(jobs, cluster, mask)
        split = self.slot_features
        return jobs * gates[:, None, :split], cluster * gates[:, split:]


class GRUGate(nn.Module):
    """GTrXL's GRU-type gate in place of the residual x + y:
    r = s(W_r y + U_r x), z = s(W_z y + U_z x - b_g), h = tanh(W_g y + U_g (r * x)),
    out = (1 - z) * x + z * h. A positive b_g keeps z small: the block starts near the
    identity map."""

    def __init__(self, width: int, bias: float):
        super().__init__()
        self.w = nn.Linear(width, 3 * width, bias=False)
        self.u_rz = nn.Linear(width, 2 * width, bias=False)
        self.u_g = nn.Linear(width, width, bias=False)
        self.bias = nn.Parameter(torch.full((width,), float(bias)))

    def forward(self, x, y):
        wr, wz, wg = self.w(y).chunk(3, dim=-1)
        ur, uz = self.u_rz(x).chunk(2, dim=-1)
        r = torch.sigmoid(wr + ur)
        z = torch.sigmoid(wz + uz - self.bias)
        h = torch.tanh(wg + self.u_g(r * x))
        return (1 - z) * x + z * h


class GatedBlock(nn.Module):
    """One GTrXL block: layer norm on the sub-layer inputs only (identity-map reordering),
    attention from the current slots over [memory; slots], a position-wise MLP, each
    followed by ReLU and a GRU gate. Memory entries get a learned age embedding (the
    Transformer-XL relative position: the current slots are all at age 0)."""

    def __init__(self, width: int, heads: int, memory: int, gate_bias: float):
        super().__init__()
        self.norm_attention = nn.LayerNorm(width)
        self.attention = nn.MultiheadAttention(width, heads, dropout=0.0, batch_first=True)
        self.age = nn.Parameter(torch.zeros(memory, width))
        self.gate_attention = GRUGate(width, gate_bias)
        self.norm_mlp = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 2 * width), nn.ReLU(), nn.Linear(2 * width, width)
        )
        self.gate_mlp = GRUGate(width, gate_bias)

    def forward(self, x, past, ignore):
        """x [B, K, D] slots, past [B, M, D] this block's memory, ignore [B, M + K] keys to
        leave out (empty memory entries, padding slots)."""
        context = self.norm_attention(torch.cat([past, x], dim=1))
        memory = past.shape[1]
        context = torch.cat([context[:, :memory] + self.age, context[:, memory:]], dim=1)
        y, _ = self.attention(
            context[:, memory:], context, context, key_padding_mask=ignore, need_weights=False
        )
        x = self.gate_attention(x, torch.relu(y))
        return self.gate_mlp(x, torch.relu(self.mlp(self.norm_mlp(x))))


class GTrXLPolicy(nn.Module):
    """Scores every job slot with gated Transformer-XL blocks whose attention also sees the
    episode's last M decisions. A decision's memory entry, per block, is the mean of the
    chosen job's embedding and the valid slots' mean embedding at that block's input (what
    was picked, and the queue it was picked from)."""

    def __init__(
        self,
        hidden: int = 32,
        heads: int = 4,
        layers: int = 1,
        memory: int = 16,
        sect: bool = True,
        gate_bias: float = 2.0,
        slot_features: int = JOB_FEATURES,
        cluster: int = CLUSTER_FEATURES,
    ):
        super().__init__()
        self.memory, self.width = memory, hidden
        self.sect = SECT(slot_features=slot_features, cluster=cluster) if sect else None
        self.embed = nn.Linear(slot_features + cluster, hidden)
        self.blocks = nn.ModuleList(
            GatedBlock(hidden, heads, memory, gate_bias) for _ in range(layers)
        )
        self.score = nn.Linear(hidden, 1)
        self.value = nn.Sequential(
            nn.Linear(hidden + cluster, hidden), nn.ReLU(), nn.Linear(hidden, 1)
        )

    def initial_memory(self, batch: int) -> torch.Tensor:
        """An empty memory: every entry marked absent."""
        return torch.zeros(batch, self.memory, len(self.blocks) * self.width + 1)

    def forward(self, jobs, cluster, mask, memory):
        """(logits [B, K], values [B], candidates [B, K, L * D + 1]): candidates[b, k] is the
        memory entry that picking slot k adds (see `remember`)."""
        if self.sect is not None:
            jobs, cluster = self.sect(jobs, cluster, mask)
        slots = jobs.shape[1]
        x = self.embed(torch.cat([jobs, cluster.unsqueeze(1).expand(-1, slots, -1)], dim=-1))
        ignore = torch.cat([memory[..., -1] == 0, ~mask], dim=1)
        pasts = memory[..., :-1].split(self.width, dim=-1)
        inputs = []
        for block, past in zip(self.blocks, pasts):
            inputs.append(x)
            x = block(x, past, ignore)
        candidates = [(h + masked_mean(h, mask).unsqueeze(1)) / 2 for h in inputs]
        candidates.append(torch.ones_like(x[..., :1]))
        values = self.value(pooled(x, mask, cluster)).squeeze(-1)
        return self.score(x).squeeze(-1), values, torch.cat(candidates, dim=-1)

    @staticmethod
    def remember(memory, candidates, actions):
        """The memory after the decisions `actions`: the oldest entry out, the chosen slot's
        candidate in (no gradient flows through memory, as in Transformer-XL)."""
        chosen = candidates[torch.arange(len(actions), device=actions.device), actions]
        return torch.cat([memory[:, 1:], chosen.detach().unsqueeze(1)], dim=1)
