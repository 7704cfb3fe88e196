"""Per-node gradients of the local loss: each node's mean cross-entropy on its own minibatch.

A `Gradients` maps (params {name: [c, *shape]}, x [c, B, *input_shape], y int64 [c, B], out,
weight) to (grads {name: [c, *shape]}, losses [c]). `out` is a set of buffers shaped like
`params`, reused from step to step, that an implementation may write the gradients into
(`fills_buffers`). `weight` [c, B] (rows summing to 1, or None for the plain batch mean) weights
the samples of a step whose nodes' batches differ in size (p2pfl.core.federated.Batch).

- `AutogradGradients`: one autograd backward through any stacked forward (p2pfl.core.models).
- `HandWrittenGradients`: a model's own `batched_gradients(params, x, y, out)`, such as the
  built-in mlp's (p2pfl.core.models). It builds no autograd graph, and given `out` it allocates no
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

from p2pfl.core.population import Params

if TYPE_CHECKING:
    from p2pfl.core.models import StackedForward

GradientFn = Callable[[Params, torch.Tensor, torch.Tensor, Params | None],
                      tuple[Params, torch.Tensor]]


def batch_mean(values: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Per-node mean of per-sample values: plain, or weighted by `weight`.

    Parameters
    ----------
    values : [c, B] per-sample values.
    weight : [c, B] weights, rows summing to 1, or None.

    Returns
    -------
    [c] tensor.
    """
    return values.mean(dim=1) if weight is None else (values * weight).sum(dim=1)


def node_losses(forward: StackedForward, params: Params, x: torch.Tensor, y: torch.Tensor,
                weight: torch.Tensor | None = None) -> torch.Tensor:
    """Mean cross-entropy of each node on its own minibatch.

    Parameters
    ----------
    forward : the stacked forward.
    params : name -> [c, *shape].
    x : [c, B, *input_shape] inputs.
    y : int64 [c, B] labels.
    weight : [c, B] sample weights (rows summing to 1), or None for the plain mean.

    Returns
    -------
    [c] tensor of losses.
    """
    logits = forward(params, x)
    losses = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")
    return batch_mean(losses.view(y.shape), weight)


class AutogradGradients:
    """Gradients by autograd: the nodes are independent, so the gradient of the sum of their
    losses with respect to the stacked parameters is, row by row, each node's own gradient.
    Autograd allocates the gradients; `out` is not used. A gradient that autograd hands out
    twice (two parameters used as one sum) or as a broadcast view is copied, so that each is
    the caller's own."""

    fills_buffers = False
    accumulates = False
    weighted = True

    def __init__(self, forward: StackedForward) -> None:
        self.forward = forward

    def __call__(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                 out: Params | None = None,
                 weight: torch.Tensor | None = None) -> tuple[Params, torch.Tensor]:
        leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
        losses = node_losses(self.forward, leaves, x, y, weight)
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
    gradient's own products. When it takes `weight` (`weighted`), it weights the samples of a
    step whose batches differ in size; otherwise such a step takes autograd
    (p2pfl.core.trainer.VectorizedTrainer)."""

    fills_buffers = True

    def __init__(self, batched_gradients: GradientFn) -> None:
        self.batched_gradients = batched_gradients
        takes = inspect.signature(batched_gradients).parameters
        self.accumulates = "beta" in takes
        self.weighted = "weight" in takes

    def __call__(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                 out: Params | None = None, beta: float = 0.0,
                 weight: torch.Tensor | None = None) -> tuple[Params, torch.Tensor]:
        extra = {"weight": weight} if weight is not None else {}
        if weight is not None and not self.weighted:
            raise TypeError("this batched_gradients takes no weight: it cannot weight samples")
        if self.accumulates:
            return self.batched_gradients(params, x, y, out, beta=beta, **extra)
        if beta:
            raise TypeError("this batched_gradients takes no beta: it cannot accumulate")
        return self.batched_gradients(params, x, y, out, **extra)


Gradients = AutogradGradients | HandWrittenGradients


def local_gradients(model: nn.Module, forward: StackedForward, hand_written: bool) -> Gradients:
    """The Gradients of a model's local step.

    The model's `batched_gradients` when it has one and `hand_written`, else autograd through
    `forward` (bf16 autocast and torch.compile wrap the forward, so they take autograd).

    Parameters
    ----------
    model : one node's model.
    forward : its stacked forward.
    hand_written : whether the model's own backward may be used.

    Returns
    -------
    HandWrittenGradients or AutogradGradients.
    """
    own = getattr(model, "batched_gradients", None)
    if hand_written and own is not None:
        return HandWrittenGradients(own)
    return AutogradGradients(forward)
