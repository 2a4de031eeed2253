"""Collective operations of a PPO update (Horovod ring all-reduce over MPI)."""

from __future__ import annotations

import horovod.torch as hvd
import torch
from torch import nn


def broadcast_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Rank 0's parameters and optimizer state on every rank (at start and after resume)."""
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)


def all_sum(values: torch.Tensor, name: str) -> torch.Tensor:
    return hvd.allreduce(values, op=hvd.Sum, name=name)


def average_gradients(model: nn.Module, weight: float) -> None:
    """Replaces every gradient by the ranks' sum of `weight * gradient`: with weight = this
    rank's share of the update's samples, a sample-weighted average. One all-reduce of one
    flat tensor per optimizer step."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads]) * weight
    # Through host memory: this Horovod is built for MPI on CPUs (no NCCL), and the policy
    # networks are small.
    flat = hvd.allreduce(flat.cpu(), op=hvd.Sum, name="gradients").to(flat.device)
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def normalize_advantages(advantages: torch.Tensor) -> torch.Tensor:
    """Advantages standardised with the mean and variance over every rank's samples."""
    moments = torch.stack(
        [advantages.sum(), advantages.pow(2).sum(), torch.tensor(float(advantages.numel()))]
    )
    total, squares, count = all_sum(moments.double(), "advantage_moments").tolist()
    mean = total / count
    std = max(squares / count - mean * mean, 0.0) ** 0.5
    return (advantages - mean) / (std + 1e-8)
