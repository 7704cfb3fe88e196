"""Per-node gradients of the local loss: each node's mean cross-entropy on its own minibatch.

A `Gradients` maps (params {name: [c, *shape]}, x [c, B, *input_shape], y int64 [c, B], out) to
(grads {name: [c, *shape]}, losses [c]). `out` is a set of buffers shaped like `params`, reused
from step to step, that an implementation may write the gradients into (`fills_buffers`).

- `AutogradGradients`: one autograd backward through any stacked forward (p2pfl.models).
- `HandWrittenGradients`: a model's own `batched_gradients(params, x, y, out)`, such as the
  built-in mlp's (p2pfl.models). It builds no autograd graph, and given `out` it allocates no
  gradient tensors; one that takes `beta` accumulates into `out`, which lets the local step
  keep its momentum inside the products (docs/performance.md, "The mlp's own backward", has
  the measured gains).

Either way the caller owns the gradients it gets: the local step scales them and adds weight
decay in place, so no two may share memory.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from p2pfl.population import Params

if TYPE_CHECKING:
    from p2pfl.models import StackedForward

GradientFn = Callable[[Params, torch.Tensor, torch.Tensor, Params | None],
                      tuple[Params, torch.Tensor]]


def node_losses(forward: StackedForward, params: Params, x: torch.Tensor,
                y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of each node on its own minibatch: [c] (x [c, B, ...], y [c, B])."""
    logits = forward(params, x)
    losses = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")
    return losses.view(y.shape).mean(dim=1)


class AutogradGradients:
    """Gradients by autograd: the nodes are independent, so the gradient of the sum of their
    losses with respect to the stacked parameters is, row by row, each node's own gradient.
    Autograd allocates the gradients; `out` is not used. A gradient that autograd hands out
    twice (two parameters used as one sum) or as a broadcast view is copied, so that each is
    the caller's own."""

    fills_buffers = False
    accumulates = False

    def __init__(self, forward: StackedForward) -> None:
        self.forward = forward

    def __call__(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                 out: Params | None = None) -> tuple[Params, torch.Tensor]:
        leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
        losses = node_losses(self.forward, leaves, x, y)
        grads = torch.autograd.grad(losses.sum(), list(leaves.values()))
        return dict(zip(leaves, _owned(grads))), losses.detach()


def _owned(grads: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    """`grads` with copies of any tensor that shares memory with an earlier one or repeats
    elements (a zero stride), so that in-place updates of one leave the others alone."""
    seen: set[int] = set()
    owned = []
    for g in grads:
        storage = g.untyped_storage().data_ptr()
        if storage in seen or 0 in g.stride():
            g = g.clone()
        seen.add(g.untyped_storage().data_ptr())
        owned.append(g)
    return owned


class HandWrittenGradients:
    """A model's own `batched_gradients(params, x, y, out) -> (grads, losses)`, which writes
    into `out` when given. When it also takes `beta` (`accumulates`), it accumulates:
    out <- beta * out + gradient, which lets the local step fold its momentum into the
    gradient's own products."""

    fills_buffers = True

    def __init__(self, batched_gradients: GradientFn) -> None:
        self.batched_gradients = batched_gradients
        self.accumulates = "beta" in inspect.signature(batched_gradients).parameters

    def __call__(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                 out: Params | None = None, beta: float = 0.0) -> tuple[Params, torch.Tensor]:
        if self.accumulates:
            return self.batched_gradients(params, x, y, out, beta=beta)
        if beta:
            raise TypeError("this batched_gradients takes no beta: it cannot accumulate")
        return self.batched_gradients(params, x, y, out)


Gradients = AutogradGradients | HandWrittenGradients


def local_gradients(model: nn.Module, forward: StackedForward, hand_written: bool) -> Gradients:
    """The model's `batched_gradients` when it has one and `hand_written`, else autograd through
    `forward` (bf16 autocast and torch.compile wrap the forward, so they take autograd)."""
    own = getattr(model, "batched_gradients", None)
    if hand_written and own is not None:
        return HandWrittenGradients(own)
    return AutogradGradients(forward)
