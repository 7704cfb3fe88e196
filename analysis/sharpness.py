"""Sharpness of a trained model: Hessian top eigenvalue and loss-landscape slices.

- `hessian_top_eigenvalue`: power iteration on Hessian-vector products (``torch.func.vjp`` of
  ``torch.func.grad``); never forms the Hessian.
- `interpolate`: loss and accuracy along ``(1 - a) theta_A + a theta_B``.
- `landscape_2d`: loss on ``theta + a d1 + b d2`` with filter-normalised random directions
  (Li, Xu, Taylor, Studer, Goldstein, "Visualizing the Loss Landscape of Neural Nets", NeurIPS
  2018): each filter (slice along dim 0) of a direction is rescaled to the norm of the same
  filter of theta; 1-D parameters (biases, norm scales) get direction 0.
- `load_run` / `run_sharpness`: the same on a run directory's final average model.

Slices are evaluated as one stacked population (p2pfl.core.models.stacked_forward): every point of
the grid is one "node", so a 2-D slice is a few batched forward passes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vjp

Params = dict[str, torch.Tensor]
LossFn = Callable[[Params], torch.Tensor]


def _dot(a: Params, b: Params) -> torch.Tensor:
    return sum((a[k] * b[k]).sum() for k in a)


def hessian_vector_product(loss_fn: LossFn, params: Params, v: Params) -> Params:
    """H v, H the Hessian of loss_fn at params.

    Reverse over reverse: the vector-Jacobian product of grad(loss_fn), which is H^T v = H v
    (H is symmetric). Forward-over-reverse (jvp of grad) fails on some losses' double backward.

    Parameters
    ----------
    loss_fn : params -> scalar loss.
    params : name -> tensor.
    v : name -> tensor, the same shapes as params.

    Returns
    -------
    Params, name -> tensor, the same shapes as params.
    """
    _, pullback = vjp(grad(loss_fn), params)
    return pullback(v)[0]


def hessian_top_eigenvalue(loss_fn: LossFn, params: Params, iters: int = 100,
                           tol: float = 1e-6, seed: int = 0) -> float:
    """Eigenvalue of largest modulus of the Hessian of loss_fn at params, by power iteration.

    Stops when two successive estimates differ by at most tol * |estimate|, or after `iters`
    Hessian-vector products.

    Parameters
    ----------
    loss_fn : params -> scalar loss.
    params : name -> tensor.
    iters : most Hessian-vector products.
    tol : relative tolerance between successive estimates.
    seed : the seed of the random start.

    Returns
    -------
    float, the Rayleigh quotient v^T H v of the converged unit vector (signed; for a trained
    network it is the largest positive curvature).
    """
    params = {k: p.detach() for k, p in params.items()}
    gen = torch.Generator().manual_seed(seed)
    v = {k: torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device)
         for k, p in params.items()}
    norm = torch.sqrt(_dot(v, v))
    v = {k: x / norm for k, x in v.items()}
    estimate = 0.0
    for _ in range(iters):
        hv = hessian_vector_product(loss_fn, params, v)
        new = float(_dot(v, hv))
        norm = torch.sqrt(_dot(hv, hv))
        if norm == 0:
            return 0.0
        v = {k: x / norm for k, x in hv.items()}
        if abs(new - estimate) <= tol * abs(new):
            return new
        estimate = new
    return estimate


def model_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
               criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy,
               batch_size: int = 1000) -> LossFn:
    """params -> mean criterion(model(x), y) over all samples, for hessian_top_eigenvalue.

    Parameters
    ----------
    model : the module (its buffers are used as they are).
    x : [S, ...] inputs.
    y : [S] labels.
    criterion : (outputs, labels) -> mean loss.
    batch_size : samples per forward pass.

    Returns
    -------
    LossFn, params -> 0-dim tensor.
    """
    buffers = dict(model.named_buffers())

    def loss(params: Params) -> torch.Tensor:
        total = 0.0
        for s in range(0, len(y), batch_size):
            out = functional_call(model, (params, buffers), (x[s:s + batch_size],))
            total = total + criterion(out, y[s:s + batch_size]) * len(y[s:s + batch_size])
        return total / len(y)

    return loss


def _evaluate_stacked(model: nn.Module, stacked: Params, x: torch.Tensor, y: torch.Tensor,
                      batch_size: int, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    from p2pfl.core.metrics import evaluate
    from p2pfl.core.models import stacked_forward

    acc, loss = evaluate(stacked_forward(model), stacked, x, y, batch_size, chunk)
    return loss.cpu().numpy(), acc.cpu().numpy()


def interpolate(model: nn.Module, params_a: Params, params_b: Params, x: torch.Tensor,
                y: torch.Tensor, alphas: Sequence[float] | None = None, batch_size: int = 1000,
                chunk: int = 16) -> dict[str, np.ndarray]:
    """Loss and accuracy at ``(1 - a) params_a + a params_b`` for each a.

    Parameters
    ----------
    model : the module.
    params_a, params_b : name -> tensor, the two ends.
    x : [S, ...] inputs.
    y : [S] labels.
    alphas : the a (default -0.5..1.5 in 21 steps).
    batch_size : samples per forward pass.
    chunk : models evaluated at once.

    Returns
    -------
    dict {'alpha': [k], 'loss': [k], 'acc': [k]}.
    """
    a = np.linspace(-0.5, 1.5, 21) if alphas is None else np.asarray(alphas, dtype=float)
    coef = torch.as_tensor(a, dtype=next(iter(params_a.values())).dtype)
    stacked = {}
    for k, pa in params_a.items():
        c = coef.to(pa.device).view(-1, *([1] * pa.dim()))
        stacked[k] = (1 - c) * pa.detach() + c * params_b[k].detach()
    loss, acc = _evaluate_stacked(model, stacked, x, y, batch_size, chunk)
    return {"alpha": a, "loss": loss, "acc": acc}


def filter_normalized_direction(params: Params, generator: torch.Generator) -> Params:
    """Random Gaussian direction, each filter rescaled to the norm of the same filter of params
    (Li et al. 2018); parameters with fewer than 2 dimensions get 0.

    Parameters
    ----------
    params : name -> tensor.
    generator : the torch.Generator of the draw.

    Returns
    -------
    Params, name -> tensor, the same shapes as params.
    """
    direction = {}
    for k, p in params.items():
        d = torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device)
        if p.dim() < 2:
            direction[k] = torch.zeros_like(p)
            continue
        dn = d.flatten(1).norm(dim=1).clamp_min(1e-12)
        pn = p.detach().flatten(1).norm(dim=1)
        direction[k] = d * (pn / dn).view(-1, *([1] * (p.dim() - 1)))
    return direction


def landscape_2d(model: nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor,
                 span: float = 1.0, steps: int = 11, seed: int = 0, batch_size: int = 1000,
                 chunk: int = 16) -> dict[str, np.ndarray]:
    """Loss and accuracy on the grid ``params + a d1 + b d2``, a, b in [-span, span].

    d1, d2 are filter-normalised random directions (`filter_normalized_direction`).

    Parameters
    ----------
    model : the module.
    params : name -> tensor, the centre.
    x : [S, ...] inputs.
    y : [S] labels.
    span : half-width of the grid.
    steps : grid points per axis.
    seed : the seed of the directions.
    batch_size : samples per forward pass.
    chunk : models evaluated at once.

    Returns
    -------
    dict {'alpha': [steps], 'beta': [steps], 'loss': [steps, steps], 'acc': [steps, steps]} with
    loss[i, j] at (alpha[i], beta[j]).
    """
    gen = torch.Generator().manual_seed(seed)
    d1 = filter_normalized_direction(params, gen)
    d2 = filter_normalized_direction(params, gen)
    grid = np.linspace(-span, span, steps)
    aa, bb = np.meshgrid(grid, grid, indexing="ij")
    stacked = {}
    for k, p in params.items():
        shape = (-1, *([1] * p.dim()))
        a = torch.as_tensor(aa.ravel(), dtype=p.dtype, device=p.device).view(shape)
        b = torch.as_tensor(bb.ravel(), dtype=p.dtype, device=p.device).view(shape)
        stacked[k] = p.detach() + a * d1[k] + b * d2[k]
    loss, acc = _evaluate_stacked(model, stacked, x, y, batch_size, chunk)
    return {"alpha": grid, "beta": grid, "loss": loss.reshape(steps, steps),
            "acc": acc.reshape(steps, steps)}


@dataclass
class RunModel:
    """A run's final average model, rebuilt with the engine's own loaders."""

    cfg: Any
    model: nn.Module
    params: Params
    dataset: Any  # p2pfl.data.Dataset


def load_run(run_dir: str | Path, device: str = "cpu") -> RunModel:
    """Read config.json and final.pt of a run directory; rebuild its model and dataset.

    Parameters
    ----------
    run_dir : a finished run directory.
    device : where the model goes.

    Returns
    -------
    RunModel, the config, model, final average parameters and dataset.

    Raises
    ------
    FileNotFoundError
        when config.json or final.pt is missing.
    ValueError
        when final.pt lacks parameters of the model.
    """
    from p2pfl.config import config_from_dict
    from p2pfl.core.models import build_model
    from p2pfl.core.seeding import stream_seed
    from p2pfl.data import load_dataset

    run_dir = Path(run_dir)
    for name in ("config.json", "final.pt"):
        if not (run_dir / name).exists():
            raise FileNotFoundError(f"{run_dir} holds no {name}: is it a finished run directory?")
    cfg = config_from_dict(json.loads((run_dir / "config.json").read_text()))
    d = cfg.data
    dataset = load_dataset(d.name, d.root or None, seed=stream_seed(cfg.seed, "partition"),
                           synthetic_train=d.synthetic_train, synthetic_test=d.synthetic_test)
    dtype = getattr(torch, cfg.engine.dtype)
    model = build_model(cfg.model.name, dataset.input_shape, dataset.num_classes)
    model = model.to(device=device, dtype=dtype)
    state = torch.load(run_dir / "final.pt", map_location=device, weights_only=True)
    params = {k: v.to(device=device, dtype=dtype) for k, v in state["average_model"].items()}
    missing = set(dict(model.named_parameters())) - set(params)
    if missing:
        raise ValueError(f"final.pt of {run_dir} lacks parameters {sorted(missing)[:3]}")
    return RunModel(cfg, model, params, dataset)


def run_sharpness(run_dir: str | Path, samples: int = 1000, iters: int = 50, seed: int = 0,
                  landscape_steps: int = 0, span: float = 1.0,
                  device: str = "cpu") -> dict[str, Any]:
    """Sharpness numbers of a run's final average model.

    The Hessian is that of the mean cross-entropy over `samples` training samples drawn with
    `seed`; test loss and accuracy are over the whole test set.

    Parameters
    ----------
    run_dir : a finished run directory.
    samples : training samples of the Hessian's loss.
    iters : most Hessian-vector products.
    seed : the seed of the samples and the power iteration.
    landscape_steps : > 0: the result also holds a landscape_2d slice on the test set, this many
        points per axis.
    span : the slice's half-width.
    device : where the model goes.

    Returns
    -------
    dict: hessian_top_eigenvalue, train_loss, test_loss, test_acc, samples (and landscape).
    """
    run = load_run(run_dir, device)
    ds = run.dataset
    dtype = next(iter(run.params.values())).dtype
    idx = np.random.default_rng(seed).choice(len(ds.y_train), size=min(samples, len(ds.y_train)),
                                             replace=False)
    idx_t = torch.as_tensor(np.sort(idx))
    x, y = ds.x_train[idx_t].to(device, dtype), ds.y_train[idx_t].to(device)
    loss_fn = model_loss(run.model, x, y)
    x_test, y_test = ds.x_test.to(device, dtype), ds.y_test.to(device)
    test_loss, test_acc = _evaluate_stacked(run.model, {k: v[None] for k, v in run.params.items()},
                                            x_test, y_test, 1000, 1)
    out: dict[str, Any] = {
        "hessian_top_eigenvalue": hessian_top_eigenvalue(loss_fn, run.params, iters, seed=seed),
        "train_loss": float(loss_fn(run.params)),
        "test_loss": float(test_loss[0]),
        "test_acc": float(test_acc[0]),
        "samples": len(idx),
    }
    if landscape_steps:
        out["landscape"] = landscape_2d(run.model, run.params, x_test, y_test, span,
                                        landscape_steps, seed)
    return out
