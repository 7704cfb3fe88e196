"""The local phase: K optimizer steps of many nodes at once.

`LocalSolver` is the per-step rule shared by every algorithm (SGD, heavy-ball momentum reset each
round, the SAM ascent, weight decay, clipping). `VectorizedTrainer` runs it on stacked parameters,
chunk by chunk, one batched forward/backward per step for all nodes of a chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from p2pfl.federated import BatchPlan, FederatedData
from p2pfl.models import StackedForward
from p2pfl.population import Params, per_node_sq_norm, row_scale

SAM_EPS = 1e-7  # added to ||g|| in the SAM ascent (FL-Simulator's value, spec 1.2)
CLIP_EPS = 1e-6  # as torch.nn.utils.clip_grad_norm_


@dataclass(frozen=True)
class LocalSolver:
    """One local step: d = clip(g) + wd * x; b = momentum * b + d; x -= lr * b.

    With `rho` > 0, g is the SAM gradient: g1 at x, e = rho * g1 / (||g1|| + eps) with one global
    L2 norm per node, g = gradient at x + e on the SAME minibatch, then x is restored by
    subtracting the stored e. The momentum buffer starts at zero every round. Weight decay is not
    part of the loss and is added after clipping, as torch.optim.SGD does.
    """

    momentum: float = 0.0
    rho: float = 0.0
    weight_decay: float = 0.0
    clip_norm: float = 0.0


def node_losses(forward: StackedForward, params: Params, x: torch.Tensor,
                y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of each node on its own minibatch: [c] (x [c, B, ...], y [c, B])."""
    logits = forward(params, x)
    losses = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")
    return losses.view(y.shape).mean(dim=1)


def stacked_grads(forward: StackedForward, params: Params, x: torch.Tensor,
                  y: torch.Tensor) -> tuple[Params, torch.Tensor]:
    """Per-node gradients of each node's mean loss, and the losses [c].

    The nodes are independent, so the gradient of the sum of their losses with respect to the
    stacked parameters is, row by row, each node's own gradient.
    """
    leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
    losses = node_losses(forward, leaves, x, y)
    grads = torch.autograd.grad(losses.sum(), list(leaves.values()))
    return dict(zip(leaves, grads)), losses.detach()


def descent_direction(forward: StackedForward, params: Params, x: torch.Tensor, y: torch.Tensor,
                      solver: LocalSolver) -> tuple[Params, torch.Tensor]:
    """The (SAM) gradient at `params` on one minibatch, clipped per node; and the losses at x."""
    grads, losses = stacked_grads(forward, params, x, y)
    if solver.rho > 0:
        norm = per_node_sq_norm(grads).sqrt()
        scale = solver.rho / (norm + SAM_EPS)
        perturb = {k: g * row_scale(scale, g) for k, g in grads.items()}
        for k, e in perturb.items():
            params[k].add_(e)
        grads, _ = stacked_grads(forward, params, x, y)
        for k, e in perturb.items():
            params[k].sub_(e)
    if solver.clip_norm > 0:
        norm = per_node_sq_norm(grads).sqrt()
        coef = (solver.clip_norm / (norm + CLIP_EPS)).clamp(max=1.0)
        grads = {k: g * row_scale(coef, g) for k, g in grads.items()}
    return grads, losses


def apply_step(params: Params, direction: Params, buffers: Params | None, lr: torch.Tensor,
               solver: LocalSolver) -> None:
    """x -= lr * (momentum buffer of d + wd * x), in place; `lr` is per node [c].

    Two passes over memory per tensor (the step is memory-bound): b <- d + momentum * b, then
    x <- x - lr * b.
    """
    for k, d in direction.items():
        x = params[k]
        if solver.weight_decay > 0:
            d = d.add(x, alpha=solver.weight_decay)
        if buffers is not None:
            d = torch.add(d, buffers[k], alpha=solver.momentum, out=buffers[k])
        x.addcmul_(d, row_scale(lr, d), value=-1.0)


class VectorizedTrainer:
    """Runs the local phase of many nodes as batched tensor operations, `chunk_size` nodes at a
    time (each chunk runs all K steps; nodes are independent, so chunking does not change results).
    """

    def __init__(self, forward: StackedForward, data: FederatedData, chunk_size: int) -> None:
        self.forward = forward
        self.data = data
        self.chunk_size = chunk_size

    def train(self, params: Params, nodes: torch.Tensor, plan: BatchPlan, solver: LocalSolver,
              lr: torch.Tensor) -> torch.Tensor:
        """Update `params` (name -> [m, ...], row r belongs to node nodes[r]) in place.

        `lr` [m] is each row's step size. Returns each row's mean training loss over its steps [m].
        """
        m = len(nodes)
        mean_loss = torch.zeros(m, device=lr.device, dtype=lr.dtype)
        for start in range(0, m, self.chunk_size):
            rows = slice(start, min(start + self.chunk_size, m))
            chunk = {k: v[rows] for k, v in params.items()}
            buffers = ({k: torch.zeros_like(v) for k, v in chunk.items()}
                       if solver.momentum > 0 else None)
            for step in range(plan.steps):
                x, y = self.data.batch(plan, step, nodes[rows])
                direction, losses = descent_direction(self.forward, chunk, x, y, solver)
                apply_step(chunk, direction, buffers, lr[rows], solver)
                mean_loss[rows] += losses
        return mean_loss / plan.steps
