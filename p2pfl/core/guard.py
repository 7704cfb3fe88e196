"""The divergence guard's pieces: which nodes diverged (went non-finite, or beyond a loss limit),
and freezing nodes for a round.

`Guard.wrap(trainer)` is the run's trainer under the guard (a `GuardedTrainer`: the run's
`ctx.trainer`, and any trainer an algorithm builds for itself, which it wraps with
`ctx.guard.wrap`). It records, per round, the nodes whose training loss or parameters became
non-finite (or whose loss passed `max_loss`) during their local phase, before any mixing can
spread the NaN to their neighbours; and it undoes the local phase of frozen nodes, whose rows keep
their values. `cut_links` removes a frozen node's links from a round's graph so that it neither
sends nor receives.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import torch

from p2pfl.core.population import Params
from p2pfl.core.trainer import Trainer


def finite_rows(params: Params) -> torch.Tensor:
    """Whether every entry of each row is finite, over all tensors.

    One row sum per tensor in its own dtype (NaN and inf propagate), then an exact element check
    of the rows whose sum is not finite (a sum of large finite values may overflow: those rows
    are only suspects). A float64 sum of float32 rows would be ~20x slower on CPU.

    Parameters
    ----------
    params : name -> [rows, *shape].

    Returns
    -------
    bool [rows] tensor.
    """
    blocks = [v.reshape(v.shape[0], -1) for v in params.values()]
    total = sum(b.sum(dim=1) for b in blocks)
    ok = torch.isfinite(total)
    suspects = (~ok).nonzero().squeeze(1)
    if len(suspects):
        ok[suspects] = torch.stack([torch.isfinite(b[suspects]).all(dim=1) for b in blocks]).all(0)
    return ok


class Guard:
    """Divergence bookkeeping of one run, around its local trainers.

    A trainer it wraps (`wrap`) trains as before, then puts the rows of frozen nodes back to
    their values before training (their losses read 0) and records which other nodes ended with
    a non-finite loss or parameters, or a loss above `max_loss` (> 0; 0: no limit). `frozen` and
    the two records are bool [N] over node ids.
    """

    def __init__(self, num_nodes: int, device: torch.device, max_loss: float = 0.0) -> None:
        self.max_loss = max_loss
        self.frozen = torch.zeros(num_nodes, dtype=torch.bool, device=device)
        self.bad_loss = torch.zeros_like(self.frozen)
        self.bad_params = torch.zeros_like(self.frozen)

    def wrap(self, trainer: Trainer) -> GuardedTrainer:
        """`trainer` whose every local phase is guarded."""
        return GuardedTrainer(trainer, self)

    def diverged(self, losses: torch.Tensor) -> torch.Tensor:
        """bool [m]: which of the losses [m] count as a divergence."""
        bad = ~torch.isfinite(losses)
        return bad | (losses > self.max_loss) if self.max_loss > 0 else bad

    def begin_round(self, frozen: list[int]) -> None:
        """Forget the previous records and freeze `frozen` (node ids) for the coming round."""
        self.frozen.zero_()
        self.frozen[frozen] = True
        self.bad_loss.zero_()
        self.bad_params.zero_()

    def guarded(self, inner: Trainer, params: Params, nodes: torch.Tensor, *args: Any,
                **kwargs: Any) -> torch.Tensor:
        """`inner.train(params, nodes, ...)`, frozen rows kept, divergences recorded."""
        frozen = self.frozen[nodes]
        rows = frozen.nonzero().squeeze(1)
        kept = {k: v[rows].clone() for k, v in params.items()} if len(rows) else None
        losses = inner.train(params, nodes, *args, **kwargs)  # nodes train independently
        if kept is not None:
            for k, v in kept.items():
                params[k].index_copy_(0, rows, v)
            losses = losses.masked_fill(frozen, 0.0)
        self.bad_loss[nodes[self.diverged(losses) & ~frozen]] = True
        self.bad_params[nodes[~finite_rows(params) & ~frozen]] = True
        return losses


class GuardedTrainer:
    """A trainer under the divergence guard (`Guard.wrap`); everything but `train` is the inner
    trainer's."""

    def __init__(self, inner: Trainer, guard: Guard) -> None:
        self.inner, self.guard = inner, guard

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def train(self, params: Params, nodes: torch.Tensor, *args: Any,
              **kwargs: Any) -> torch.Tensor:
        return self.guard.guarded(self.inner, params, nodes, *args, **kwargs)


def cut_links(graph: nx.Graph, nodes: list[int]) -> nx.Graph:
    """`graph` without any edge to or from `nodes`.

    Parameters
    ----------
    graph : the round's graph.
    nodes : graph node ids.

    Returns
    -------
    nx.Graph, a copy without those edges; `graph` itself when `nodes` is empty.
    """
    if not nodes:
        return graph
    cut = graph.copy()
    edges = list(cut.edges(nodes))
    if cut.is_directed():
        edges += list(cut.in_edges(nodes))
    cut.remove_edges_from(edges)
    return cut
