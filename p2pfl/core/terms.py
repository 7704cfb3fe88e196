"""What centralized algorithms put into the local step (`LocalTerms`: gradient corrections,
proximal and distillation terms, SAM variants) and the step direction they give.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
import torch.nn.functional as F

from p2pfl.core.federated import Batch
from p2pfl.core.gradients import Gradients, batch_mean
from p2pfl.core.models import StackedForward
from p2pfl.core.population import Params, per_node_sq_norm, row_scale
from p2pfl.core.solver import CLIP_EPS, SAM_EPS, LocalSolver, Scratch, weighting

ASCENTS = ("gradient", "corrected", "layerwise", "fixed")


@dataclass(frozen=True)
class LocalTerms:
    """What a centralized algorithm adds to the local step of the m rows it trains.

    Every per-row tensor is stacked `[m, *shape]` (a model shared by all rows may be an expanded
    view). The step direction is

        d = clip(grad_scale * g + linear + prox * (x - anchor)) + wd * x

    where g is the gradient of the objective CE + distill_weight * tau^2 * KL(p_teacher || p_x)
    (softmax at temperature tau, batch mean; the teacher's forward builds no graph), taken at
    x + e on the same minibatch, with e from the `ascent` rule (rho is the solver's radius):

    - "gradient":  e = rho * g1 / (||g1|| + eps)                       (SAM; SGD when rho = 0)
    - "corrected": a = g1 - dual - shift, e = rho * a / (||a|| + eps), then dual += e - shift
      (FedSMOO; `dual` is updated in place every step)
    - "layerwise": e_k = radii[:, k] * g1_k / (||g1|| + eps), one radius per parameter tensor
      and row, the norm global (FedFSA)
    - "fixed":     e = perturb, fixed for the round; one forward/backward per step (FedLESAM)

    With sam_mix < 1 the gradient is (1 - sam_mix) * g1 + sam_mix * g(x + e) (FedSpeed's
    quasi-gradient). Only the `trainable` parameters move when it is given. The losses reported
    are the cross-entropies at x (at x + e for "fixed", which never evaluates x).
    """

    grad_scale: float = 1.0
    linear: Params | None = None
    prox: float = 0.0
    anchor: Params | None = None
    ascent: str = "gradient"
    dual: Params | None = None
    shift: Params | None = None
    radii: torch.Tensor | None = None  # [m, number of parameter tensors], in params order
    perturb: Params | None = None
    sam_mix: float = 1.0
    teacher: Params | None = None
    distill_weight: float = 0.0
    temperature: float = 1.0
    trainable: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.ascent not in ASCENTS:
            raise ValueError(f"unknown ascent {self.ascent!r}; allowed: {', '.join(ASCENTS)}")
        needs = {"corrected": ("dual", "shift"), "layerwise": ("radii",), "fixed": ("perturb",)}
        for name in needs.get(self.ascent, ()):
            if getattr(self, name) is None:
                raise ValueError(f"ascent {self.ascent!r} needs {name}")
        if self.prox and self.anchor is None:
            raise ValueError("a proximal term needs an anchor")

    def rows(self, rows: slice | torch.Tensor) -> LocalTerms:
        """The terms of rows `rows`, a slice (views: in-place dual updates reach the full
        tensors) or a bool mask / index tensor (copies, except a model shared by all rows: it
        stays an expanded view)."""
        changes: dict = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict):
                changes[f.name] = {k: _take(v, rows) for k, v in value.items()}
            elif isinstance(value, torch.Tensor):
                changes[f.name] = _take(value, rows)
        return replace(self, **changes)


def _take(value: torch.Tensor, rows: slice | torch.Tensor) -> torch.Tensor:
    """`value[rows]`, an expanded view when every row of `value` is one tensor (stride 0)."""
    if isinstance(rows, slice) or value.stride(0) != 0:
        return value[rows]
    count = int(rows.sum()) if rows.dtype == torch.bool else len(rows)
    return value[:1].expand(count, *value.shape[1:])


def _objective_grads(forward: StackedForward, gradients: Gradients, params: Params,
                     batch: Batch, terms: LocalTerms, teacher_logits: torch.Tensor | None,
                     names: tuple[str, ...]) -> tuple[Params, torch.Tensor]:
    """Per-node gradients (of the `names` parameters) of the local objective; CE losses [c].
    The plain cross-entropy of all parameters goes through `gradients`, anything else through
    autograd over `forward`."""
    x, y = batch.x, batch.y
    if teacher_logits is None and len(names) == len(params):
        return gradients(params, x, y, **weighting(batch))
    leaves = {k: v.detach().requires_grad_() if k in names else v.detach()
              for k, v in params.items()}
    logits = forward(leaves, x)
    ce = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(y.shape)
    ce = batch_mean(ce, batch.weight)
    objective = ce
    if teacher_logits is not None:
        tau = terms.temperature
        log_p = F.log_softmax(logits / tau, dim=-1)
        log_q = F.log_softmax(teacher_logits / tau, dim=-1)
        kl = batch_mean((log_q.exp() * (log_q - log_p)).sum(dim=-1), batch.weight)
        objective = ce + terms.distill_weight * tau**2 * kl
    grads = torch.autograd.grad(objective.sum(), [leaves[k] for k in names])
    return dict(zip(names, grads)), ce.detach()


def _scaled(tensors: Params, scale: torch.Tensor) -> Params:
    return {k: t * row_scale(scale, t) for k, t in tensors.items()}


def _ascent(grads: Params, params: Params, solver: LocalSolver,
            terms: LocalTerms) -> Params | None:
    """The perturbation e of one step from the gradient g1 at x (None: no ascent)."""
    if terms.ascent == "gradient":
        if solver.rho <= 0:
            return None
        return _scaled(grads, solver.rho / (per_node_sq_norm(grads).sqrt() + SAM_EPS))
    if terms.ascent == "corrected":
        direction = {k: g - terms.dual[k] - terms.shift[k] for k, g in grads.items()}
        perturb = _scaled(direction, solver.rho / (per_node_sq_norm(direction).sqrt() + SAM_EPS))
        for k, e in perturb.items():
            terms.dual[k].add_(e - terms.shift[k])
        return perturb
    norm = per_node_sq_norm(grads).sqrt() + SAM_EPS
    order = list(params)
    return {k: g * row_scale(terms.radii[:, order.index(k)] / norm, g) for k, g in grads.items()}


def corrected_direction(forward: StackedForward, gradients: Gradients, params: Params,
                        batch: Batch, solver: LocalSolver, terms: LocalTerms,
                        scratch: Scratch) -> tuple[Params, torch.Tensor]:
    """The step direction of `LocalTerms` (before weight decay and momentum); CE losses [c].
    The gradient at x + e is taken at a scratch copy of the perturbed rows (x does not move)."""
    names = terms.trainable or tuple(params)
    teacher_logits = None
    if terms.teacher is not None and terms.distill_weight > 0:
        with torch.no_grad():
            teacher_logits = forward(terms.teacher, batch.x)
    if terms.ascent == "fixed":
        perturb: Params | None = {k: terms.perturb[k] for k in names}
        grads = None
    else:
        grads, losses = _objective_grads(forward, gradients, params, batch, terms,
                                         teacher_logits, names)
        perturb = _ascent(grads, params, solver, terms)
    if perturb is not None:
        moved = scratch("ascended", {k: params[k] for k in perturb})
        ascended = {k: torch.add(v, perturb[k], out=moved[k]) if k in perturb else v
                    for k, v in params.items()}
        perturbed, perturbed_losses = _objective_grads(forward, gradients, ascended, batch, terms,
                                                       teacher_logits, names)
        if grads is None:
            grads, losses = perturbed, perturbed_losses
        elif terms.sam_mix == 1.0:
            grads = perturbed
        else:
            grads = {k: torch.lerp(g, perturbed[k], terms.sam_mix) for k, g in grads.items()}
    direction = {}
    for k, g in grads.items():
        d = g * terms.grad_scale if terms.grad_scale != 1.0 else g
        if terms.linear is not None:
            d = d + terms.linear[k]
        if terms.prox:
            d = d + terms.prox * (params[k] - terms.anchor[k])
        direction[k] = d
    if solver.clip_norm > 0:
        norm = per_node_sq_norm(direction).sqrt()
        direction = _scaled(direction, (solver.clip_norm / (norm + CLIP_EPS)).clamp(max=1.0))
    return direction, losses
