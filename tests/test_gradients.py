"""The local phase's gradients: the mlp's hand-written backward against a hand computation and
against autograd, the trainer on both, and which one a run uses."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from p2pfl import engine
from p2pfl.core.federated import Batch
from p2pfl.core.gradients import AutogradGradients, HandWrittenGradients
from p2pfl.core.models import MLP, stacked_forward
from p2pfl.core.population import per_node_sq_norm
from p2pfl.core.solver import LocalSolver, descent_direction
from p2pfl.core.stacked_layers import linear_relu_chain
from p2pfl.engine import build
from p2pfl.report.results import METRICS, read_metrics
from tests.conftest import skip_plots, small_config


def _stacked(model: nn.Module, c: int, spread: float, seed: int = 0) -> dict[str, torch.Tensor]:
    """c perturbed float64 copies of the model's parameters: name -> [c, *shape]."""
    gen = torch.Generator().manual_seed(seed)
    return {k: v.detach().double().expand(c, *v.shape)
            + spread * torch.randn(c, *v.shape, generator=gen, dtype=torch.float64)
            for k, v in model.named_parameters()}


def test_one_linear_layer_by_hand():
    """W = 0, b = 0: softmax is uniform, so for x = (1, 2), y = 0 the logits' gradient is
    (0.5 - 1, 0.5), dW = that outer x, db = that, and the loss is ln 2."""
    params = {"fc.weight": torch.zeros(1, 2, 2, dtype=torch.float64),
              "fc.bias": torch.zeros(1, 2, dtype=torch.float64)}
    x = torch.tensor([[[1.0, 2.0]]], dtype=torch.float64)
    grads, losses = linear_relu_chain(params, x, torch.tensor([[0]]), ("fc",))
    assert losses.tolist() == pytest.approx([math.log(2)], abs=1e-15)
    assert grads["fc.weight"][0].tolist() == [[-0.5, -1.0], [0.5, 1.0]]
    assert grads["fc.bias"][0].tolist() == [-0.5, 0.5]


def _per_node_reference(model: nn.Module, params, x, y):
    """Each node's gradient and loss by plain autograd through the module's own forward, one
    node at a time (no stacked layers involved)."""
    grads, losses = {k: [] for k in params}, []
    for i in range(y.shape[0]):
        own = {k: v[i].detach().requires_grad_() for k, v in params.items()}
        loss = F.cross_entropy(functional_call(model, own, (x[i],)), y[i])
        for k, g in zip(own, torch.autograd.grad(loss, list(own.values()))):
            grads[k].append(g)
        losses.append(loss.detach())
    return {k: torch.stack(v) for k, v in grads.items()}, torch.stack(losses)


@pytest.mark.parametrize("buffers", [False, True])
def test_mlp_backward_equals_autograd_node_by_node(buffers):
    """On inputs where about half of the ReLUs are cut; with buffers the gradients are written
    into them."""
    torch.manual_seed(1)
    model = MLP(12, 5).double()
    params = _stacked(model, 3, 0.3)
    x = torch.randn(3, 7, 3, 4, dtype=torch.float64)
    y = torch.randint(0, 5, (3, 7))
    want, want_losses = _per_node_reference(model, params, x, y)
    out = {k: torch.full_like(v, math.nan) for k, v in params.items()} if buffers else None
    got, losses = HandWrittenGradients(model.batched_gradients)(params, x, y, out)
    for k in params:
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=1e-14)
        if buffers:
            assert got[k].data_ptr() == out[k].data_ptr()
    torch.testing.assert_close(losses, want_losses, rtol=0, atol=1e-14)
    hidden = torch.relu(x.flatten(2) @ params["fc1.weight"].transpose(1, 2)
                        + params["fc1.bias"].unsqueeze(1))
    assert 0.2 < (hidden == 0).double().mean() < 0.8  # the ReLU masks matter


class SharedSum(nn.Module):
    """A weight used as a sum of two parameters: autograd hands both the same gradient."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.a = nn.Parameter(torch.randn(3, 4))
        self.b = nn.Parameter(torch.randn(3, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.a + self.b)


def test_autograd_gradients_are_the_callers_own():
    """The clip scales each gradient in place: a shared one would be scaled twice."""
    model = SharedSum().double()
    params = _stacked(model, 2, 0.1)
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (2, 5))
    gradients = AutogradGradients(stacked_forward(model))
    grads, _ = gradients(params, x, y)
    assert grads["a"].data_ptr() != grads["b"].data_ptr()
    torch.testing.assert_close(grads["a"], grads["b"], rtol=0, atol=0)
    norm = per_node_sq_norm(grads).sqrt()
    clipped, _ = descent_direction(gradients, params, Batch(x, y, None),
                                   LocalSolver(clip_norm=1e-3), None)
    torch.testing.assert_close(per_node_sq_norm(clipped).sqrt(), 1e-3 * norm / (norm + 1e-6),
                               rtol=1e-12, atol=0)  # clip_norm / (||g|| + eps) * ||g||


@pytest.mark.parametrize("solver", [
    LocalSolver(momentum=0.9, weight_decay=1e-3),  # momentum accumulated by the products
    LocalSolver(rho=0.05, momentum=0.5, weight_decay=1e-3),  # the same, after a SAM ascent
    LocalSolver(rho=0.05, momentum=0.5, clip_norm=0.5),  # clipped: gradient, then momentum
    LocalSolver(rho=0.05),
])
def test_the_trainer_on_hand_written_and_autograd_gradients(solver):
    """The same local phase, float64: equal to rounding. Chunks of 4 then 2 nodes: the second
    reuses the first's buffers in part."""
    ctx, algorithm = build(small_config(engine__chunk_size=4))
    plan = ctx.data.plan(0, 0, 16, 0, local_steps=3)
    lr = torch.full((6,), 0.1, dtype=torch.float64)
    trained = []
    for gradients in (ctx.trainer.gradients, AutogradGradients(ctx.forward)):
        assert isinstance(ctx.trainer.gradients, HandWrittenGradients)
        params = {k: v.clone() for k, v in ctx.population.params.items()}
        ctx.trainer.gradients = gradients
        losses = ctx.trainer.train(params, ctx.all_nodes(), plan, solver, lr)
        trained.append((params, losses))
    (a, loss_a), (b, loss_b) = trained
    for k in a:
        assert not torch.equal(a[k], ctx.population.params[k])
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-13)
    torch.testing.assert_close(loss_a, loss_b, rtol=0, atol=1e-13)


@pytest.mark.parametrize("overrides, hand_written", [
    ({}, True),
    ({"engine__dtype": "float32", "engine__precision": "bf16"}, False),
    ({"model__name": "cnn"}, False),
    ({"engine__compile": True}, False),
])
def test_which_gradients_a_run_uses(overrides, hand_written):
    """The mlp's own backward in float32/64; bf16 autocast, a compiled forward and models
    without one: autograd."""
    ctx, _ = build(small_config(**overrides))
    kind = HandWrittenGradients if hand_written else AutogradGradients
    assert isinstance(ctx.trainer.gradients, kind)


def test_a_backward_without_beta_does_not_accumulate():
    """A module's batched_gradients without `beta` is called without it, and refuses one."""
    model = MLP(12, 5).double()
    plain = HandWrittenGradients(lambda params, x, y, out: model.batched_gradients(params, x, y,
                                                                                    out))
    assert HandWrittenGradients(model.batched_gradients).accumulates and not plain.accumulates
    params = _stacked(model, 2, 0.3)
    x, y = torch.randn(2, 4, 12, dtype=torch.float64), torch.randint(0, 5, (2, 4))
    grads, _ = plain(params, x, y)
    torch.testing.assert_close(grads, model.batched_gradients(params, x, y)[0], rtol=0, atol=0)
    with pytest.raises(TypeError, match="takes no beta"):
        plain(params, x, y, grads, beta=0.9)


def test_accumulating_into_buffers():
    """out <- beta * out + gradient, the bias included; beta = 0 ignores what out held."""
    model = MLP(12, 5).double()
    params = _stacked(model, 2, 0.3)
    x, y = torch.randn(2, 4, 12, dtype=torch.float64), torch.randint(0, 5, (2, 4))
    grads, _ = model.batched_gradients(params, x, y)
    held = {k: torch.randn_like(v) for k, v in params.items()}
    out = {k: v.clone() for k, v in held.items()}
    model.batched_gradients(params, x, y, out, beta=0.9)
    for k in params:
        torch.testing.assert_close(out[k], 0.9 * held[k] + grads[k], rtol=0, atol=1e-15)
    out = {k: torch.full_like(v, math.nan) for k, v in params.items()}
    model.batched_gradients(params, x, y, out, beta=0.0)
    torch.testing.assert_close(out, grads, rtol=0, atol=0)


class OwnBackward(nn.Module):
    """A module of one's own with a `batched_gradients` that reports zero gradients."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(784, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))

    def batched_gradients(self, params, x, y, out=None):
        return {k: torch.zeros_like(v) for k, v in params.items()}, torch.zeros(y.shape[0],
                                                                                dtype=x.dtype)


def test_a_modules_own_batched_gradients_is_what_trains(tmp_path, monkeypatch):
    """Zero gradients from the module's own backward: no node moves, so the test accuracy
    stays at the starting model's."""
    skip_plots(monkeypatch)
    out = tmp_path / "run"
    engine.run(small_config(rounds=2), out, model=OwnBackward())
    first, second = read_metrics(out / METRICS)
    assert first["train_loss"] == 0 and first["test_acc"] == second["test_acc"]
    assert first["consensus_dist"] < 1e-25  # mixing equal models moves them by rounding only
