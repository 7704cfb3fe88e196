"""Built-in models and the stacked (population) forward pass.

A population of `c` nodes shares one architecture; each parameter is stored stacked as
`[c, *shape]`. `stacked_forward(model)` returns `f(params, x) -> logits [c, B, classes]` for
per-node inputs `x: [c, B, *input_shape]`, so that one autograd pass over the sum of per-node
losses yields every node's gradient at once.

- `mlp` and `cnn` carry a hand-written `batched_forward` (baddbmm for linear layers; per-node
  convolutions on CPU, one grouped convolution elsewhere). Forward+backward, c=10, B=32, 2-core
  CPU: mlp ~1.25x, cnn ~2.7-3x faster than `torch.func.vmap`. `mlp` also carries a hand-written
  backward, `batched_gradients` (`linear_relu_chain`), which the local phase uses in float32 and
  float64 unless the forward is compiled (p2pfl.core.gradients).
- Any other `nn.Module` (including `resnet18_gn`) goes through `torch.func`: `vmap` over
  `functional_call`, except convolutional models on CPU, which call the module node by node
  (grouped convolutions are slow on CPU). BatchNorm with running statistics is rejected: its
  buffers would be shared and mutated by all nodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap
from torch.nn.modules.batchnorm import _NormBase
from torch.nn.modules.conv import _ConvNd

MODELS = ("mlp", "cnn", "resnet18_gn")

Params = dict[str, torch.Tensor]
StackedForward = Callable[[Params, torch.Tensor], torch.Tensor]


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


def _stacked_linear(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Per-node affine map: h [c, B, in], weight [c, out, in], bias [c, out] -> [c, B, out]."""
    return _StackedLinear.apply(h, weight, bias)


def linear_relu_chain(params: Params, x: torch.Tensor, y: torch.Tensor, layers: tuple[str, ...],
                      out: Params | None = None, beta: float = 0.0,
                      weight: torch.Tensor | None = None) -> tuple[Params, torch.Tensor]:
    """Gradients and losses of h -> relu(h W1^T + b1) -> ... -> h Wn^T + bn, x flattened to
    [c, B, in], with a hand-written backward (`{layer}.weight` [c, out, in], `{layer}.bias`
    [c, out]). With `out` the gradients are accumulated into it by the products themselves:
    out <- beta * out + gradient (beta = 0 overwrites, whatever out held).

    Loss: per node, the batch mean of -log softmax(z)[y] (weighted by `weight` [c, B] when
    given); its gradient in the logits z is (softmax(z) - onehot(y)) / B (times the weight).
    Then, layer by layer from the last: dW = dz^T h, db = sum_B dz, dh = dz W masked where the
    layer's input was cut by its ReLU.
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


def _conv_features_loop(params: Params, x: torch.Tensor) -> torch.Tensor:
    """CNN conv stage, one F.conv2d per node in channels_last (fastest on CPU):
    x [c, B, C, H, W] -> features [c, B, O*H'*W'] in nn.Flatten's (O, H', W') order."""
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


def _conv_features_grouped(params: Params, x: torch.Tensor) -> torch.Tensor:
    """CNN conv stage as one grouped conv per layer on [B, c*C, H, W] (one kernel for all nodes):
    x [c, B, C, H, W] -> features [c, B, O*H'*W'] in nn.Flatten's (O, H', W') order."""
    c, batch = x.shape[:2]
    h = x.transpose(0, 1).reshape(batch, -1, *x.shape[3:])
    h = h.contiguous(memory_format=torch.channels_last)
    for layer in ("conv1", "conv2"):
        weight, bias = params[f"{layer}.weight"], params[f"{layer}.bias"]
        h = F.conv2d(h, weight.flatten(0, 1), bias.flatten(), groups=c)
        h = F.relu(F.max_pool2d(h, 2))
    return h.reshape(batch, c, -1).transpose(0, 1)


class MLP(nn.Module):
    """mnist_2NN: Flatten -> 200 -> ReLU -> 200 -> ReLU -> classes."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, 200)
        self.fc2 = nn.Linear(200, 200)
        self.fc3 = nn.Linear(200, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, *input_shape] -> logits [B, classes]."""
        h = F.relu(self.fc1(x.flatten(1)))
        h = F.relu(self.fc2(h))
        return self.fc3(h)

    def batched_forward(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """params {name: [c, *shape]}, x [c, B, *input_shape] -> logits [c, B, classes]."""
        h = x.flatten(2)
        h = F.relu(_stacked_linear(h, params["fc1.weight"], params["fc1.bias"]))
        h = F.relu(_stacked_linear(h, params["fc2.weight"], params["fc2.bias"]))
        return _stacked_linear(h, params["fc3.weight"], params["fc3.bias"])

    def batched_gradients(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                          out: Params | None = None, beta: float = 0.0,
                          weight: torch.Tensor | None = None) -> tuple[Params, torch.Tensor]:
        """Each node's gradient of its mean (or `weight`ed [c, B]) cross-entropy on
        (x [c, B, ...], y [c, B]) by a hand-written backward, accumulated into `out` when given
        (out <- beta * out + grad); and the losses [c]."""
        return linear_relu_chain(params, x, y, ("fc1", "fc2", "fc3"), out, beta, weight)


class CNN(nn.Module):
    """CIFAR CNN of DFedSGPSM / FedGloSS: two conv5x5(64)+ReLU+maxpool2, FC 384-192-classes."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int) -> None:
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"cnn needs input_shape (C, H, W), got {input_shape}")
        channels, height, width = input_shape

        def side(s: int) -> int:
            return ((s - 4) // 2 - 4) // 2

        if side(height) < 1 or side(width) < 1:
            raise ValueError(f"cnn input {input_shape} is too small (need H, W >= 16)")
        self.conv1 = nn.Conv2d(channels, 64, 5)
        self.conv2 = nn.Conv2d(64, 64, 5)
        self.fc1 = nn.Linear(64 * side(height) * side(width), 384)
        self.fc2 = nn.Linear(384, 192)
        self.fc3 = nn.Linear(192, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, C, H, W] -> logits [B, classes]."""
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        h = F.relu(self.fc1(h.flatten(1)))
        h = F.relu(self.fc2(h))
        return self.fc3(h)

    def batched_forward(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """params {name: [c, *shape]}, x [c, B, C, H, W] -> logits [c, B, classes].

        Convolutions: a loop over nodes on CPU (measured 1.3-1.5x faster there than one grouped
        conv), one grouped conv elsewhere. ReLU is applied after max-pooling: same values and
        gradients (ReLU is monotone), 4x less work. FC layers: baddbmm."""
        if x.device.type == "cpu":
            h = _conv_features_loop(params, x)
        else:
            h = _conv_features_grouped(params, x)
        h = F.relu(_stacked_linear(h, params["fc1.weight"], params["fc1.bias"]))
        h = F.relu(_stacked_linear(h, params["fc2.weight"], params["fc2.bias"]))
        return _stacked_linear(h, params["fc3.weight"], params["fc3.bias"])


def _norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(2, channels)


class BasicBlock(nn.Module):
    """ResNet basic block, GroupNorm(2) instead of BatchNorm; 1x1-conv shortcut on shape change."""

    def __init__(self, in_channels: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.gn1 = _norm(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.gn2 = _norm(channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride, bias=False), _norm(channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, C_in, H, W] -> [B, C, H/stride, W/stride]."""
        h = F.relu(self.gn1(self.conv1(x)))
        h = self.gn2(self.conv2(h))
        return F.relu(h + self.shortcut(x))


class ResNet18GN(nn.Module):
    """ResNet-18 (BasicBlock [2, 2, 2, 2], widths 64-512), GroupNorm(2), ImageNet stem."""

    def __init__(self, in_channels: int, num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.gn1 = _norm(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers = []
        width = 64
        for i, channels in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            blocks = BasicBlock(width, channels, stride), BasicBlock(channels, channels, 1)
            layers.append(nn.Sequential(*blocks))
            width = channels
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, C, H, W] -> logits [B, classes]."""
        h = self.maxpool(F.relu(self.gn1(self.conv1(x))))
        h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Build one node's model (PyTorch default init) for inputs [B, *input_shape].

    mlp: mnist_2NN; cnn: the CIFAR CNN (no padding); resnet18_gn: ResNet-18 with GroupNorm(2)
    and the ImageNet stem. Unknown name -> ValueError."""
    input_shape = tuple(input_shape)
    if name == "mlp":
        return MLP(math.prod(input_shape), num_classes)
    if name == "cnn":
        return CNN(input_shape, num_classes)
    if name == "resnet18_gn":
        if len(input_shape) != 3:
            raise ValueError(f"resnet18_gn needs input_shape (C, H, W), got {input_shape}")
        return ResNet18GN(input_shape[0], num_classes)
    raise ValueError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}")


def stacked_forward(model: nn.Module, conv_per_node_on_cpu: bool = True) -> StackedForward:
    """Return f(params, x) -> logits [c, B, classes], params {name: [c, *shape]} named as in
    model.named_parameters(), x [c, B, *input_shape] (dim 0 may have stride 0).

    Uses model.batched_forward when present, else vmap over functional_call with the module's
    buffers shared (not batched); a model with convolutions runs node by node on CPU unless
    `conv_per_node_on_cpu` is False. BatchNorm with running statistics -> ValueError."""
    batched = getattr(model, "batched_forward", None)
    if batched is not None:
        return batched
    for name, module in model.named_modules():
        if isinstance(module, _NormBase) and module.track_running_stats:
            raise ValueError(
                f"module {name!r} ({type(module).__name__}) tracks BatchNorm running statistics; "
                "such a model cannot be run as a stacked population (use GroupNorm, or "
                "track_running_stats=False)"
            )

    def one(params: Params, buffers: Params, x: torch.Tensor) -> torch.Tensor:
        return functional_call(model, (params, buffers), (x,))

    batched = vmap(one, in_dims=(0, None, 0))
    per_node_on_cpu = conv_per_node_on_cpu and any(isinstance(m, _ConvNd)
                                                   for m in model.modules())

    def forward(params: Params, x: torch.Tensor) -> torch.Tensor:
        buffers = dict(model.named_buffers())
        if per_node_on_cpu and x.device.type == "cpu":
            return _per_node(one, params, buffers, x)
        return batched(params, buffers, x)

    return forward


def mixed_precision(forward: StackedForward, device_type: str) -> StackedForward:
    """`forward` run under bfloat16 autocast (matrix products and convolutions in bfloat16,
    parameters untouched), its logits returned in float32 for the loss."""

    def run(params: Params, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type, dtype=torch.bfloat16):
            logits = forward(params, x)
        return logits.float()

    return run


def _per_node(one: Callable[[Params, Params, torch.Tensor], torch.Tensor], params: Params,
              buffers: Params, x: torch.Tensor) -> torch.Tensor:
    """`one` applied node by node: on CPU, vmap turns per-node convolutions into one grouped
    convolution, which is slower there than a convolution per node (resnet18_gn, 10 nodes:
    measured in docs/performance.md). unbind, not params[k][i]: its backward is one stack."""
    rows = {k: v.unbind(0) for k, v in params.items()}
    return torch.stack([one({k: r[i] for k, r in rows.items()}, buffers, x[i])
                        for i in range(x.shape[0])])
