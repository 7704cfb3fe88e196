"""Sharpness: Hessian top eigenvalue by Hessian-vector products, loss-landscape slices."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import p2pfl
from analysis import sharpness as S
from tests.conftest import small_config


def test_hessian_top_eigenvalue_of_a_quadratic() -> None:
    """loss = 1/2 theta^T M theta + b^T theta: the Hessian is M everywhere."""
    gen = torch.Generator().manual_seed(0)
    Q = torch.linalg.qr(torch.randn(12, 12, generator=gen, dtype=torch.float64))[0]
    eig = torch.linspace(0.1, 5.0, 12, dtype=torch.float64)
    eig[-2] = 3.0  # well separated top eigenvalue: power iteration converges fast
    M = Q @ torch.diag(eig) @ Q.T
    b = torch.randn(12, generator=gen, dtype=torch.float64)

    def loss(p: dict[str, torch.Tensor]) -> torch.Tensor:
        theta = torch.cat([p["a"].flatten(), p["c"]])
        return 0.5 * theta @ M @ theta + b @ theta

    params = {"a": torch.randn(2, 5, dtype=torch.float64), "c": torch.zeros(2, dtype=torch.float64)}
    v = {"a": torch.ones(2, 5, dtype=torch.float64), "c": torch.ones(2, dtype=torch.float64)}
    hv = S.hessian_vector_product(loss, params, v)
    expected = M @ torch.ones(12, dtype=torch.float64)
    np.testing.assert_allclose(torch.cat([hv["a"].flatten(), hv["c"]]), expected, rtol=1e-12)
    top = S.hessian_top_eigenvalue(loss, params, iters=300, tol=1e-12)
    assert top == pytest.approx(float(torch.linalg.eigvalsh(M).max()), rel=1e-9)


def test_hessian_top_eigenvalue_of_least_squares_model() -> None:
    """A linear model under mean squared error: H = (2 / N) X^T X."""
    torch.manual_seed(0)
    X = torch.randn(64, 6, dtype=torch.float64) * torch.tensor([3.0, 1, 1, 0.5, 0.5, 0.2],
                                                              dtype=torch.float64)
    y = torch.randn(64, 1, dtype=torch.float64)
    model = nn.Linear(6, 1, bias=False).double()
    loss_fn = S.model_loss(model, X, y, criterion=F.mse_loss, batch_size=20)
    params = {k: p.detach() for k, p in model.named_parameters()}
    expected = float(torch.linalg.eigvalsh(2 / 64 * X.T @ X).max())
    assert S.hessian_top_eigenvalue(loss_fn, params, iters=500, tol=1e-12) == pytest.approx(
        expected, rel=1e-8)


def mlp_and_data() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    from p2pfl.core.models import build_model

    torch.manual_seed(1)
    model = build_model("mlp", (1, 4, 4), 3).double()
    x = torch.randn(50, 1, 4, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (50,))
    return model, x, y


def test_interpolation_endpoints_match_the_two_models() -> None:
    model, x, y = mlp_and_data()
    a = {k: p.detach().clone() for k, p in model.named_parameters()}
    b = {k: p + 0.3 * torch.randn_like(p) for k, p in a.items()}
    out = S.interpolate(model, a, b, x, y, alphas=[0.0, 0.5, 1.0])
    for alpha, params in ((0, a), (2, b)):
        expected = F.cross_entropy(torch.func.functional_call(model, params, (x,)), y)
        assert out["loss"][alpha] == pytest.approx(float(expected), rel=1e-12)
    mid = {k: 0.5 * (a[k] + b[k]) for k in a}
    expected = F.cross_entropy(torch.func.functional_call(model, mid, (x,)), y)
    assert out["loss"][1] == pytest.approx(float(expected), rel=1e-12)


def test_filter_normalised_directions_and_landscape() -> None:
    model, x, y = mlp_and_data()
    params = {k: p.detach() for k, p in model.named_parameters()}
    d = S.filter_normalized_direction(params, torch.Generator().manual_seed(0))
    for k, p in params.items():
        if p.dim() < 2:
            assert torch.count_nonzero(d[k]) == 0
        else:
            np.testing.assert_allclose(d[k].flatten(1).norm(dim=1), p.flatten(1).norm(dim=1),
                                       rtol=1e-12)
    grid = S.landscape_2d(model, params, x, y, span=0.5, steps=5)
    assert grid["loss"].shape == (5, 5) and grid["acc"].shape == (5, 5)
    centre = F.cross_entropy(torch.func.functional_call(model, params, (x,)), y)
    assert grid["loss"][2, 2] == pytest.approx(float(centre), rel=1e-12)
    assert not np.allclose(grid["loss"], grid["loss"][2, 2])


def test_run_sharpness_on_a_run_directory(tmp_path) -> None:
    cfg = small_config(rounds=1)
    p2pfl.run(cfg, tmp_path / "run")
    out = S.run_sharpness(tmp_path / "run", samples=50, iters=3, landscape_steps=3)
    summary = __import__("json").loads((tmp_path / "run" / "summary.json").read_text())
    assert out["test_acc"] == pytest.approx(summary["final"]["test_acc"], abs=1e-9)
    assert out["hessian_top_eigenvalue"] > 0
    assert out["landscape"]["loss"].shape == (3, 3)
    with pytest.raises(FileNotFoundError, match="config.json"):
        S.load_run(tmp_path)
