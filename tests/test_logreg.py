"""The linear model (`logreg`): its hand-written backward against autograd node by node and
against the closed form, and its vectorized rounds against the per-node loop."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from p2pfl.core.gradients import HandWrittenGradients
from p2pfl.core.models import LogReg, build_model, stacked_forward
from p2pfl.engine import build
from tests.conftest import play, small_config


def _params(model: LogReg, c: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(4)
    return {k: v.detach().double().expand(c, *v.shape)
            + 0.5 * torch.randn(c, *v.shape, generator=gen, dtype=torch.float64)
            for k, v in model.named_parameters()}


def test_logreg_is_one_linear_layer():
    model = build_model("logreg", (1, 28, 28), 10)
    assert [(k, tuple(v.shape)) for k, v in model.named_parameters()] == [
        ("fc.weight", (10, 784)), ("fc.bias", (10,))]
    assert stacked_forward(model) == model.batched_forward


@pytest.mark.parametrize("weighted", [False, True])
def test_logreg_backward_equals_autograd_and_the_closed_form(weighted):
    """Per node: autograd of the module's own (weighted) cross-entropy, and the textbook
    gradient of multinomial logistic regression, (softmax(Wx + b) - onehot(y))^T x weighted."""
    torch.manual_seed(0)
    model = LogReg(12, 4).double()
    c, batch = 3, 6
    params = _params(model, c)
    x = torch.randn(c, batch, 3, 4, dtype=torch.float64)
    y = torch.randint(0, 4, (c, batch))
    weight = None
    if weighted:  # node 1 has 4 valid samples, the others 6: padding weighted 0
        weight = torch.full((c, batch), 1 / batch, dtype=torch.float64)
        weight[1] = torch.tensor([0.25] * 4 + [0.0] * 2, dtype=torch.float64)
    grads, losses = HandWrittenGradients(model.batched_gradients)(params, x, y, weight=weight)
    for i in range(c):
        own = {k: v[i].detach().requires_grad_() for k, v in params.items()}
        per_sample = F.cross_entropy(functional_call(model, own, (x[i],)), y[i],
                                     reduction="none")
        w = torch.full((batch,), 1 / batch, dtype=torch.float64) if weight is None else weight[i]
        loss = (per_sample * w).sum()
        want = torch.autograd.grad(loss, list(own.values()))
        torch.testing.assert_close(grads["fc.weight"][i], want[0], rtol=0, atol=1e-14)
        torch.testing.assert_close(grads["fc.bias"][i], want[1], rtol=0, atol=1e-14)
        assert losses[i].item() == pytest.approx(loss.item(), abs=1e-14)
        h = x[i].flatten(1)
        dz = (torch.softmax(h @ params["fc.weight"][i].T + params["fc.bias"][i], dim=1)
              - F.one_hot(y[i], 4).double()) * w[:, None]
        torch.testing.assert_close(grads["fc.weight"][i], dz.T @ h, rtol=0, atol=1e-14)
    assert (grads["fc.weight"].abs().amax(dim=(1, 2)) > 1e-3).all()


def test_logreg_backward_accumulates_into_buffers():
    """out <- beta * out + gradient, written in place (the momentum inside the product)."""
    model = LogReg(12, 4).double()
    params = _params(model, 2)
    x, y = torch.randn(2, 5, 12, dtype=torch.float64), torch.randint(0, 4, (2, 5))
    grads, _ = model.batched_gradients(params, x, y)
    held = {k: torch.randn_like(v) for k, v in params.items()}
    out = {k: v.clone() for k, v in held.items()}
    got, _ = model.batched_gradients(params, x, y, out, beta=0.9)
    for k in params:
        assert got[k].data_ptr() == out[k].data_ptr()
        torch.testing.assert_close(out[k], 0.9 * held[k] + grads[k], rtol=0, atol=1e-15)
    out = {k: torch.full_like(v, math.nan) for k, v in params.items()}
    model.batched_gradients(params, x, y, out, beta=0.0)
    torch.testing.assert_close(out, grads, rtol=0, atol=0)


@pytest.mark.parametrize("algorithm, solver", [
    ("dfedsgpm", {"algorithm__momentum": 0.9, "algorithm__weight_decay": 1e-3}),
    ("dfedsgpsm", {"algorithm__rho": 0.05, "algorithm__momentum": 0.5}),
])
def test_logreg_vectorized_equals_the_per_node_loop(algorithm, solver):
    """Two Push-Sum rounds over random_out(2), float64: the hand-written stacked backward against
    one nn.Module and one torch.optim.SGD per node."""
    final = []
    for executor in ("vectorized", "loop"):
        ctx, alg = build(small_config(model__name="logreg", algorithm__name=algorithm,
                                      topology__name="random_out", topology__k=2,
                                      engine__executor=executor, **solver))
        if executor == "vectorized":
            assert isinstance(ctx.trainer.gradients, HandWrittenGradients)
        start = {k: v.clone() for k, v in ctx.population.params.items()}
        for t in range(2):
            play(alg, ctx, t, ctx.schedule.at(t))
        final.append({k: v.clone() for k, v in ctx.population.params.items()})
        assert all(not torch.equal(start[k], final[-1][k]) for k in start)
    for k in final[0]:
        torch.testing.assert_close(final[0][k], final[1][k], rtol=0, atol=1e-12)
