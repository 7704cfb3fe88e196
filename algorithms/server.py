"""Centralized rounds on a star whose hub is the server."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import networkx as nx
import numpy as np
import torch

from algorithms.base import Algorithm, RoundReport
from p2pfl.context import RunContext
from p2pfl.population import Params, broadcast
from p2pfl.seeding import numpy_rng


class Server(Algorithm):
    """Centralized FL on a star: node 0 of the graph is the server, node i + 1 is client i.

    Each round the server samples m = max(1, round(participation * N)) clients without
    replacement, sends them its model, they train, and `aggregate` turns their models into the
    next server model. A client's row of the population holds the model it last trained.
    """

    mixing = "server"

    def setup(self, ctx: RunContext) -> None:
        self.server = {k: v[0].clone() for k, v in ctx.population.params.items()}
        self.last_nodes = ctx.all_nodes()

    def sample(self, ctx: RunContext, t: int) -> torch.Tensor:
        n = ctx.num_nodes
        m = max(1, round(self.cfg.participation * n))
        chosen = numpy_rng(ctx.cfg.seed, "participation", t).choice(n, size=m, replace=False)
        return torch.as_tensor(np.sort(chosen), device=ctx.device)

    def round(self, ctx: RunContext, t: int, graph: nx.Graph) -> RoundReport:
        nodes = self.sample(ctx, t)
        params = broadcast(self.server, len(nodes))
        lr = torch.full((len(nodes),), self.lr(t), device=ctx.device, dtype=ctx.dtype)
        losses = self.train(ctx, params, nodes, t, lr)
        for k, v in params.items():
            ctx.population.params[k].index_copy_(0, nodes, v)
        self.aggregate(ctx, params, nodes)
        self.last_nodes = nodes
        return RoundReport(nodes, losses, copies_sent=2 * len(nodes))

    @abstractmethod
    def aggregate(self, ctx: RunContext, params: Params, nodes: torch.Tensor) -> None:
        """Update `self.server` from the trained client models `params` [m, ...] of `nodes`."""

    def average_model(self, ctx: RunContext) -> Params:
        return self.server

    def local_models(self, ctx: RunContext) -> Params:
        return ctx.population.rows(self.last_nodes)

    def state_dict(self) -> dict[str, Any]:
        return {"server": {k: v.clone() for k, v in self.server.items()},
                "last_nodes": self.last_nodes.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.server = {k: v.clone() for k, v in state["server"].items()}
        self.last_nodes = state["last_nodes"].clone()
