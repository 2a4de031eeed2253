"""Collective operations of a PPO update (Horovod ring all-reduce over MPI). At size 1 each
is the identity and Horovod is not imported: a single-rank run needs none."""

from __future__ import annotations

import torch
from mpi4py import MPI
from torch import nn

hvd = None  # horovod.torch, once start() has seen more than one rank


def start(comm: MPI.Comm) -> None:
    """Horovod on the communicator mpi4py already initialised, when it has several ranks."""
    global hvd
    if comm.Get_size() > 1:
        import horovod.torch

        horovod.torch.init(comm=comm)
        hvd = horovod.torch


def broadcast_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Rank 0's parameters and optimizer state on every rank (at start and after resume). A
    new optimizer's state is first made as Horovod's broadcast makes it, one step on zero
    gradients, at every size: Adam's step count (its bias correction) is the same with or
    without Horovod and for any number of ranks."""
    if not optimizer.state:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
        optimizer.step()
    if hvd is None:
        return
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)


def all_sum(values: torch.Tensor, name: str) -> torch.Tensor:
    if hvd is None:
        return values
    return hvd.allreduce(values, op=hvd.Sum, name=name)


def average_gradients(model: nn.Module, weight: float) -> None:
    """Replaces every gradient by the ranks' sum of `weight * gradient`: with weight = this
    rank's share of the update's samples, a sample-weighted average. One all-reduce of one
    flat tensor per optimizer step."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads]) * weight
    # Through host memory: this Horovod is built for MPI on CPUs (no NCCL), and the policy
    # networks are small.
    flat = all_sum(flat.cpu(), "gradients").to(flat.device)
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
