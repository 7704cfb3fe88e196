"""What an algorithm adds to the local step: composable terms, and the step direction they give.

A local step of m rows takes the gradient g of the objective at x + e, then the direction

    d = clip(c_k(... c_1(g, x) ..., x)) + wd * x

Three kinds of term, each a `Term` (per-row tensors `[m, *shape]`, restricted to some rows by
`rows`; a model shared by all rows may be an expanded view):

- a `Correction` changes the direction: `apply(direction, x) -> direction`, applied in order;
- a `Perturbation` says where the gradient is taken: `perturb(g1, x, rho) -> e` from the gradient
  g1 at x (or without it: `needs_gradient = False`), and `mix`: the gradient used is
  (1 - mix) g1 + mix g(x + e);
- an `Objective` adds to the loss: `extra(logits, prepared, batch) -> [c]` beside the
  cross-entropy, `prepared` what `prepare(forward, batch)` computed without a graph.

`LocalTerms` composes them for one call of the trainer, with `trainable`: the parameters that
move (the others keep their values). The core offers the generic terms (`Scaled`, `Linear`,
`Proximal`, `GradientAscent`); an algorithm's own terms live in its module, next to its rule.
Without a perturbation the solver's SAM radius (`LocalSolver.rho`) gives `GradientAscent()`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import torch
import torch.nn.functional as F

from p2pfl.core.federated import Batch
from p2pfl.core.gradients import Gradients, batch_mean
from p2pfl.core.models import StackedForward
from p2pfl.core.population import Params, per_node_sq_norm, row_scale
from p2pfl.core.solver import CLIP_EPS, SAM_EPS, LocalSolver, Scratch, weighting

Rows = slice | torch.Tensor
TermT = TypeVar("TermT", bound="Term")


@dataclass(frozen=True)
class Term:
    """A term of the local step over m rows: its tensor fields (a tensor [m, ...] or a dict of
    them) are per row; `rows` restricts them."""

    def rows(self: TermT, rows: Rows) -> TermT:
        """The term of rows `rows`: a slice (views: in-place updates reach the full tensors) or
        a bool mask / index tensor (copies, except a model shared by all rows: it stays an
        expanded view)."""
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict):
                changes[f.name] = {k: take_rows(v, rows) for k, v in value.items()}
            elif isinstance(value, torch.Tensor):
                changes[f.name] = take_rows(value, rows)
        return dataclasses.replace(self, **changes)

    def mutable(self) -> tuple[Params, ...]:
        """The per-row tensors the term updates in place during the steps (written back to the
        whole term after a chunk trained on copies of its rows)."""
        return ()


def take_rows(value: torch.Tensor, rows: Rows) -> torch.Tensor:
    """`value[rows]`, an expanded view when every row of `value` is one tensor (stride 0).

    Parameters
    ----------
    value : [m, ...].
    rows : a slice, or a bool or int64 index tensor.

    Returns
    -------
    [rows, ...] tensor.
    """
    if isinstance(rows, slice) or value.stride(0) != 0:
        return value[rows]
    count = int(rows.sum()) if rows.dtype == torch.bool else len(rows)
    return value[:1].expand(count, *value.shape[1:])


def scaled(tensors: Params, scale: torch.Tensor) -> Params:
    """Each row of every tensor times its `scale`.

    Parameters
    ----------
    tensors : name -> [m, *shape].
    scale : [m].

    Returns
    -------
    Params, name -> [m, *shape] (new tensors).
    """
    return {k: t * row_scale(scale, t) for k, t in tensors.items()}


@dataclass(frozen=True)
class Correction(Term, ABC):
    @abstractmethod
    def apply(self, direction: Params, params: Params) -> Params:
        """The direction [m, ...] after this term, at the rows' parameters `params`."""


@dataclass(frozen=True)
class Perturbation(Term, ABC):
    needs_gradient: ClassVar[bool] = True  # perturb reads g1 (else one gradient a step)
    mix: float = 1.0  # weight of the gradient at x + e against g1

    @abstractmethod
    def perturb(self, grads: Params | None, params: Params, rho: float) -> Params | None:
        """The perturbation e [m, ...] of one step (None: none); `grads` is g1 at x."""


@dataclass(frozen=True)
class Objective(Term, ABC):
    def prepare(self, forward: StackedForward, batch: Batch) -> Any:
        """What `extra` needs of the batch, computed without a graph."""
        return None

    @abstractmethod
    def extra(self, logits: torch.Tensor, prepared: Any, batch: Batch) -> torch.Tensor:
        """The term added to each row's batch-mean cross-entropy: [c], from logits [c, B, K]."""


@dataclass(frozen=True)
class Scaled(Correction):
    """d <- factor * d (applied first, it scales the gradient)."""

    factor: float = 1.0

    def apply(self, direction: Params, params: Params) -> Params:
        return {k: d * self.factor for k, d in direction.items()}


@dataclass(frozen=True)
class Linear(Correction):
    """d <- d + v, a per-row vector v [m, ...] (a control variate, a dual, a correction)."""

    vector: Params = field(default_factory=dict)

    def apply(self, direction: Params, params: Params) -> Params:
        return {k: d + self.vector[k] for k, d in direction.items()}


@dataclass(frozen=True)
class Proximal(Correction):
    """d <- d + mu (x - anchor), the gradient of (mu / 2) ||x - anchor||^2."""

    mu: float = 0.0
    anchor: Params = field(default_factory=dict)

    def apply(self, direction: Params, params: Params) -> Params:
        return {k: d + self.mu * (params[k] - self.anchor[k]) for k, d in direction.items()}


@dataclass(frozen=True)
class GradientAscent(Perturbation):
    """SAM's ascent: e = rho * g1 / (||g1|| + eps), one global L2 norm per row; none at
    rho = 0."""

    def perturb(self, grads: Params | None, params: Params, rho: float) -> Params | None:
        if rho <= 0:
            return None
        return scaled(grads, rho / (per_node_sq_norm(grads).sqrt() + SAM_EPS))


@dataclass(frozen=True)
class LocalTerms:
    """The terms of one trainer call (see the module docstring), rows as its params'."""

    corrections: tuple[Correction, ...] = ()
    perturbation: Perturbation | None = None
    objective: Objective | None = None
    trainable: tuple[str, ...] | None = None  # the parameters that move (None: all)

    def rows(self, rows: Rows) -> LocalTerms:
        """The terms of rows `rows` (Term.rows)."""
        return LocalTerms(tuple(c.rows(rows) for c in self.corrections),
                          None if self.perturbation is None else self.perturbation.rows(rows),
                          None if self.objective is None else self.objective.rows(rows),
                          self.trainable)

    def mutable(self) -> tuple[Params, ...]:
        """Every term's in-place state (Term.mutable), in a fixed order."""
        parts = (*self.corrections, self.perturbation, self.objective)
        return tuple(s for p in parts if p is not None for s in p.mutable())

    def write_back(self, part: LocalTerms, rows: Rows) -> None:
        """Copy the in-place state of `part` (the terms of `rows`, trained on copies) into
        these terms."""
        for whole, piece in zip(self.mutable(), part.mutable()):
            for k, v in whole.items():
                v[rows] = piece[k]


def _objective_grads(forward: StackedForward, gradients: Gradients, params: Params,
                     batch: Batch, objective: Objective | None, prepared: Any,
                     names: tuple[str, ...]) -> tuple[Params, torch.Tensor]:
    """Per-node gradients (of the `names` parameters) of the local objective; CE losses [c].
    The plain cross-entropy of all parameters goes through `gradients`, anything else through
    autograd over `forward`."""
    x, y = batch.x, batch.y
    if objective is None and len(names) == len(params):
        return gradients(params, x, y, **weighting(batch))
    leaves = {k: v.detach().requires_grad_() if k in names else v.detach()
              for k, v in params.items()}
    logits = forward(leaves, x)
    ce = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(y.shape)
    ce = batch_mean(ce, batch.weight)
    total = ce if objective is None else ce + objective.extra(logits, prepared, batch)
    grads = torch.autograd.grad(total.sum(), [leaves[k] for k in names])
    return dict(zip(names, grads)), ce.detach()


def corrected_direction(forward: StackedForward, gradients: Gradients, params: Params,
                        batch: Batch, solver: LocalSolver, terms: LocalTerms,
                        scratch: Scratch) -> tuple[Params, torch.Tensor]:
    """The step direction of `terms` (before weight decay and momentum), and the losses.

    The gradient at x + e is taken at a scratch copy of the perturbed rows (x does not move).

    Parameters
    ----------
    forward : the stacked forward.
    gradients : the per-node gradients.
    params : name -> [c, *shape], x.
    batch : the minibatch of each node.
    solver : rho and clip_norm.
    terms : the corrections, perturbation and objective.
    scratch : (purpose, like) -> reused buffers.

    Returns
    -------
    tuple (direction name -> [c, *shape], CE losses [c] at x; at x + e when the perturbation needs
    no gradient at x, which is then never evaluated).
    """
    names = terms.trainable or tuple(params)
    objective = terms.objective
    prepared = None if objective is None else objective.prepare(forward, batch)
    ascent = terms.perturbation or GradientAscent()
    grads = losses = None
    if ascent.needs_gradient:
        grads, losses = _objective_grads(forward, gradients, params, batch, objective, prepared,
                                         names)
    perturb = ascent.perturb(grads, {k: params[k] for k in names}, solver.rho)
    if perturb is not None:
        moved = scratch("ascended", {k: params[k] for k in perturb})
        ascended = {k: torch.add(v, perturb[k], out=moved[k]) if k in perturb else v
                    for k, v in params.items()}
        at_e, losses_at_e = _objective_grads(forward, gradients, ascended, batch, objective,
                                             prepared, names)
        if grads is None:
            grads, losses = at_e, losses_at_e
        elif ascent.mix == 1.0:
            grads = at_e
        else:
            grads = {k: torch.lerp(g, at_e[k], ascent.mix) for k, g in grads.items()}
    direction = grads
    for correction in terms.corrections:
        direction = correction.apply(direction, params)
    if solver.clip_norm > 0:
        norm = per_node_sq_norm(direction).sqrt()
        direction = scaled(direction, (solver.clip_norm / (norm + CLIP_EPS)).clamp(max=1.0))
    return direction, losses
