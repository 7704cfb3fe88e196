"""The divergence guard's pieces: which nodes went non-finite, and freezing nodes for a round.

`GuardedTrainer` wraps the run's local trainer (every algorithm trains through
`ctx.trainer.train`). It records, per round, the nodes whose training loss or parameters became
non-finite during their local phase, before any mixing can spread the NaN to their neighbours; and
it skips the local phase of frozen nodes, whose rows are left untouched. `cut_links` removes a
frozen node's links from a round's graph so that it neither sends nor receives.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import torch

from p2pfl.population import Params


def finite_rows(params: Params) -> torch.Tensor:
    """bool [rows]: whether every entry of each row is finite, over all tensors.

    One float64 row sum per tensor (NaN and inf propagate; a float32 sum cannot overflow in
    float64), then an exact element check of the rows whose sum is not finite.
    """
    blocks = [v.reshape(v.shape[0], -1) for v in params.values()]
    total = sum(b.sum(dim=1, dtype=torch.float64) for b in blocks)
    ok = torch.isfinite(total)
    suspects = (~ok).nonzero().squeeze(1)
    if len(suspects):
        ok[suspects] = torch.stack([torch.isfinite(b[suspects]).all(dim=1) for b in blocks]).all(0)
    return ok


class GuardedTrainer:
    """A local trainer that skips frozen nodes and records which nodes diverged.

    `frozen` and the two records are bool [N] over node ids. Every other attribute (e.g.
    `chunk_size`) is the wrapped trainer's.
    """

    def __init__(self, inner: Any, num_nodes: int, device: torch.device) -> None:
        self.inner = inner
        self.frozen = torch.zeros(num_nodes, dtype=torch.bool, device=device)
        self.bad_loss = torch.zeros_like(self.frozen)
        self.bad_params = torch.zeros_like(self.frozen)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["inner"], name)

    def begin_round(self, frozen: list[int]) -> None:
        """Forget the previous records and freeze `frozen` (node ids) for the coming round."""
        self.frozen.zero_()
        self.frozen[frozen] = True
        self.bad_loss.zero_()
        self.bad_params.zero_()

    def train(self, params: Params, nodes: torch.Tensor, plan: Any, solver: Any,
              lr: torch.Tensor) -> torch.Tensor:
        """The wrapped trainer's `train` on the rows of non-frozen nodes; frozen rows keep their
        values and report a loss of 0. Returns losses [m] like the wrapped trainer."""
        keep = ~self.frozen[nodes]
        if bool(keep.all()):
            losses = self.inner.train(params, nodes, plan, solver, lr)
        else:
            idx = keep.nonzero().squeeze(1)
            sub = {k: v[idx] for k, v in params.items()}
            losses = torch.zeros(len(nodes), device=lr.device, dtype=lr.dtype)
            if len(idx):
                losses[idx] = self.inner.train(sub, nodes[idx], plan, solver, lr[idx])
                for k, v in sub.items():
                    params[k].index_copy_(0, idx, v)
        self.bad_loss[nodes[~torch.isfinite(losses)]] = True
        self.bad_params[nodes[~finite_rows(params)]] = True
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
