"""Centralized rounds on a star whose hub is the server."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import networkx as nx
import numpy as np
import torch

import topologies as T
from algorithms.base import Algorithm, RoundReport
from algorithms.client_state import expand
from algorithms.options import SAMPLINGS, Momentum, Sam
from algorithms.personal import PersonalAccuracy, PersonalSplits
from p2pfl.callbacks import Callback
from p2pfl.context import RunContext
from p2pfl.core.population import Params, broadcast
from p2pfl.core.seeding import numpy_rng
from p2pfl.core.solver import LocalSolver
from p2pfl.core.terms import LocalTerms
from p2pfl.errors import ConfigError
from p2pfl.options import AlgorithmOptions, option

if TYPE_CHECKING:
    from p2pfl.config import Config


@dataclass
class ClientRound:
    """The local phase of one round as the server sees it."""

    nodes: torch.Tensor  # int64 [m], the sampled clients
    start: Params  # the model they started from (sent by the server): name -> [*shape]
    trained: Params  # their models after the local steps: name -> [m, *shape]
    lr: float  # local learning rate of the round
    steps: torch.Tensor  # local steps K_i of each client [m] (the run's dtype)
    terms: LocalTerms | None  # what the algorithm added to the local step
    samples: torch.Tensor  # local training samples n_i of each client [m] (the run's dtype)

    def subset(self, keep: torch.Tensor) -> ClientRound:
        """The record restricted to the rows `keep` (bool [m]); per-row terms are indexed too."""
        terms = None if self.terms is None else self.terms.rows(keep)
        return ClientRound(self.nodes[keep], self.start, {k: v[keep] for k, v in
                                                          self.trained.items()},
                           self.lr, self.steps[keep], terms, self.samples[keep])


@dataclass(frozen=True)
class Delivery:
    """Which messages of a round's star exchange get through (see `Server.delivery`)."""

    down: torch.Tensor  # bool [m]: the sampled client is online and received the server's model
    up: torch.Tensor  # bool [m]: the client trained and its update reached the server


class Server(Algorithm):
    """Centralized FL on a star: node 0 of the graph is the server, node i + 1 is client i.

    Each round the server samples m = max(1, round(participation * N)) clients without
    replacement, sends them `client_start` (its model, unless the algorithm perturbs it), they
    train with the algorithm's `local_terms`, and `aggregate` produces the next server model and
    updates the algorithm's state. A client's row of the population holds the model it last
    trained. `down` / `up` are the model copies sent to / from each sampled client per round.
    """

    mixing = "server"

    @dataclass
    class Options(Momentum, Sam, AlgorithmOptions):
        """Every server algorithm samples clients and runs the LocalSolver (local heavy-ball
        momentum; rho > 0 adds SAM where the algorithm has no perturbation rule of its own)."""

        participation: float = option(0.1, low=0, high=1, low_open=True,
                                      doc="share r of the clients sampled per round")
        sampling: str = option("fixed", choices=SAMPLINGS,
                               doc="fixed: m = round(r N) clients; bernoulli: each w.p. r")
        weights: str = option("", choices=("", "samples", "uniform"),
                              doc="aggregation weights of the clients' models: n_i / sum n_j "
                              "over those aggregated (samples), or 1 / m (uniform); '' = the "
                              "paper's")
        personal_fraction: float = option(0.0, low=0, high=1, high_open=True,
                                          doc="share of each client's data held out as its own "
                                          "test split for test_acc_personal (the server "
                                          "model's head fine-tuned per client); 0: none")
        personal_epochs: int = option(0, low=0,
                                      doc="epochs of that head fine-tuning; 0: the round's "
                                      "local_epochs / local_steps")

    down: ClassVar[int] = 1
    up: ClassVar[int] = 1
    # the aggregation weights of the paper (FedAvg: n_i / n); equal for equal client sizes
    paper_weights: ClassVar[str] = "samples"

    @classmethod
    def implied(cls, cfg: Config) -> dict[str, Any]:
        """An unset `algorithm.weights` is the paper's."""
        return {"algorithm.weights": cls.paper_weights}
    uses_terms: ClassVar[bool] = True  # needs the vectorized trainer's LocalTerms

    def check_options(self, cfg: Options) -> None:
        """Also refuse fine-tuning epochs without a personalised evaluation to fine-tune in.

        Parameters
        ----------
        cfg : the algorithm's options.

        Raises
        ------
        ConfigError
            naming algorithm.personal_epochs when it is set with personal_fraction 0 (and as
            `Algorithm.check_options`).
        """
        super().check_options(cfg)
        if cfg.personal_epochs and not cfg.personal_fraction:
            raise ConfigError("algorithm.personal_epochs", f"{self.name} fine-tunes only in the "
                              "personalised evaluation: set algorithm.personal_fraction > 0 or "
                              "leave it at 0")

    def setup(self, ctx: RunContext) -> None:
        if self.uses_terms and not ctx.trainer.vectorized:
            raise ConfigError("engine.executor", f"{self.name} runs on the 'vectorized' "
                              "executor only")
        self.server = {k: v[0].clone() for k, v in ctx.population.params.items()}
        self.last_nodes = torch.arange(ctx.num_nodes, device=ctx.device)
        self.data, trainer = ctx.data, ctx.trainer
        self.personal: PersonalSplits | None = None
        if self.cfg.personal_fraction > 0:
            a = self.cfg
            self.personal = PersonalSplits(ctx, a.personal_fraction, a.batch_size,
                                           a.local_epochs, a.local_steps, a.last_batch,
                                           a.personal_epochs)
            self.data, trainer = self.personal.data, self.personal.trainer(ctx)
        self.trainer = ctx.comm.clients_trainer(trainer)

    def callbacks(self, ctx: RunContext) -> list[Callback]:
        """The personalised accuracy when clients hold out a split (`personal_fraction`)."""
        return [] if self.personal is None else [PersonalAccuracy()]

    def sample(self, ctx: RunContext, t: int) -> torch.Tensor:
        """The clients of round t.

        fixed: m = max(1, round(participation * N)) clients without replacement. bernoulli
        (FL-Simulator): each client independently with probability `participation`, redrawn
        until at least one is active.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.

        Returns
        -------
        int64 [m] tensor of client ids, sorted.
        """
        n, r = ctx.num_nodes, self.cfg.participation
        rng = numpy_rng(ctx.seed, "participation", t)
        if self.cfg.sampling == "bernoulli":
            chosen = np.flatnonzero(rng.random(n) < r)
            while len(chosen) == 0:
                chosen = np.flatnonzero(rng.random(n) < r)
        else:
            chosen = np.sort(rng.choice(n, size=max(1, round(r * n)), replace=False))
        return torch.as_tensor(chosen, device=ctx.device)

    def client_start(self, ctx: RunContext, t: int) -> Params:
        """The model the sampled clients of round t start from.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.

        Returns
        -------
        Params, name -> [*shape]; the server model by default.
        """
        return self.server

    def solver_at(self, t: int) -> LocalSolver:
        """The local solver of round t.

        Parameters
        ----------
        t : round, from 0.

        Returns
        -------
        LocalSolver; the algorithm's solver by default.
        """
        return self.solver

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms | None:
        """What the algorithm adds to the local step of `nodes`.

        Parameters
        ----------
        ctx : the run.
        nodes : int64 [m], the sampled clients.
        start : the model they start from, name -> [*shape].
        t : round, from 0.

        Returns
        -------
        LocalTerms, or None for the plain solver (the default).
        """
        return None

    def train_clients(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                      t: int) -> tuple[ClientRound, torch.Tensor]:
        """K local steps of `nodes` from `start`.

        Parameters
        ----------
        ctx : the run.
        nodes : int64 [m], the clients that train.
        start : the model they start from, name -> [*shape] (copied: the server model may move on).
        t : round, from 0.

        Returns
        -------
        tuple (record, losses): the round's ClientRound and the clients' losses [m].
        """
        start = {k: v.clone() for k, v in start.items()}  # the server model may move on
        params = broadcast(start, len(nodes))
        lr = self.lr(t)
        plan = self.plan(ctx, t, self.data)
        terms = self.local_terms(ctx, nodes, start, t)
        lrs = torch.full((len(nodes),), lr, device=ctx.device, dtype=ctx.dtype)
        extra = () if terms is None else (terms,)
        losses = self.trainer.train(params, nodes, plan, self.solver_at(t), lrs, *extra)
        steps = torch.as_tensor(plan.node_steps(nodes), device=ctx.device, dtype=ctx.dtype)
        return ClientRound(nodes, start, params, lr, steps, terms, self.samples(ctx, nodes)), losses

    def samples(self, ctx: RunContext, nodes: torch.Tensor) -> torch.Tensor:
        """n_i, the local training samples of `nodes`.

        Parameters
        ----------
        ctx : the run.
        nodes : int64 [m] client ids.

        Returns
        -------
        [m] tensor in the run's dtype.
        """
        return torch.as_tensor(self.data.sizes[nodes.cpu().numpy()], device=ctx.device,
                               dtype=ctx.dtype)

    def delivery(self, faults: T.Faults, nodes: torch.Tensor) -> Delivery | None:
        """What of the round's star exchange with the sampled clients gets through.

        The server (graph node 0) is never offline: its draw is ignored. Client i (graph node
        i + 1) trains when it is online and the message 0 -> i + 1 is delivered; its update
        counts when, in addition, the message i + 1 -> 0 is delivered.

        Parameters
        ----------
        faults : the round's faults on the star (drawn by the engine like the decentralized
            rounds').
        nodes : int64 [m], the sampled clients.

        Returns
        -------
        Delivery (bool [m] down and up), or None when nothing is lost.
        """
        if faults.empty:
            return None
        faults = T.Faults(faults.links, np.concatenate([[False], faults.nodes[1:]]))
        clients = nodes.cpu().numpy() + 1
        server = np.zeros_like(clients)
        down = ~faults.lost(server, clients)
        up = down & ~faults.lost(clients, server)
        return Delivery(torch.as_tensor(down, device=nodes.device),
                        torch.as_tensor(up, device=nodes.device))

    def exchange(self, ctx: RunContext, nodes: torch.Tensor, start: Params, t: int,
                 delivery: Delivery | None) -> tuple[ClientRound, ClientRound, torch.Tensor]:
        """One download-train-upload exchange with the sampled `nodes`.

        Parameters
        ----------
        ctx : the run.
        nodes : int64 [m], the sampled clients.
        start : the model sent to them, name -> [*shape].
        t : round, from 0.
        delivery : what gets through, or None when nothing is lost.

        Returns
        -------
        tuple (trained, arrived, losses): the ClientRound of the clients that trained, that of those
        whose update arrived, and the trainers' losses.
        """
        if delivery is None:
            r, losses = self.train_clients(ctx, nodes, start, t)
            return r, r, losses
        if not delivery.down.any():
            none = torch.zeros(0, device=ctx.device, dtype=ctx.dtype)
            empty = ClientRound(nodes[:0], start, broadcast(start, 0), self.lr(t), none, None, none)
            return empty, empty, torch.zeros(0, device=ctx.device, dtype=ctx.dtype)
        r, losses = self.train_clients(ctx, nodes[delivery.down], start, t)
        return r, r.subset(delivery.up[delivery.down]), losses

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        nodes = self.sample(ctx, t)
        delivery = self.delivery(faults, nodes)
        trained, arrived, losses = self.exchange(ctx, nodes, self.client_start(ctx, t), t,
                                                 delivery)
        self.keep_local(ctx, trained)
        return self.finish(ctx, trained, arrived, losses)

    def finish(self, ctx: RunContext, trained: ClientRound, arrived: ClientRound,
               losses: torch.Tensor) -> RoundReport:
        """Aggregate over the clients whose update arrived and report the round.

        The server model and state stay unchanged when no update arrived.

        Parameters
        ----------
        ctx : the run.
        trained : the record of the clients that trained.
        arrived : the record of those whose update arrived.
        losses : the trainers' losses.

        Returns
        -------
        RoundReport, with `down` copies per trained client and `up` per arrived one.
        """
        if len(arrived.nodes):
            self.aggregate(ctx, arrived)
        if len(trained.nodes):
            self.last_nodes = trained.nodes
        copies = self.down * len(trained.nodes) + self.up * len(arrived.nodes)
        return RoundReport(trained.nodes, losses, copies_sent=copies)

    def keep_local(self, ctx: RunContext, r: ClientRound) -> None:
        """Store the trained client models in their population rows (those held here).

        Parameters
        ----------
        ctx : the run.
        r : the round's record of the clients that trained.
        """
        held = ctx.population.holds(r.nodes)
        ctx.population.write(r.nodes[held], {k: v[held] for k, v in r.trained.items()})

    @abstractmethod
    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        """Update `self.server` (and the algorithm's state) from the round's client models.

        Parameters
        ----------
        ctx : the run.
        r : the record of the clients whose update arrived.
        """

    def client_weights(self, r: ClientRound) -> torch.Tensor:
        """The aggregation weight of each client of `r`, summing to 1.

        Parameters
        ----------
        r : the round's record.

        Returns
        -------
        [m] tensor: n_i / sum_j n_j (`weights = "samples"`, FedAvg's) or 1 / m ("uniform").
        """
        if (self.cfg.weights or self.paper_weights) == "samples":
            return r.samples / r.samples.sum()
        return torch.full_like(r.samples, 1.0 / len(r.samples))

    def client_mean(self, ctx: RunContext, r: ClientRound, tensors: Params | None = None) -> Params:
        """The weighted mean (`client_weights`) of the clients' models, or of `tensors`.

        Parameters
        ----------
        ctx : the run.
        r : the round's record.
        tensors : name -> [m, *shape], rows as the clients of `r`; None: the clients' models.

        Returns
        -------
        Params, name -> [*shape].
        """
        return ctx.comm.weighted_sum(r.trained if tensors is None else tensors,
                                     self.client_weights(r))

    def mean_update(self, ctx: RunContext, r: ClientRound) -> Params:
        """U = sum_i w_i (x_i^K - start), w the `client_weights`.

        Parameters
        ----------
        ctx : the run.
        r : the round's record.

        Returns
        -------
        Params, name -> [*shape].
        """
        mean = self.client_mean(ctx, r)
        return {k: v - r.start[k] for k, v in mean.items()}

    def average_model(self, ctx: RunContext) -> Params:
        return self.server

    def local_models(self, ctx: RunContext) -> Params:
        return ctx.population.rows(ctx.owned(self.last_nodes))

    def node_models(self, ctx: RunContext) -> Params:
        """Every client deploys the server model."""
        return expand(self.server, ctx.population.num_nodes)

    def state_dict(self) -> dict[str, Any]:
        return {"server": {k: v.clone() for k, v in self.server.items()},
                "last_nodes": self.last_nodes.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.server = {k: v.clone() for k, v in state["server"].items()}
        self.last_nodes = state["last_nodes"].clone()
