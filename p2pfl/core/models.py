"""Built-in models and the stacked (population) forward pass.

A population of `c` nodes shares one architecture; each parameter is stored stacked as
`[c, *shape]`. `stacked_forward(model)` returns `f(params, x) -> logits [c, B, classes]` for
per-node inputs `x: [c, B, *input_shape]`, so that one autograd pass over the sum of per-node
losses yields every node's gradient at once.

- `logreg`, `mlp`, `cnn` and `fedfsa_cnn` carry a hand-written `batched_forward` (baddbmm for
  linear layers; per-node convolutions on CPU, one grouped convolution elsewhere).
  Forward+backward, c=10, B=32, 2-core CPU: mlp ~1.25x, cnn ~2.7-3x faster than
  `torch.func.vmap`. `logreg` and `mlp` also carry a hand-written backward,
  `batched_gradients` (`linear_relu_chain`), which the local phase uses in float32 and float64
  unless the forward is compiled (p2pfl.core.gradients).
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
from torch.nn.modules.batchnorm import _BatchNorm, _NormBase
from torch.nn.modules.conv import _ConvNd

from p2pfl.core.stacked_layers import (
    Params,
    conv_features_grouped,
    conv_features_loop,
    linear_relu_chain,
    stacked_linear,
)
from p2pfl.errors import UserCodeError

MODELS = ("logreg", "mlp", "cnn", "fedfsa_cnn", "resnet18_gn")

StackedForward = Callable[[Params, torch.Tensor], torch.Tensor]


class LogReg(nn.Module):
    """Multinomial logistic regression: Flatten -> one linear layer -> classes (softmax in the
    loss)."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(in_features, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, *input_shape] -> logits [B, classes]."""
        return self.fc(x.flatten(1))

    def batched_forward(self, params: Params, x: torch.Tensor) -> torch.Tensor:
        """params {name: [c, *shape]}, x [c, B, *input_shape] -> logits [c, B, classes]."""
        return stacked_linear(x.flatten(2), params["fc.weight"], params["fc.bias"])

    def batched_gradients(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                          out: Params | None = None, beta: float = 0.0,
                          weight: torch.Tensor | None = None) -> tuple[Params, torch.Tensor]:
        """Each node's gradient of its mean (or weighted) cross-entropy by a hand-written backward:
        dz = (softmax(z) - onehot(y)) / B, dW = dz^T x, db = sum_B dz.

        Parameters
        ----------
        params : name -> [c, *shape].
        x : [c, B, ...] inputs.
        y : int64 [c, B] labels.
        out : buffers the gradients are accumulated into (out <- beta * out + grad), or None.
        beta : the accumulation's factor.
        weight : [c, B] sample weights (rows summing to 1), or None for the plain mean.

        Returns
        -------
        tuple (gradients name -> [c, *shape], losses [c]).
        """
        return linear_relu_chain(params, x, y, ("fc",), out, beta, weight)


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
        h = F.relu(stacked_linear(h, params["fc1.weight"], params["fc1.bias"]))
        h = F.relu(stacked_linear(h, params["fc2.weight"], params["fc2.bias"]))
        return stacked_linear(h, params["fc3.weight"], params["fc3.bias"])

    def batched_gradients(self, params: Params, x: torch.Tensor, y: torch.Tensor,
                          out: Params | None = None, beta: float = 0.0,
                          weight: torch.Tensor | None = None) -> tuple[Params, torch.Tensor]:
        """Each node's gradient of its mean (or weighted) cross-entropy by a hand-written backward.

        Parameters
        ----------
        params : name -> [c, *shape].
        x : [c, B, ...] inputs.
        y : int64 [c, B] labels.
        out : buffers the gradients are accumulated into (out <- beta * out + grad), or None.
        beta : the accumulation's factor.
        weight : [c, B] sample weights (rows summing to 1), or None for the plain mean.

        Returns
        -------
        tuple (gradients name -> [c, *shape], losses [c]).
        """
        return linear_relu_chain(params, x, y, ("fc1", "fc2", "fc3"), out, beta, weight)


class CNN(nn.Module):
    """Two conv5x5 (`channels`) + ReLU + maxpool2, then FC `hidden` -> classes, no padding.

    Defaults: the classic CIFAR CNN (64, 64; FC 384-192); `fedfsa_cnn` is the same shape with
    FC 1024-1024: conv 4, 12 on one-channel images, 64, 64 on colour ones (docs/algorithms.md
    says which papers use which)."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int,
                 channels: tuple[int, int] = (64, 64), hidden: tuple[int, int] = (384, 192),
                 name: str = "cnn") -> None:
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"{name} needs input_shape (C, H, W), got {input_shape}")
        in_channels, height, width = input_shape

        def side(s: int) -> int:
            return ((s - 4) // 2 - 4) // 2

        if side(height) < 1 or side(width) < 1:
            raise ValueError(f"{name} input {input_shape} is too small (need H, W >= 16)")
        self.conv1 = nn.Conv2d(in_channels, channels[0], 5)
        self.conv2 = nn.Conv2d(channels[0], channels[1], 5)
        self.fc1 = nn.Linear(channels[1] * side(height) * side(width), hidden[0])
        self.fc2 = nn.Linear(hidden[0], hidden[1])
        self.fc3 = nn.Linear(hidden[1], num_classes)

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
            h = conv_features_loop(params, x)
        else:
            h = conv_features_grouped(params, x)
        h = F.relu(stacked_linear(h, params["fc1.weight"], params["fc1.bias"]))
        h = F.relu(stacked_linear(h, params["fc2.weight"], params["fc2.bias"]))
        return stacked_linear(h, params["fc3.weight"], params["fc3.bias"])


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

    logreg: multinomial logistic regression (one linear layer); mlp: mnist_2NN; cnn: the CIFAR
    CNN (no padding); fedfsa_cnn: that CNN with wider FC layers and channels by the input's
    channel count; resnet18_gn: ResNet-18 with GroupNorm(2) and the ImageNet stem.

    Parameters
    ----------
    name : one of MODELS.
    input_shape : one sample's shape, (C, H, W) for resnet18_gn.
    num_classes : outputs.

    Returns
    -------
    nn.Module.

    Raises
    ------
    ValueError
        for an unknown name, or resnet18_gn with an input shape that is not (C, H, W).
    """
    input_shape = tuple(input_shape)
    if name == "logreg":
        return LogReg(math.prod(input_shape), num_classes)
    if name == "mlp":
        return MLP(math.prod(input_shape), num_classes)
    if name == "cnn":
        return CNN(input_shape, num_classes)
    if name == "fedfsa_cnn":
        channels = (4, 12) if input_shape[:1] == (1,) else (64, 64)
        return CNN(input_shape, num_classes, channels, (1024, 1024), name)
    if name == "resnet18_gn":
        if len(input_shape) != 3:
            raise ValueError(f"resnet18_gn needs input_shape (C, H, W), got {input_shape}")
        return ResNet18GN(input_shape[0], num_classes)
    raise ValueError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}")


def stacked_forward(model: nn.Module, conv_per_node_on_cpu: bool = True) -> StackedForward:
    """The forward of a stacked population of copies of `model`.

    Uses model.batched_forward when present, else vmap over functional_call with the module's
    buffers shared (not batched); a model with convolutions runs node by node on CPU unless
    `conv_per_node_on_cpu` is False.

    Parameters
    ----------
    model : one node's model.
    conv_per_node_on_cpu : whether a model with convolutions runs node by node on CPU.

    Returns
    -------
    StackedForward, f(params, x) -> logits [c, B, classes], params {name: [c, *shape]} named as in
    model.named_parameters(), x [c, B, *input_shape] (dim 0 may have stride 0).

    Raises
    ------
    ValueError
        for a BatchNorm that tracks running statistics.
    """
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


def uses_batch_statistics(model: nn.Module) -> bool:
    """Whether `model` normalises over the batch.

    Then a sample's output depends on the other samples of its batch: a BatchNorm layer (one
    without running statistics; `stacked_forward` refuses the others), or a model that declares
    `batch_statistics = True` (a normalisation written by hand).

    Parameters
    ----------
    model : one node's model.

    Returns
    -------
    bool.
    """
    return bool(getattr(model, "batch_statistics", False)) or any(
        isinstance(m, _BatchNorm) for m in model.modules())


def named_failures(forward: StackedForward, what: str) -> StackedForward:
    """`forward` whose exceptions are a UserCodeError naming `what`.

    For a researcher's model: the run loop adds the round.

    Parameters
    ----------
    forward : a stacked forward.
    what : the model's name, for the error.

    Returns
    -------
    StackedForward.
    """

    def run(params: Params, x: torch.Tensor) -> torch.Tensor:
        try:
            return forward(params, x)
        except UserCodeError:
            raise
        except Exception as err:
            raise UserCodeError(what, err) from err

    return run


def mixed_precision(forward: StackedForward, device_type: str) -> StackedForward:
    """`forward` run under bfloat16 autocast.

    Matrix products and convolutions run in bfloat16, parameters untouched; the logits are
    returned in float32 for the loss.

    Parameters
    ----------
    forward : a stacked forward.
    device_type : "cpu" or "cuda".

    Returns
    -------
    StackedForward.
    """

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
