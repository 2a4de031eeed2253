"""Pooling over the valid job slots, shared by the policies."""

from __future__ import annotations

import torch


def masked_mean(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, K, D] -> [B, D]: the mean over the slots where mask [B, K] is True (0 if none)."""
    weights = mask.unsqueeze(-1).to(h.dtype)
    return (h * weights).sum(1) / weights.sum(1).clamp(min=1)


def pooled(h: torch.Tensor, mask: torch.Tensor, cluster: torch.Tensor) -> torch.Tensor:
    """Mean of the valid slots' features, with the cluster features."""
    return torch.cat([masked_mean(h, mask), cluster], dim=-1)
