"""The local phase: K optimizer steps of many nodes at once.

`LocalSolver` is the per-step rule shared by every algorithm (SGD, heavy-ball momentum reset each
round, the SAM ascent, weight decay, clipping). `LocalTerms` adds what centralized algorithms put
into the step (gradient corrections, proximal and distillation terms, SAM variants).
`VectorizedTrainer` runs it on stacked parameters, chunk by chunk, one batched forward/backward per
step for all nodes of a chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import numpy as np
import torch
import torch.nn.functional as F

from p2pfl.federated import Batch, BatchPlan, FederatedData
from p2pfl.gradients import AutogradGradients, Gradients, batch_mean
from p2pfl.models import StackedForward
from p2pfl.population import Params, per_node_sq_norm, row_scale

SAM_EPS = 1e-7  # added to ||g|| in the SAM ascent (FL-Simulator's value)
CLIP_EPS = 1e-6  # as torch.nn.utils.clip_grad_norm_


@dataclass(frozen=True)
class LocalSolver:
    """One local step: d = clip(g) + wd * x; b = momentum * b + d; x -= lr * b.

    With `rho` > 0, g is the SAM gradient: g1 at x, e = rho * g1 / (||g1|| + eps) with one global
    L2 norm per node, g = gradient at x + e on the SAME minibatch, taken at a copy of x + e (x
    itself does not move). The momentum buffer starts at zero every round. Weight decay is not
    part of the loss and is added after clipping, as torch.optim.SGD does.
    """

    momentum: float = 0.0
    rho: float = 0.0
    weight_decay: float = 0.0
    clip_norm: float = 0.0


Scratch = Callable[[str, Params], Params]  # (purpose, like) -> reused buffers shaped like `like`


def _ascended(params: Params, grads: Params, rho: float, scratch: Scratch) -> Params:
    """x + e in scratch buffers, e = rho * g / (||g|| + eps) per node (x itself does not move)."""
    scale = rho / (per_node_sq_norm(grads).sqrt() + SAM_EPS)
    ascended = scratch("ascended", params)
    for k, g in grads.items():
        torch.addcmul(params[k], g, row_scale(scale, g), out=ascended[k])
    return ascended


def descent_direction(gradients: Gradients, params: Params, batch: Batch,
                      solver: LocalSolver, scratch: Scratch) -> tuple[Params, torch.Tensor]:
    """The (SAM) gradient at `params` on one minibatch, clipped per node; and the losses at x.

    The SAM gradient is taken at x + e written into a scratch copy, so x itself is never moved
    and restored. The direction may be a scratch buffer: it is valid until the next call.
    """
    def into(purpose: str) -> Params | None:
        return scratch(purpose, params) if gradients.fills_buffers else None

    x, y, weight = batch.x, batch.y, _weighting(batch)
    grads, losses = gradients(params, x, y, into("gradient"), **weight)
    if solver.rho > 0:  # g1 is spent once x + e is written: its buffers take g
        grads, _ = gradients(_ascended(params, grads, solver.rho, scratch), x, y,
                             into("gradient"), **weight)
    if solver.clip_norm > 0:
        norm = per_node_sq_norm(grads).sqrt()
        coef = (solver.clip_norm / (norm + CLIP_EPS)).clamp(max=1.0)
        for g in grads.values():
            g.mul_(row_scale(coef, g))
    return grads, losses


def _weighting(batch: Batch) -> dict[str, torch.Tensor]:
    """The `weight` keyword of a gradients call for `batch` (none for a plain batch mean)."""
    return {} if batch.weight is None else {"weight": batch.weight}


def momentum_step(gradients: Gradients, params: Params, batch: Batch, solver: LocalSolver,
                  scratch: Scratch, buffers: Params, lr: torch.Tensor,
                  first: bool) -> torch.Tensor:
    """One local step (no clipping) whose (SAM) gradient is accumulated into the momentum
    buffers by the gradient's own products (`gradients.accumulates`): b <- momentum * b + g
    (b <- g when `first`), b += wd * x, x -= lr * b. One pass over memory less than
    `descent_direction` + `apply_step`, same values up to rounding. Returns the losses at x."""
    beta = 0.0 if first else solver.momentum
    x, y, weight = batch.x, batch.y, _weighting(batch)
    if solver.rho > 0:
        grads, losses = gradients(params, x, y, scratch("gradient", params), **weight)
        gradients(_ascended(params, grads, solver.rho, scratch), x, y, buffers, beta, **weight)
    else:
        _, losses = gradients(params, x, y, buffers, beta, **weight)
    for k, b in buffers.items():
        if solver.weight_decay > 0:
            b.add_(params[k], alpha=solver.weight_decay)
        params[k].addcmul_(b, row_scale(lr, b), value=-1.0)
    return losses


def apply_step(params: Params, direction: Params, buffers: Params | None, lr: torch.Tensor,
               solver: LocalSolver, first: bool = False) -> None:
    """x -= lr * (momentum buffer of d + wd * x), in place; `lr` is per node [c]. `direction`
    is consumed (weight decay is added to it in place).

    Two passes over memory per tensor (the step is memory-bound): b <- d + momentum * b, then
    x <- x - lr * b. `first`: the buffers hold garbage and are overwritten (the momentum buffer
    starts at zero every round, so its first value is d itself).
    """
    for k, d in direction.items():
        x = params[k]
        if solver.weight_decay > 0:
            d = d.add_(x, alpha=solver.weight_decay)
        if buffers is not None:
            b = buffers[k]
            d = b.copy_(d) if first else torch.add(d, b, alpha=solver.momentum, out=b)
        x.addcmul_(d, row_scale(lr, d), value=-1.0)


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
        tensors) or a bool mask / index tensor (copies)."""
        changes: dict = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict):
                changes[f.name] = {k: v[rows] for k, v in value.items()}
            elif isinstance(value, torch.Tensor):
                changes[f.name] = value[rows]
        return replace(self, **changes)


def _objective_grads(forward: StackedForward, gradients: Gradients, params: Params,
                     batch: Batch, terms: LocalTerms, teacher_logits: torch.Tensor | None,
                     names: tuple[str, ...]) -> tuple[Params, torch.Tensor]:
    """Per-node gradients (of the `names` parameters) of the local objective; CE losses [c].
    The plain cross-entropy of all parameters goes through `gradients`, anything else through
    autograd over `forward`."""
    x, y = batch.x, batch.y
    if teacher_logits is None and len(names) == len(params):
        return gradients(params, x, y, **_weighting(batch))
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


class VectorizedTrainer:
    """Runs the local phase of many nodes as batched tensor operations, `chunk_size` nodes at a
    time (each chunk runs all its steps; nodes are independent, so chunking does not change
    results). Nodes that take different numbers of steps K_i are trained in the order of
    decreasing K_i, so that the nodes still stepping at step k are a prefix of their chunk and
    every step works on views of it. `gradients` (p2pfl.gradients; default autograd through
    `forward`) gives the cross-entropy gradients; a distillation term or a subset of trainable
    parameters (`LocalTerms`), or a weighted step that `gradients` cannot weight, takes autograd
    through `forward`. Evaluation of the nodes' models goes `eval_chunk_size` nodes at a time
    (p2pfl.memory).
    """

    def __init__(self, forward: StackedForward, data: FederatedData, chunk_size: int,
                 eval_chunk_size: int | None = None, gradients: Gradients | None = None) -> None:
        self.forward = forward
        self.data = data
        self.chunk_size = chunk_size
        self.eval_chunk_size = eval_chunk_size or chunk_size
        self.gradients = gradients or AutogradGradients(forward)
        self.weighted_gradients = (self.gradients if self.gradients.weighted
                                   else AutogradGradients(forward))
        self._buffers: dict[tuple[str, str], torch.Tensor] = {}  # fresh ones page-fault

    def scratch(self, purpose: str, like: Params) -> Params:
        """Buffers shaped like `like` [rows, ...] (contents undefined), reused from chunk to
        chunk for one `purpose`."""
        rows = next(iter(like.values())).shape[0]
        for k, v in like.items():
            held = self._buffers.get((purpose, k))
            if (held is None or held.shape[0] < rows or held.shape[1:] != v.shape[1:]
                    or held.dtype != v.dtype or held.device != v.device):
                self._buffers[purpose, k] = torch.empty((max(rows, self.chunk_size), *v.shape[1:]),
                                                        dtype=v.dtype, device=v.device)
        return {k: self._buffers[purpose, k][:rows] for k in like}

    def train(self, params: Params, nodes: torch.Tensor, plan: BatchPlan, solver: LocalSolver,
              lr: torch.Tensor, terms: LocalTerms | None = None) -> torch.Tensor:
        """Update `params` (name -> [m, ...], row r belongs to node nodes[r]) in place.

        `lr` [m] is each row's step size; `terms` (rows as `params`) the algorithm's additions to
        the step. Returns each row's mean training loss over its K_i steps [m].
        """
        m = len(nodes)
        steps = plan.node_steps(nodes)
        mean_loss = torch.zeros(m, device=lr.device, dtype=lr.dtype)
        ragged = m > 0 and bool((steps != steps[0]).any())
        order = np.argsort(-steps, kind="stable") if ragged else np.arange(m)
        for start in range(0, m, self.chunk_size):
            stop = min(start + self.chunk_size, m)
            if ragged:  # copies of the rows, in order of decreasing steps
                rows: slice | torch.Tensor = torch.as_tensor(order[start:stop],
                                                             device=nodes.device)
                chunk = {k: v[rows] for k, v in params.items()}
            else:
                rows = slice(start, stop)
                chunk = {k: v[rows] for k, v in params.items()}
            chunk_terms = terms.rows(rows) if terms is not None else None
            losses = self._train_chunk(chunk, nodes[rows], plan, steps[order[start:stop]],
                                       solver, lr[rows], chunk_terms)
            mean_loss[rows] = losses
            if ragged:
                for k, v in params.items():
                    v[rows] = chunk[k]
                if chunk_terms is not None and chunk_terms.dual is not None:
                    for k, v in terms.dual.items():
                        v[rows] = chunk_terms.dual[k]
        return mean_loss

    def _train_chunk(self, chunk: Params, nodes: torch.Tensor, plan: BatchPlan,
                     steps: np.ndarray, solver: LocalSolver, lr: torch.Tensor,
                     terms: LocalTerms | None) -> torch.Tensor:
        """All local steps of one chunk (rows in order of decreasing `steps` [c]); each row's
        mean loss [c]."""
        buffers = self.scratch("momentum", chunk) if solver.momentum > 0 else None
        fused = (terms is None and buffers is not None and solver.clip_norm == 0
                 and self.gradients.accumulates)
        loss_sum = torch.zeros(len(nodes), device=lr.device, dtype=lr.dtype)
        for step in range(int(steps.max()) if len(steps) else 0):
            active = int((steps > step).sum())
            rows, x, b, r, t = chunk, buffers, lr, nodes, terms
            if active < len(nodes):  # the nodes still stepping: a prefix, as views
                part = slice(0, active)
                rows, r, b = {k: v[part] for k, v in chunk.items()}, nodes[part], lr[part]
                x = None if buffers is None else {k: v[part] for k, v in buffers.items()}
                t = None if terms is None else terms.rows(part)
            batch = self.data.batch(plan, step, r)
            gradients = self.gradients if batch.weight is None else self.weighted_gradients
            if fused and gradients.accumulates:
                losses = momentum_step(gradients, rows, batch, solver, self.scratch, x, b,
                                       first=step == 0)
            else:
                if t is None:
                    direction, losses = descent_direction(gradients, rows, batch, solver,
                                                          self.scratch)
                else:
                    direction, losses = corrected_direction(self.forward, gradients, rows,
                                                            batch, solver, t, self.scratch)
                apply_step(rows, direction, x, b, solver, first=step == 0)
            loss_sum[:active] += losses
        return loss_sum / torch.as_tensor(steps, device=lr.device, dtype=lr.dtype).clamp(min=1)
