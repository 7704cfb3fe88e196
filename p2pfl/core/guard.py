"""The divergence guard's pieces: which nodes diverged (went non-finite, or beyond a loss limit),
and freezing nodes for a round.

`Guard` hooks the run's local trainers (`ctx.trainer`, and any trainer an algorithm builds for
itself, on which it calls `ctx.guard.install`). It records, per round, the nodes whose training
loss or parameters became non-finite (or whose loss passed `max_loss`) during their local phase,
before any mixing can spread the NaN to their neighbours; and it undoes the local phase of frozen
nodes, whose rows keep their values. `cut_links` removes a frozen node's links from a round's
graph so that it neither sends nor receives.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import torch

from p2pfl.core.population import Params


def finite_rows(params: Params) -> torch.Tensor:
    """bool [rows]: whether every entry of each row is finite, over all tensors.

    One row sum per tensor in its own dtype (NaN and inf propagate), then an exact element check
    of the rows whose sum is not finite (a sum of large finite values may overflow: those rows
    are only suspects). A float64 sum of float32 rows would be ~20x slower on CPU.
    """
    blocks = [v.reshape(v.shape[0], -1) for v in params.values()]
    total = sum(b.sum(dim=1) for b in blocks)
    ok = torch.isfinite(total)
    suspects = (~ok).nonzero().squeeze(1)
    if len(suspects):
        ok[suspects] = torch.stack([torch.isfinite(b[suspects]).all(dim=1) for b in blocks]).all(0)
    return ok


class Guard:
    """Divergence bookkeeping of one run, installed on its local trainer.

    `install` replaces the trainer object's `train` method (on the instance, so algorithms that
    keep a reference to the trainer are covered too) by one that trains as before, then puts the
    rows of frozen nodes back to their values before training (their losses read 0) and records
    which other nodes ended with a non-finite loss or parameters, or a loss above `max_loss`
    (> 0; 0: no limit). `frozen` and the two records are bool [N] over node ids.
    """

    def __init__(self, num_nodes: int, device: torch.device, max_loss: float = 0.0) -> None:
        self.max_loss = max_loss
        self.frozen = torch.zeros(num_nodes, dtype=torch.bool, device=device)
        self.bad_loss = torch.zeros_like(self.frozen)
        self.bad_params = torch.zeros_like(self.frozen)

    def install(self, trainer: Any) -> Any:
        """Guard every local phase run through `trainer` (any object with the trainers'
        `train(params, nodes, ...) -> losses` method); returns `trainer`."""
        inner = trainer.train

        def train(params: Params, nodes: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            return self._train(inner, params, nodes, *args, **kwargs)

        trainer.train = train
        return trainer

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

    def _train(self, inner: Any, params: Params, nodes: torch.Tensor, *args: Any,
               **kwargs: Any) -> torch.Tensor:
        frozen = self.frozen[nodes]
        rows = frozen.nonzero().squeeze(1)
        kept = {k: v[rows].clone() for k, v in params.items()} if len(rows) else None
        losses = inner(params, nodes, *args, **kwargs)  # nodes train independently
        if kept is not None:
            for k, v in kept.items():
                params[k].index_copy_(0, rows, v)
            losses = losses.masked_fill(frozen, 0.0)
        self.bad_loss[nodes[self.diverged(losses) & ~frozen]] = True
        self.bad_params[nodes[~finite_rows(params) & ~frozen]] = True
        return losses


def cut_links(graph: nx.Graph, nodes: list[int]) -> nx.Graph:
    """A copy of `graph` without any edge to or from `nodes` (graph node ids); `graph` itself when
    `nodes` is empty."""
    if not nodes:
        return graph
    cut = graph.copy()
    edges = list(cut.edges(nodes))
    if cut.is_directed():
        edges += list(cut.in_edges(nodes))
    cut.remove_edges_from(edges)
    return cut
