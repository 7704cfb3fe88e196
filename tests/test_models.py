"""Stacked (population) forward passes equal a per-node loop, in values and gradients (float64)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from p2pfl.core import models, stacked_layers
from p2pfl.core.models import MODELS, build_model, stacked_forward

TOL = 1e-10
Params = dict[str, torch.Tensor]


def _population(model: nn.Module, c: int, seed: int) -> Params:
    """c random perturbations of the model's parameters, stacked [c, *shape], float64 leaves."""
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name, p in model.named_parameters():
        noise = torch.randn(c, *p.shape, generator=gen, dtype=torch.float64)
        params[name] = (p.detach().double() + 0.1 * noise).requires_grad_()
    return params


def _stacked_loss_and_grads(
    forward: models.StackedForward, params: Params, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """logits [c, B, classes] and grads of sum_i mean CE_i w.r.t. the stacked params."""
    logits = forward(params, x)
    c, batch = y.shape
    ce = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")
    loss = ce.view(c, batch).mean(dim=1).sum()
    return logits, torch.autograd.grad(loss, list(params.values()))


def _loop_loss_and_grads(
    model: nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """The same, one node at a time through the unbatched module."""
    logits, grads = [], []
    for i in range(y.shape[0]):
        node = {name: v[i].detach().clone().requires_grad_() for name, v in params.items()}
        out = functional_call(model, node, (x[i],))
        grads.append(torch.autograd.grad(F.cross_entropy(out, y[i]), list(node.values())))
        logits.append(out.detach())
    return torch.stack(logits), tuple(torch.stack(g) for g in zip(*grads, strict=True))


def _check_matches_loop(
    model: nn.Module,
    forward: models.StackedForward,
    c: int,
    batch: int,
    input_shape: tuple[int, ...],
    num_classes: int,
    seed: int = 0,
) -> None:
    model = model.double()
    params = _population(model, c, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(c, batch, *input_shape, generator=gen, dtype=torch.float64)
    y = torch.randint(0, num_classes, (c, batch), generator=gen)
    logits, grads = _stacked_loss_and_grads(forward, params, x, y)
    ref_logits, ref_grads = _loop_loss_and_grads(model, params, x, y)
    assert logits.shape == (c, batch, num_classes)
    torch.testing.assert_close(logits, ref_logits, rtol=0, atol=TOL)
    for name, g, ref in zip(params, grads, ref_grads, strict=True):
        assert g.shape == params[name].shape
        torch.testing.assert_close(g, ref, rtol=0, atol=TOL, msg=f"gradient of {name}")

    # One batch shared by all nodes, as an expanded (stride-0) view.
    x0 = x[:1].expand(c, *x.shape[1:])
    assert x0.stride(0) == 0
    y0 = y[:1].expand(c, batch)
    logits, grads = _stacked_loss_and_grads(forward, params, x0, y0)
    ref_logits, ref_grads = _loop_loss_and_grads(model, params, x0, y0)
    torch.testing.assert_close(logits, ref_logits, rtol=0, atol=TOL)
    for g, ref in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, ref, rtol=0, atol=TOL)


CASES = [
    ("mlp", (1, 28, 28), 10, 3, 5),
    ("cnn", (3, 32, 32), 10, 3, 4),
    ("cnn", (1, 28, 28), 7, 2, 3),
    ("fedfsa_cnn", (1, 28, 28), 10, 2, 3),
    ("resnet18_gn", (3, 32, 32), 10, 2, 2),
]


@pytest.mark.parametrize(("name", "input_shape", "num_classes", "c", "batch"), CASES)
def test_stacked_forward_matches_loop(name, input_shape, num_classes, c, batch):
    torch.manual_seed(0)
    model = build_model(name, input_shape, num_classes)
    _check_matches_loop(model, stacked_forward(model), c, batch, input_shape, num_classes)


def test_builtin_paths():
    """mlp and the CNNs use their hand-written forward; resnet18_gn the torch.func path."""
    for name in ("mlp", "cnn", "fedfsa_cnn"):
        model = build_model(name, (3, 32, 32), 10)
        assert stacked_forward(model) == model.batched_forward
    assert not hasattr(build_model("resnet18_gn", (3, 32, 32), 10), "batched_forward")


def _conv_features_reference(params: Params, x: torch.Tensor) -> torch.Tensor:
    """Conv -> ReLU -> pool (module order), nn.Flatten, one node at a time: [c, B, F]."""
    out = []
    for i in range(x.shape[0]):
        h = x[i]
        for layer in ("conv1", "conv2"):
            h = F.conv2d(h, params[f"{layer}.weight"][i], params[f"{layer}.bias"][i])
            h = F.max_pool2d(F.relu(h), 2)
        out.append(nn.Flatten()(h))
    return torch.stack(out)


@pytest.mark.parametrize("features", [stacked_layers.conv_features_loop,
                                      stacked_layers.conv_features_grouped])
def test_cnn_conv_stages_match_reference(features):
    """Both conv stages (per-node loop on CPU, grouped conv elsewhere) equal the module's order."""
    model = build_model("cnn", (3, 20, 24), 10).double()
    c, batch = 3, 2
    params = _population(model, c, seed=3)
    x = torch.randn(c, batch, 3, 20, 24, dtype=torch.float64)
    out, ref = features(params, x), _conv_features_reference(params, x)
    assert out.shape == (c, batch, 64 * 2 * 3)
    torch.testing.assert_close(out, ref, rtol=0, atol=TOL)
    conv_params = [v for k, v in params.items() if k.startswith("conv")]
    weights = torch.randn_like(out)
    grads = torch.autograd.grad((out * weights).sum(), conv_params)
    ref_grads = torch.autograd.grad((ref * weights).sum(), conv_params)
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=0, atol=TOL)


def _num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts():
    assert _num_params(build_model("mlp", (1, 28, 28), 10)) == 199_210
    # cnn on 3x32x32: 32 -conv5-> 28 -pool-> 14 -conv5-> 10 -pool-> 5, so F = 64*5*5 = 1600.
    cnn = (
        (64 * 3 * 5 * 5 + 64)  # conv1: 4,864
        + (64 * 64 * 5 * 5 + 64)  # conv2: 102,464
        + (1600 * 384 + 384)  # fc1: 614,784
        + (384 * 192 + 192)  # fc2: 73,920
        + (192 * 10 + 10)  # fc3: 1,930
    )
    assert cnn == 797_962
    assert _num_params(build_model("cnn", (3, 32, 32), 10)) == cnn
    # 1x28x28: 28 -> 24 -> 12 -> 8 -> 4, F = 64*4*4 = 1024.
    assert build_model("cnn", (1, 28, 28), 10).fc1.in_features == 1024
    # FedFSA's FMNIST CNN (its nets/CNNs.py): conv 1->4, 4->12 (5x5), FC 12*4*4 -> 1024 -> 1024.
    fedfsa = (4 * 25 + 4) + (12 * 4 * 25 + 12) + (192 * 1024 + 1024) + (1024 * 1024 + 1024) + (
        1024 * 10 + 10)
    assert _num_params(build_model("fedfsa_cnn", (1, 28, 28), 10)) == fedfsa == 1_258_798
    # Its CIFAR CNN: conv 3->64, 64->64, FC 64*5*5 -> 1024 -> 1024.
    assert build_model("fedfsa_cnn", (3, 32, 32), 100).fc1.in_features == 1600
    assert build_model("fedfsa_cnn", (3, 32, 32), 100).fc3.out_features == 100
    # GroupNorm has as many affine parameters as BatchNorm: torchvision's resnet18 count.
    assert _num_params(build_model("resnet18_gn", (3, 224, 224), 1000)) == 11_689_512


def test_resnet18_gn_structure():
    model = build_model("resnet18_gn", (3, 32, 32), 10)
    norms = [m for m in model.modules() if isinstance(m, nn.GroupNorm)]
    assert len(norms) == 20 and all(m.num_groups == 2 for m in norms)
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    assert (model.conv1.kernel_size, model.conv1.stride, model.conv1.padding) == (
        (7, 7),
        (2, 2),
        (3, 3),
    )
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


class _UserNet(nn.Module):
    """A user model without batched_forward: conv, layer norm, a buffer, linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.norm = nn.LayerNorm([4, 6, 6])
        self.head = nn.Linear(4 * 6 * 6, 5)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.norm(self.conv(x))) * self.scale
        return self.head(h.flatten(1))


@pytest.mark.parametrize("per_node", [True, False])
def test_user_module_matches_loop_by_vmap_and_node_by_node(per_node):
    torch.manual_seed(0)
    model = _UserNet().double()
    forward = stacked_forward(model, conv_per_node_on_cpu=per_node)
    assert not hasattr(model, "batched_forward")
    _check_matches_loop(model, forward, c=3, batch=4, input_shape=(2, 6, 6), num_classes=5)


def test_batchnorm_rejected():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    with pytest.raises(ValueError, match="BatchNorm"):
        stacked_forward(model)
    # Without running statistics BatchNorm is a per-node function of the batch: accepted.
    stacked_forward(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False)))


def test_unknown_model_name():
    with pytest.raises(ValueError, match="logreg, mlp, cnn, fedfsa_cnn, resnet18_gn"):
        build_model("vgg16", (3, 32, 32), 10)
    with pytest.raises(ValueError, match="fedfsa_cnn input .* too small"):
        build_model("fedfsa_cnn", (1, 12, 12), 10)
    assert MODELS == ("logreg", "mlp", "cnn", "fedfsa_cnn", "resnet18_gn")


def test_stacked_linear_backward_is_exact_twice_differentiable_and_contiguous():
    gen = torch.Generator().manual_seed(0)
    h, weight, bias = (torch.randn(*shape, generator=gen, dtype=torch.float64,
                                   requires_grad=True) for shape in ((2, 3, 4), (2, 5, 4), (2, 5)))
    assert torch.autograd.gradcheck(stacked_layers.stacked_linear, (h, weight, bias))
    assert torch.autograd.gradgradcheck(stacked_layers.stacked_linear, (h, weight, bias))
    out = stacked_layers.stacked_linear(h, weight, bias)
    grads = torch.autograd.grad(out.square().sum(), (weight, bias))
    assert all(g.is_contiguous() for g in grads)
