"""Per-node gradients of the local loss: each node's mean cross-entropy on its own minibatch.

A `Gradients` maps (params {name: [c, *shape]}, x [c, B, *input_shape], y int64 [c, B], out) to
(grads {name: [c, *shape]}, losses [c]). `out` is a set of buffers shaped like `params`, reused
from step to step, that an implementation may write the gradients into (`fills_buffers`).

- `AutogradGradients`: one autograd backward through any stacked forward (p2pfl.models).
- `HandWrittenGradients`: a model's own `batched_gradients(params, x, y, out)`, such as the
  built-in mlp's `linear_relu_chain`. It builds no autograd graph and allocates no gradient
  tensors: an mlp-100 round took 11 % (SGD) and 16 % (SAM) less time than with autograd, in one
  process on a 2-core CPU (docs/performance.md, "The mlp's own backward").
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from p2pfl.population import Params

StackedForward = Callable[[Params, torch.Tensor], torch.Tensor]  # (params, x) -> logits [c, B, K]
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
    Autograd allocates the gradients; `out` is not used."""

    fills_buffers = False

    def __init__(self, forward: StackedForward) -> None:
        self.forward = forward

    def __call__(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                 out: Params | None = None) -> tuple[Params, torch.Tensor]:
        leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
        losses = node_losses(self.forward, leaves, x, y)
        grads = torch.autograd.grad(losses.sum(), list(leaves.values()))
        return dict(zip(leaves, grads)), losses.detach()


class HandWrittenGradients:
    """A model's own `batched_gradients(params, x, y, out) -> (grads, losses)`, which writes
    into `out` when given."""

    fills_buffers = True

    def __init__(self, batched_gradients: GradientFn) -> None:
        self.batched_gradients = batched_gradients

    def __call__(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                 out: Params | None = None) -> tuple[Params, torch.Tensor]:
        return self.batched_gradients(params, x, y, out)


Gradients = AutogradGradients | HandWrittenGradients


def local_gradients(model: nn.Module, forward: StackedForward, hand_written: bool) -> Gradients:
    """The model's `batched_gradients` when it has one and `hand_written`, else autograd through
    `forward` (bf16 autocast and torch.compile wrap the forward, so they take autograd)."""
    own = getattr(model, "batched_gradients", None)
    if hand_written and own is not None:
        return HandWrittenGradients(own)
    return AutogradGradients(forward)


def linear_relu_chain(params: Params, x: torch.Tensor, y: torch.Tensor, layers: tuple[str, ...],
                      out: Params | None = None) -> tuple[Params, torch.Tensor]:
    """Gradients and losses of h -> relu(h W1^T + b1) -> ... -> h Wn^T + bn, x flattened to
    [c, B, in], with a hand-written backward (`{layer}.weight` [c, out, in], `{layer}.bias`
    [c, out]); gradients are written into `out` when given.

    Loss: per node, the batch mean of -log softmax(z)[y]; its gradient in the logits z is
    (softmax(z) - onehot(y)) / B. Then, layer by layer from the last: dW = dz^T h, db = sum_B dz,
    dh = dz W masked where the layer's input was cut by its ReLU.
    """
    c, batch = y.shape
    inputs = [x.flatten(2)]  # each layer's input [c, B, in]
    for i, layer in enumerate(layers):
        weight, bias = params[f"{layer}.weight"], params[f"{layer}.bias"]
        z = torch.baddbmm(bias.unsqueeze(1), inputs[-1], weight.transpose(1, 2))
        inputs.append(z.relu_() if i + 1 < len(layers) else z)
    log_p = torch.log_softmax(inputs.pop(), dim=-1)
    target = y.unsqueeze(2)
    losses = log_p.gather(2, target).squeeze(2).mean(dim=1).neg_()
    dz = log_p.exp_()
    dz.scatter_add_(2, target, dz.new_full(target.shape, -1.0)).div_(batch)
    grads: Params = {}
    for i in reversed(range(len(layers))):
        weight_name, bias_name = f"{layers[i]}.weight", f"{layers[i]}.bias"
        h = inputs[i]
        if out is None:
            grads[weight_name] = torch.bmm(dz.transpose(1, 2), h)
            grads[bias_name] = dz.sum(dim=1)
        else:
            grads[weight_name] = torch.bmm(dz.transpose(1, 2), h, out=out[weight_name])
            grads[bias_name] = torch.sum(dz, dim=1, out=out[bias_name])
        if i > 0:
            dh = torch.bmm(dz, params[weight_name])
            dz = torch.ops.aten.threshold_backward.grad_input(dh, h, 0, grad_input=dh)
    return {k: grads[k] for k in params}, losses
