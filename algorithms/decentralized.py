"""Decentralized rounds: every node trains every round, then the nodes mix over the graph."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import torch

import topologies as T
from algorithms.base import Algorithm, RoundReport, directed_edge_count
from p2pfl.context import RunContext
from p2pfl.population import Params


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
