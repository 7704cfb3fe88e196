"""The three kinds of round every algorithm is built from.

- `Gossip`: all nodes train, then mix with a doubly-stochastic W (D-PSGD family).
- `PushSum`: all nodes train at their de-biased models, then mix (x, w) with a column-stochastic W.
- `Server`: sampled clients train from the server model on a star whose hub is the server; the
  server aggregates their updates.

A concrete algorithm picks a family and, at most, overrides a hook or two (see `fedavg.py`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import networkx as nx
import numpy as np
import torch

import topologies as T
from p2pfl.config import AlgorithmConfig
from p2pfl.context import RunContext
from p2pfl.local import LocalSolver
from p2pfl.population import Params, broadcast
from p2pfl.seeding import numpy_rng


@dataclass
class RoundReport:
    """What happened in one round: who trained, their losses, what was sent."""

    nodes: torch.Tensor  # int64 [m], the nodes that trained
    losses: torch.Tensor  # [m], each node's mean training loss over its local steps
    copies_sent: int  # model copies sent over all links
    scalars_sent: int = 0  # scalars sent besides the copies (push-sum weights)


def directed_edge_count(graph: nx.Graph) -> int:
    """Messages of one gossip exchange: every edge of an undirected graph carries two."""
    edges = graph.number_of_edges() - nx.number_of_selfloops(graph)
    return edges if graph.is_directed() else 2 * edges


class Algorithm(ABC):
    """An FL algorithm: its local solver, its round, and the models it is evaluated on."""

    name: ClassVar[str]
    mixing: ClassVar[str]  # "doubly_stochastic" | "column_stochastic" | "server"

    def __init__(self, cfg: AlgorithmConfig) -> None:
        self.cfg = cfg
        self.solver = LocalSolver(momentum=cfg.momentum, rho=cfg.rho,
                                  weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm)

    def setup(self, ctx: RunContext) -> None:
        """Allocate algorithm state (called once before round 0)."""

    def lr(self, t: int) -> float:
        """Local learning rate of round t (decayed once per round)."""
        return self.cfg.lr * self.cfg.lr_decay**t

    def train(self, ctx: RunContext, params: Params, nodes: torch.Tensor, t: int,
              lr: torch.Tensor) -> torch.Tensor:
        """Run the local phase of round t for `nodes` on `params` (in place); losses [m]."""
        a = self.cfg
        plan = ctx.data.plan(ctx.cfg.seed, t, a.batch_size, a.local_epochs, a.local_steps)
        return ctx.trainer.train(params, nodes, plan, self.solver, lr)

    @abstractmethod
    def round(self, ctx: RunContext, t: int, graph: nx.Graph) -> RoundReport:
        """Local phase and communication of round t over `graph`."""

    @abstractmethod
    def average_model(self, ctx: RunContext) -> Params:
        """The model whose accuracy is `test_acc`: name -> [*shape]."""

    @abstractmethod
    def local_models(self, ctx: RunContext) -> Params:
        """The nodes' own models for `test_acc_local_mean`: name -> [m, *shape]."""

    def metrics(self, ctx: RunContext) -> dict[str, float]:
        """Algorithm-specific per-round metrics."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""


class Decentralized(Algorithm):
    """Every node trains every round; the network average is the evaluated model."""

    def average_model(self, ctx: RunContext) -> Params:
        weights = torch.full((ctx.num_nodes,), 1.0 / ctx.num_nodes, device=ctx.device,
                             dtype=ctx.dtype)
        return ctx.comm.weighted_sum(ctx.population.params, weights)

    def local_models(self, ctx: RunContext) -> Params:
        return ctx.population.params


class Gossip(Decentralized):
    """Adapt then combine: K local steps, then x_i <- sum_j W_ij x_j with W doubly stochastic."""

    mixing = "doubly_stochastic"

    def round(self, ctx: RunContext, t: int, graph: nx.Graph) -> RoundReport:
        nodes = ctx.all_nodes()
        lr = torch.full((ctx.num_nodes,), self.lr(t), device=ctx.device, dtype=ctx.dtype)
        losses = self.train(ctx, ctx.population.params, nodes, t, lr)
        ctx.comm.mix(ctx.comm.matrix(T.doubly_stochastic(graph)), ctx.population.params)
        return RoundReport(nodes, losses, directed_edge_count(graph))


class PushSum(Decentralized):
    """Push-Sum over a column-stochastic P with de-biased gradients (SGP family).

    The population stores the de-biased models z_i = x_i / w_i and the weights w (float64); the
    numerators x_i = w_i z_i are implicit. Since w_i is constant during the local phase, a step
    x_i <- x_i - lr * g(z_i) is exactly z_i <- z_i - (lr / w_i) * g(z_i); and mixing
    x <- P x, w <- P w is z <- diag(1/w') P diag(w) z with w' = P w. Gradients (and SAM ascents)
    are therefore always taken at z, and evaluation never sees a raw numerator.
    """

    mixing = "column_stochastic"

    def setup(self, ctx: RunContext) -> None:
        self.weights = torch.ones(ctx.num_nodes, device=ctx.device, dtype=torch.float64)

    def round(self, ctx: RunContext, t: int, graph: nx.Graph) -> RoundReport:
        nodes = ctx.all_nodes()
        lr = (self.lr(t) / self.weights).to(ctx.dtype)
        losses = self.train(ctx, ctx.population.params, nodes, t, lr)
        self.mix(ctx, T.column_stochastic(graph))
        messages = directed_edge_count(graph)
        return RoundReport(nodes, losses, messages, scalars_sent=messages)

    def mix(self, ctx: RunContext, P: np.ndarray) -> None:
        """(x, w) <- (P x, P w), applied to z = x / w as diag(1/w') P diag(w)."""
        P = torch.as_tensor(P, device=ctx.device, dtype=torch.float64)
        new_weights = P @ self.weights
        scaled = P * self.weights.unsqueeze(0) / new_weights.unsqueeze(1)
        ctx.comm.mix(ctx.comm.matrix(scaled), ctx.population.params)
        self.weights = new_weights

    def average_model(self, ctx: RunContext) -> Params:
        """x_bar = (1/N) sum_i x_i = sum_i w_i z_i / sum_i w_i."""
        return ctx.comm.weighted_sum(ctx.population.params, self.weights / self.weights.sum())

    def metrics(self, ctx: RunContext) -> dict[str, float]:
        return {"ps_weight_min": self.weights.min().item(),
                "ps_weight_max": self.weights.max().item(),
                "ps_weight_sum": self.weights.sum().item()}

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.weights.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.weights = state["weights"].clone()


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
