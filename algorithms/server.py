"""Centralized rounds on a star whose hub is the server."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import networkx as nx
import numpy as np
import torch

from algorithms.base import Algorithm, RoundReport
from p2pfl.config import AlgorithmConfig, ConfigError
from p2pfl.context import RunContext
from p2pfl.local import LocalSolver, LocalTerms, VectorizedTrainer
from p2pfl.population import Params, broadcast
from p2pfl.seeding import numpy_rng


@dataclass
class ClientRound:
    """The local phase of one round as the server sees it."""

    nodes: torch.Tensor  # int64 [m], the sampled clients
    start: Params  # the model they started from (sent by the server): name -> [*shape]
    trained: Params  # their models after the local steps: name -> [m, *shape]
    lr: float  # local learning rate of the round
    steps: int  # local steps K
    terms: LocalTerms | None  # what the algorithm added to the local step


class Server(Algorithm):
    """Centralized FL on a star: node 0 of the graph is the server, node i + 1 is client i.

    Each round the server samples m = max(1, round(participation * N)) clients without
    replacement, sends them `client_start` (its model, unless the algorithm perturbs it), they
    train with the algorithm's `local_terms`, and `aggregate` produces the next server model and
    updates the algorithm's state. A client's row of the population holds the model it last
    trained. `down` / `up` are the model copies sent to / from each sampled client per round.
    """

    mixing = "server"
    # Every server algorithm samples clients and runs the LocalSolver (local heavy-ball momentum;
    # rho > 0 adds SAM where the algorithm has no perturbation rule of its own); `variants` says
    # which values of `variant` it takes.
    options = ("participation", "sampling", "momentum", "rho", "variant")
    down: ClassVar[int] = 1
    up: ClassVar[int] = 1
    variants: ClassVar[tuple[str, ...]] = ("paper",)
    uses_terms: ClassVar[bool] = True  # needs the vectorized trainer's LocalTerms

    def __init__(self, cfg: AlgorithmConfig) -> None:
        super().__init__(cfg)
        if cfg.variant not in self.variants:
            raise ConfigError("algorithm.variant", f"{self.name} has no {cfg.variant!r} form "
                              f"(allowed: {', '.join(self.variants)})")

    def setup(self, ctx: RunContext) -> None:
        if self.uses_terms and not isinstance(ctx.trainer, VectorizedTrainer):
            raise ConfigError("engine.executor", f"{self.name} runs on the 'vectorized' "
                              "executor only")
        self.server = {k: v[0].clone() for k, v in ctx.population.params.items()}
        self.last_nodes = ctx.all_nodes()
        self.data = ctx.data
        self.trainer = ctx.trainer

    def sample(self, ctx: RunContext, t: int) -> torch.Tensor:
        """The clients of round t (int64 [m], sorted); spec 1.5.

        fixed: m = max(1, round(participation * N)) clients without replacement. bernoulli
        (FL-Simulator): each client independently with probability `participation`, redrawn
        until at least one is active.
        """
        n, r = ctx.num_nodes, self.cfg.participation
        rng = numpy_rng(ctx.cfg.seed, "participation", t)
        if self.cfg.sampling == "bernoulli":
            chosen = np.flatnonzero(rng.random(n) < r)
            while len(chosen) == 0:
                chosen = np.flatnonzero(rng.random(n) < r)
        else:
            chosen = np.sort(rng.choice(n, size=max(1, round(r * n)), replace=False))
        return torch.as_tensor(chosen, device=ctx.device)

    def client_start(self, ctx: RunContext, t: int) -> Params:
        """The model the sampled clients of round t start from."""
        return self.server

    def solver_at(self, t: int) -> LocalSolver:
        """The local solver of round t."""
        return self.solver

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms | None:
        """What the algorithm adds to the local step of `nodes` (None: plain solver)."""
        return None

    def train_clients(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                      t: int) -> tuple[ClientRound, torch.Tensor]:
        """K local steps of `nodes` from `start`; the round's record and the losses [m]."""
        a = self.cfg
        start = {k: v.clone() for k, v in start.items()}  # the server model may move on
        params = broadcast(start, len(nodes))
        lr = self.lr(t)
        plan = self.data.plan(ctx.cfg.seed, t, a.batch_size, a.local_epochs, a.local_steps)
        terms = self.local_terms(ctx, nodes, start, t)
        lrs = torch.full((len(nodes),), lr, device=ctx.device, dtype=ctx.dtype)
        extra = () if terms is None else (terms,)
        losses = self.trainer.train(params, nodes, plan, self.solver_at(t), lrs, *extra)
        return ClientRound(nodes, start, params, lr, plan.steps, terms), losses

    def round(self, ctx: RunContext, t: int, graph: nx.Graph) -> RoundReport:
        nodes = self.sample(ctx, t)
        r, losses = self.train_clients(ctx, nodes, self.client_start(ctx, t), t)
        self.keep_local(ctx, r)
        self.aggregate(ctx, r)
        self.last_nodes = nodes
        return RoundReport(nodes, losses, copies_sent=(self.down + self.up) * len(nodes))

    def keep_local(self, ctx: RunContext, r: ClientRound) -> None:
        """Store the trained client models in their population rows."""
        for k, v in r.trained.items():
            ctx.population.params[k].index_copy_(0, r.nodes, v)

    @abstractmethod
    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        """Update `self.server` (and the algorithm's state) from the round's client models."""

    def client_mean(self, ctx: RunContext, trained: Params) -> Params:
        """Mean of the client models [m, ...] (equal client sizes: sample weighting = mean)."""
        m = next(iter(trained.values())).shape[0]
        weights = torch.full((m,), 1.0 / m, device=ctx.device, dtype=ctx.dtype)
        return ctx.comm.weighted_sum(trained, weights)

    def mean_update(self, ctx: RunContext, r: ClientRound) -> Params:
        """U = mean_i (x_i^K - start): name -> [*shape]."""
        mean = self.client_mean(ctx, r.trained)
        return {k: v - r.start[k] for k, v in mean.items()}

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
