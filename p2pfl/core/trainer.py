"""The local phase of many nodes at once: `Trainer`, what runs a local phase, and
`VectorizedTrainer`, which runs K optimizer steps on stacked parameters, chunk by chunk, one
batched forward/backward per step for all nodes of a chunk (the per-step rule is
p2pfl.core.solver's, with p2pfl.core.terms' additions).

A trainer is wrapped, never patched: the divergence guard (p2pfl.core.guard.GuardedTrainer), a
stacked experiment's member (p2pfl.engine.stacked.StackedTrainer) and a distributed run's
clients (p2pfl.scale.distributed.ShardedTrainer) are trainers around an inner one, built where
the run is built.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from p2pfl.core.federated import Batch, BatchPlan, FederatedData
from p2pfl.core.gradients import AutogradGradients, Gradients
from p2pfl.core.models import StackedForward
from p2pfl.core.population import Params
from p2pfl.core.solver import LocalSolver, apply_step, descent_direction, momentum_step
from p2pfl.core.terms import LocalTerms, corrected_direction


class Trainer(Protocol):
    """Runs the local phase of some nodes: `train` updates their rows in place.

    `vectorized`: whether it trains stacked rows in batched chunks (`chunk_size`,
    `eval_chunk_size`, `gradients` and `data` are then those of a VectorizedTrainer) and takes
    an algorithm's `terms`; the per-node loop (p2pfl.core.reference) does not.
    """

    vectorized: bool

    def train(self, params: Params, nodes: torch.Tensor, plan: BatchPlan, solver: LocalSolver,
              lr: torch.Tensor, terms: LocalTerms | None = None) -> torch.Tensor:
        """Update `params` in place with the local phase of `nodes`.

        Parameters
        ----------
        params : name -> [m, ...], row r is node nodes[r].
        nodes : int64 [m].
        plan : the round's minibatches.
        solver : the local solver.
        lr : [m] step size of each row.
        terms : the algorithm's additions to the step (rows as `params`), or None.

        Returns
        -------
        [m] tensor, each row's mean training loss.
        """
        ...


class VectorizedTrainer:
    """Runs the local phase of many nodes as batched tensor operations, `chunk_size` nodes at a
    time (each chunk runs all its steps; nodes are independent, so chunking does not change
    results). Nodes that take different numbers of steps K_i are trained in the order of
    decreasing K_i, so that the nodes still stepping at step k are a prefix of their chunk and
    every step works on views of it. `gradients` (p2pfl.core.gradients; default autograd through
    `forward`) gives the cross-entropy gradients; a distillation term or a subset of trainable
    parameters (`LocalTerms`), or a weighted step that `gradients` cannot weight, takes autograd
    through `forward`. Evaluation of the nodes' models goes `eval_chunk_size` nodes at a time
    (p2pfl.core.memory).

    `batch_statistics`: the forward normalises over the batch (BatchNorm without running
    statistics), so a padded row would change the real rows' outputs. A step whose batches
    differ in width across nodes (ragged node sizes, merged stacked plans) then runs once per
    distinct width, each group on its real samples only, as every node would alone.
    """

    vectorized = True

    def __init__(self, forward: StackedForward, data: FederatedData, chunk_size: int,
                 eval_chunk_size: int | None = None, gradients: Gradients | None = None,
                 batch_statistics: bool = False) -> None:
        self.forward = forward
        self.data = data
        self.chunk_size = chunk_size
        self.eval_chunk_size = eval_chunk_size or chunk_size
        self.batch_statistics = batch_statistics
        self.gradients = gradients or AutogradGradients(forward)
        self.weighted_gradients = (self.gradients if self.gradients.weighted
                                   else AutogradGradients(forward))
        self._buffers: dict[tuple[str, str], torch.Tensor] = {}  # fresh ones page-fault

    def scratch(self, purpose: str, like: Params) -> Params:
        """Buffers shaped like `like` (contents undefined), reused from chunk to chunk for one
        `purpose`.

        Parameters
        ----------
        purpose : what the buffers are for ("gradient", ...).
        like : name -> [rows, ...].

        Returns
        -------
        Params, name -> [rows, ...] views of the held buffers.
        """
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
        """Update `params` in place with the local phase of `nodes`, a chunk of nodes at a time.

        Parameters
        ----------
        params : name -> [m, ...], row r belongs to node nodes[r].
        nodes : int64 [m].
        plan : the round's minibatches (K_i steps of node i).
        solver : the local solver.
        lr : [m] step size of each row.
        terms : the algorithm's additions to the step (rows as `params`), or None.

        Returns
        -------
        [m] tensor, each row's mean training loss over its K_i steps.
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
                if chunk_terms is not None:
                    terms.write_back(chunk_terms, rows)
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
            if self.batch_statistics and batch.weight is not None:
                loss_sum[:active] += self._step_by_width(rows, batch, solver, x, b, t, step)
            else:
                loss_sum[:active] += self._step(rows, batch, solver, x, b, t, step,
                                                fused=fused)
        return loss_sum / torch.as_tensor(steps, device=lr.device, dtype=lr.dtype).clamp(min=1)

    def _step(self, rows: Params, batch: Batch, solver: LocalSolver, buffers: Params | None,
              lr: torch.Tensor, terms: LocalTerms | None, step: int,
              fused: bool = False) -> torch.Tensor:
        """One local step of `rows` [c, ...] on `batch`, in place; the losses at x [c]."""
        gradients = self.gradients if batch.weight is None else self.weighted_gradients
        if fused and gradients.accumulates:
            return momentum_step(gradients, rows, batch, solver, self.scratch, buffers, lr,
                                 first=step == 0)
        if terms is None:
            direction, losses = descent_direction(gradients, rows, batch, solver, self.scratch)
        else:
            direction, losses = corrected_direction(self.forward, gradients, rows, batch,
                                                    solver, terms, self.scratch)
        apply_step(rows, direction, buffers, lr, solver, first=step == 0)
        return losses

    def _step_by_width(self, rows: Params, batch: Batch, solver: LocalSolver,
                       buffers: Params | None, lr: torch.Tensor, terms: LocalTerms | None,
                       step: int) -> torch.Tensor:
        """`_step` for a padded batch (weights [c, w]) of a forward with batch statistics: the
        rows grouped by their real batch size, each group's step on its real samples only
        (copies of its rows, written back). The losses at x [c]."""
        sizes = (batch.weight > 0).sum(dim=1)
        losses = torch.empty(len(sizes), device=lr.device, dtype=lr.dtype)
        for size in sizes.unique().tolist():
            group = torch.nonzero(sizes == size).flatten()
            own = {k: v[group] for k, v in rows.items()}
            own_buffers = None if buffers is None else {k: v[group] for k, v in buffers.items()}
            own_terms = None if terms is None else terms.rows(group)
            real = Batch(batch.x[group, :size], batch.y[group, :size], None)
            losses[group] = self._step(own, real, solver, own_buffers, lr[group], own_terms,
                                       step)
            for held, updated in ((rows, own), (buffers, own_buffers)):
                for k, v in (held or {}).items():
                    v[group] = updated[k]
            if own_terms is not None:
                terms.write_back(own_terms, group)
        return losses
