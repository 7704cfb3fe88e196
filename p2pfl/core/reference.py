"""The per-node loop executor: the reference the vectorized population is checked and timed against.

Every node is its own `nn.Module` with its own `torch.optim.SGD`, trained one after the other with
plain autograd; nothing here is vectorized. Same interface as `VectorizedTrainer`.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from p2pfl.core.federated import BatchPlan, FederatedData
from p2pfl.core.population import Params
from p2pfl.core.solver import SAM_EPS, LocalSolver


class LoopTrainer:
    """Trains nodes one at a time, each as a separate module copy (a `Trainer`; it takes no
    algorithm terms)."""

    vectorized = False

    def __init__(self, model: nn.Module, data: FederatedData, num_nodes: int,
                 bf16: bool = False) -> None:
        self.data = data
        self.models = [copy.deepcopy(model) for _ in range(num_nodes)]
        self.bf16 = bf16  # forward and backward under bfloat16 autocast (engine.precision)

    def train(self, params: Params, nodes: torch.Tensor, plan: BatchPlan, solver: LocalSolver,
              lr: torch.Tensor, terms: None = None) -> torch.Tensor:
        if terms is not None:
            raise ValueError("the per-node loop runs plain local steps; an algorithm's terms need "
                             "the vectorized trainer")
        losses = torch.zeros(len(nodes), device=lr.device, dtype=lr.dtype)
        steps = plan.node_steps(nodes)
        for row, node in enumerate(nodes.tolist()):
            model = self.models[node]
            with torch.no_grad():
                for name, p in model.named_parameters():
                    p.copy_(params[name][row])
            optimizer = torch.optim.SGD(model.parameters(), lr=float(lr[row]),
                                        momentum=solver.momentum,
                                        weight_decay=solver.weight_decay)
            node_ids = nodes[row:row + 1]
            for step in range(int(steps[row])):
                batch = self.data.batch(plan, step, node_ids)
                size = len(batch.y[0]) if batch.weight is None else int((batch.weight[0] > 0).sum())
                losses[row] += self._step(model, optimizer, batch.x[0, :size], batch.y[0, :size],
                                          solver, self.bf16)
            losses[row] /= max(int(steps[row]), 1)
            with torch.no_grad():
                for name, p in model.named_parameters():
                    params[name][row].copy_(p)
        return losses

    @staticmethod
    def _step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor,
              y: torch.Tensor, solver: LocalSolver, bf16: bool) -> torch.Tensor:
        def loss_at_x() -> torch.Tensor:
            if not bf16:
                return F.cross_entropy(model(x), y)
            with torch.autocast(x.device.type, dtype=torch.bfloat16):
                logits = model(x)
            return F.cross_entropy(logits.float(), y)

        optimizer.zero_grad()
        loss = loss_at_x()
        loss.backward()
        if solver.rho > 0:
            grads = [p.grad for p in model.parameters()]
            norm = torch.norm(torch.stack([g.norm() for g in grads]))
            perturb = [g * (solver.rho / (norm + SAM_EPS)) for g in grads]
            with torch.no_grad():
                for p, e in zip(model.parameters(), perturb):
                    p.add_(e)
            optimizer.zero_grad()
            loss_at_x().backward()
            with torch.no_grad():
                for p, e in zip(model.parameters(), perturb):
                    p.sub_(e)
        if solver.clip_norm > 0:
            nn.utils.clip_grad_norm_(model.parameters(), solver.clip_norm)
        optimizer.step()
        return loss.detach()  # no .item(): a host sync per step would handicap the loop on GPU
