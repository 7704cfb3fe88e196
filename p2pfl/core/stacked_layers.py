"""Per-node layers of a stacked population: parameters `[c, *shape]`, inputs `[c, B, ...]`.

`stacked_linear` is an affine map per node with a backward that writes contiguous gradients;
`linear_relu_chain` is a whole ReLU network's gradients by a hand-written backward; the conv
features run the two-convolution stage of the CNNs node by node (CPU) or as one grouped
convolution (elsewhere).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

Params = dict[str, torch.Tensor]


class _StackedLinear(torch.autograd.Function):
    """Per-node affine map h @ weight^T + bias with a backward that writes contiguous gradients.

    Autograd's own backward of baddbmm(bias, h, weight^T) returns the weight gradient as a
    transposed view, and every later elementwise pass over it (momentum, step) is then strided:
    measured 2-3x slower per local step on CPU. The backward is made of differentiable ops, so
    double backward (Hessian-vector products) still works.
    """

    @staticmethod
    def forward(ctx, h: torch.Tensor, weight: torch.Tensor,  # noqa: ANN001
                bias: torch.Tensor) -> torch.Tensor:
        # ctx in forward, not a separate setup_context: with setup_context, every apply binds
        # its arguments through inspect.signature (~5% of an mlp round on CPU).
        device = h.device.type
        if torch.is_autocast_enabled(device):  # cast once, as autocast would, and keep the
            dtype = torch.get_autocast_dtype(device)  # casts for the backward
            h, weight, bias = h.to(dtype), weight.to(dtype), bias.to(dtype)
        ctx.save_for_backward(h, weight)
        return torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple:  # noqa: ANN001
        # Under autocast all of it runs in bfloat16; autograd casts the gradients it returns
        # back to the float32 of the inputs.
        h, weight = ctx.saved_tensors
        grad_h = torch.bmm(grad, weight) if ctx.needs_input_grad[0] else None
        grad_weight = torch.bmm(grad.transpose(1, 2), h) if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(1) if ctx.needs_input_grad[2] else None
        return grad_h, grad_weight, grad_bias


def stacked_linear(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Per-node affine map.

    Parameters
    ----------
    h : [c, B, in].
    weight : [c, out, in].
    bias : [c, out].

    Returns
    -------
    [c, B, out] tensor.
    """
    return _StackedLinear.apply(h, weight, bias)


def linear_relu_chain(params: Params, x: torch.Tensor, y: torch.Tensor, layers: tuple[str, ...],
                      out: Params | None = None, beta: float = 0.0,
                      weight: torch.Tensor | None = None) -> tuple[Params, torch.Tensor]:
    """Gradients and losses of h -> relu(h W1^T + b1) -> ... -> h Wn^T + bn, with a hand-written
    backward.

    Loss: per node, the batch mean of -log softmax(z)[y] (weighted by `weight` [c, B] when
    given); its gradient in the logits z is (softmax(z) - onehot(y)) / B (times the weight).
    Then, layer by layer from the last: dW = dz^T h, db = sum_B dz, dh = dz W masked where the
    layer's input was cut by its ReLU.

    Parameters
    ----------
    params : `{layer}.weight` [c, out, in] and `{layer}.bias` [c, out] of every layer.
    x : [c, B, ...] inputs, flattened to [c, B, in].
    y : int64 [c, B] labels.
    layers : the layers' names, first to last.
    out : buffers shaped like `params` into which the gradients are accumulated by the products
        themselves, or None for fresh tensors.
    beta : out <- beta * out + gradient (beta = 0 overwrites, whatever out held).
    weight : [c, B] sample weights (rows summing to 1), or None.

    Returns
    -------
    tuple (gradients name -> [c, *shape] in the order of `params`, losses [c]).
    """
    c, batch = y.shape
    inputs = [x.flatten(2)]  # each layer's input [c, B, in]
    for i, layer in enumerate(layers):
        w, bias = params[f"{layer}.weight"], params[f"{layer}.bias"]
        z = torch.baddbmm(bias.unsqueeze(1), inputs[-1], w.transpose(1, 2))
        inputs.append(z.relu_() if i + 1 < len(layers) else z)
    log_p = torch.log_softmax(inputs.pop(), dim=-1)
    target = y.unsqueeze(2)
    picked = log_p.gather(2, target).squeeze(2)
    losses = (picked.mean(dim=1) if weight is None else (picked * weight).sum(dim=1)).neg_()
    dz = log_p.exp_()
    dz.scatter_add_(2, target, dz.new_full(target.shape, -1.0))
    dz = dz.div_(batch) if weight is None else dz.mul_(weight.unsqueeze(2))
    grads: Params = {}
    for i in reversed(range(len(layers))):
        weight_name, bias_name = f"{layers[i]}.weight", f"{layers[i]}.bias"
        h = inputs[i]
        if out is None:
            grads[weight_name] = torch.bmm(dz.transpose(1, 2), h)
            grads[bias_name] = dz.sum(dim=1)
        else:
            w, b = out[weight_name], out[bias_name]
            grads[weight_name] = torch.baddbmm(w, dz.transpose(1, 2), h, beta=beta, out=w)
            grads[bias_name] = (torch.sum(dz, dim=1, out=b) if beta == 0
                                else b.mul_(beta).add_(dz.sum(dim=1)))
        if i > 0:
            dh = torch.bmm(dz, params[weight_name])
            dz = torch.ops.aten.threshold_backward.grad_input(dh, h, 0, grad_input=dh)
    return {k: grads[k] for k in params}, losses


def conv_features_loop(params: Params, x: torch.Tensor) -> torch.Tensor:
    """CNN conv stage, one F.conv2d per node in channels_last (fastest on CPU).

    Parameters
    ----------
    params : conv1 and conv2 weights [c, O, C, k, k] and biases [c, O].
    x : [c, B, C, H, W].

    Returns
    -------
    features [c, B, O*H'*W'] in nn.Flatten's (O, H', W') order.
    """
    # unbind, not params[k][i]: its backward is one stack, not c zero-filled full-size tensors.
    layers = [
        (params[f"{layer}.weight"].unbind(0), params[f"{layer}.bias"].unbind(0))
        for layer in ("conv1", "conv2")
    ]
    features = []
    for i in range(x.shape[0]):
        h = x[i].contiguous(memory_format=torch.channels_last)
        for weights, biases in layers:
            # Forced: with C=1 conv2d returns NCHW, where max_pool2d is ~7x slower on CPU.
            h = F.conv2d(h, weights[i], biases[i]).contiguous(memory_format=torch.channels_last)
            h = F.relu(F.max_pool2d(h, 2))
        features.append(h.flatten(1))
    return torch.stack(features)


def conv_features_grouped(params: Params, x: torch.Tensor) -> torch.Tensor:
    """CNN conv stage as one grouped conv per layer on [B, c*C, H, W] (one kernel for all nodes).

    Parameters
    ----------
    params : conv1 and conv2 weights [c, O, C, k, k] and biases [c, O].
    x : [c, B, C, H, W].

    Returns
    -------
    features [c, B, O*H'*W'] in nn.Flatten's (O, H', W') order.
    """
    c, batch = x.shape[:2]
    h = x.transpose(0, 1).reshape(batch, -1, *x.shape[3:])
    h = h.contiguous(memory_format=torch.channels_last)
    for layer in ("conv1", "conv2"):
        weight, bias = params[f"{layer}.weight"], params[f"{layer}.bias"]
        h = F.conv2d(h, weight.flatten(0, 1), bias.flatten(), groups=c)
        h = F.relu(F.max_pool2d(h, 2))
    return h.reshape(batch, c, -1).transpose(0, 1)
