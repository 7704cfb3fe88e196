"""One local step of many nodes: `LocalSolver` is the per-step rule shared by every algorithm (SGD,
heavy-ball momentum reset each round, the SAM ascent, weight decay, clipping).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from p2pfl.core.federated import Batch
from p2pfl.core.gradients import Gradients
from p2pfl.core.population import Params, per_node_sq_norm, row_scale

SAM_EPS = 1e-7  # added to ||g|| in the SAM ascent (FL-Simulator's value)


CLIP_EPS = 1e-6  # as torch.nn.utils.clip_grad_norm_


@dataclass(frozen=True)
class LocalSolver:
    """One local step: d = clip(g) + wd * x; b = momentum * b + d; x -= lr * b.

    With `rho` > 0, g is the SAM gradient: g1 at x, e = rho * g1 / (||g1|| + eps) with one global
    L2 norm per node, g = gradient at x + e on the SAME minibatch, taken at a copy of x + e (x
    itself does not move). The momentum buffer starts at zero every round. Weight decay is not
    part of the loss and is added after clipping, as torch.optim.SGD does.
    """

    momentum: float = 0.0
    rho: float = 0.0
    weight_decay: float = 0.0
    clip_norm: float = 0.0


Scratch = Callable[[str, Params], Params]  # (purpose, like) -> reused buffers shaped like `like`


def _ascended(params: Params, grads: Params, rho: float, scratch: Scratch) -> Params:
    """x + e in scratch buffers, e = rho * g / (||g|| + eps) per node (x itself does not move)."""
    scale = rho / (per_node_sq_norm(grads).sqrt() + SAM_EPS)
    ascended = scratch("ascended", params)
    for k, g in grads.items():
        torch.addcmul(params[k], g, row_scale(scale, g), out=ascended[k])
    return ascended


def descent_direction(gradients: Gradients, params: Params, batch: Batch,
                      solver: LocalSolver, scratch: Scratch) -> tuple[Params, torch.Tensor]:
    """The (SAM) gradient at `params` on one minibatch, clipped per node; and the losses at x.

    The SAM gradient is taken at x + e written into a scratch copy, so x itself is never moved
    and restored. The direction may be a scratch buffer: it is valid until the next call.

    Parameters
    ----------
    gradients : the per-node gradients.
    params : name -> [c, *shape], x.
    batch : the minibatch of each node.
    solver : rho (SAM radius) and clip_norm.
    scratch : (purpose, like) -> reused buffers shaped like `like`.

    Returns
    -------
    tuple (direction name -> [c, *shape], losses [c] at x).
    """
    def into(purpose: str) -> Params | None:
        return scratch(purpose, params) if gradients.fills_buffers else None

    x, y, weight = batch.x, batch.y, weighting(batch)
    grads, losses = gradients(params, x, y, into("gradient"), **weight)
    if solver.rho > 0:  # g1 is spent once x + e is written: its buffers take g
        grads, _ = gradients(_ascended(params, grads, solver.rho, scratch), x, y,
                             into("gradient"), **weight)
    if solver.clip_norm > 0:
        norm = per_node_sq_norm(grads).sqrt()
        coef = (solver.clip_norm / (norm + CLIP_EPS)).clamp(max=1.0)
        for g in grads.values():
            g.mul_(row_scale(coef, g))
    return grads, losses


def weighting(batch: Batch) -> dict[str, torch.Tensor]:
    """The `weight` keyword of a gradients call for `batch` (none for a plain batch mean).

    Parameters
    ----------
    batch : a minibatch.

    Returns
    -------
    dict, {} or {"weight": [c, B] tensor}.
    """
    return {} if batch.weight is None else {"weight": batch.weight}


def momentum_step(gradients: Gradients, params: Params, batch: Batch, solver: LocalSolver,
                  scratch: Scratch, buffers: Params, lr: torch.Tensor,
                  first: bool) -> torch.Tensor:
    """One local step (no clipping) whose (SAM) gradient is accumulated into the momentum buffers
    by the gradient's own products (`gradients.accumulates`).

    b <- momentum * b + g (b <- g when `first`), b += wd * x, x -= lr * b. One pass over memory
    less than `descent_direction` + `apply_step`, same values up to rounding.

    Parameters
    ----------
    gradients : per-node gradients that accumulate into `out`.
    params : name -> [c, *shape], x, updated in place.
    batch : the minibatch of each node.
    solver : momentum, rho, weight_decay.
    scratch : (purpose, like) -> reused buffers.
    buffers : name -> [c, *shape], the momentum buffers b.
    lr : [c] step sizes.
    first : whether this is the round's first step (b's contents are ignored).

    Returns
    -------
    [c] tensor, the losses at x.
    """
    beta = 0.0 if first else solver.momentum
    x, y, weight = batch.x, batch.y, weighting(batch)
    if solver.rho > 0:
        grads, losses = gradients(params, x, y, scratch("gradient", params), **weight)
        gradients(_ascended(params, grads, solver.rho, scratch), x, y, buffers, beta, **weight)
    else:
        _, losses = gradients(params, x, y, buffers, beta, **weight)
    for k, b in buffers.items():
        if solver.weight_decay > 0:
            b.add_(params[k], alpha=solver.weight_decay)
        params[k].addcmul_(b, row_scale(lr, b), value=-1.0)
    return losses


def apply_step(params: Params, direction: Params, buffers: Params | None, lr: torch.Tensor,
               solver: LocalSolver, first: bool = False) -> None:
    """x -= lr * (momentum buffer of d + wd * x), in place.

    Two passes over memory per tensor (the step is memory-bound): b <- d + momentum * b, then
    x <- x - lr * b. `first`: the buffers hold garbage and are overwritten (the momentum buffer
    starts at zero every round, so its first value is d itself).

    Parameters
    ----------
    params : name -> [c, *shape], x, updated in place.
    direction : name -> [c, *shape], d; consumed (weight decay is added to it in place).
    buffers : the momentum buffers, or None without momentum.
    lr : [c] step size of each node.
    solver : momentum and weight_decay.
    first : whether this is the round's first step.
    """
    for k, d in direction.items():
        x = params[k]
        if solver.weight_decay > 0:
            d = d.add_(x, alpha=solver.weight_decay)
        if buffers is not None:
            b = buffers[k]
            d = b.copy_(d) if first else torch.add(d, b, alpha=solver.momentum, out=b)
        x.addcmul_(d, row_scale(lr, d), value=-1.0)
