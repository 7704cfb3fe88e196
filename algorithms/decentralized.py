"""Decentralized rounds: every online node trains, then the nodes mix over the round's graph.

Two kinds of round, each written once and reused by the algorithm modules:
- `Gossip`: adapt then combine with a symmetric doubly-stochastic W (Metropolis-Hastings weights),
  `gossip_steps` = Q exchanges per round (x <- W^Q y).
- `PushSum`: the same local phase at the de-biased models z = x / w, then (x, w) pushed over a
  column-stochastic P.

Faults (`topology.link_drop`, `topology.node_drop`) are drawn by the engine per round from
(seed, "faults", t) (`RunContext.faults`) and handed to `round`:
offline nodes neither train nor send nor receive, and the mixing matrix absorbs lost messages
(Push-Sum: the sender keeps the undelivered share; Gossip: Metropolis-Hastings weights of the
surviving links). Only delivered messages are counted. The nodes' latest training losses are kept
for loss-based neighbour selection (`selection_losses`, in the state dict).

The local rule (SGD, heavy-ball momentum reset every round, SAM) is the shared `LocalSolver`; an
algorithm's `Options` declares which of its knobs it takes (algorithms/options.py), and a config
that sets any other one is refused (so `dfedavg` with momentum 0.9 is an error, not a silent
DFedAvgM; the centralized fields such as `participation` are refused the same way). Without the
option, momentum is 0, rho is 0 and there is one gossip exchange per round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np
import torch

import topologies as T
from algorithms.assumptions import AssumptionLedger
from algorithms.base import Algorithm, RoundReport
from algorithms.delayed import InFlight
from algorithms.muffliato import PrivacyLedger, privatize
from algorithms.options import Robust
from algorithms.robust import robust_gossip
from algorithms.weight_collapse import collapsed, warn_collapse, weights_clause
from p2pfl.context import RunContext
from p2pfl.core.mixing import diag_scale
from p2pfl.core.population import Params
from p2pfl.errors import ConfigError
from p2pfl.options import AlgorithmOptions
from topologies.mixing import Matrix


class Decentralized(Algorithm):
    """Every node trains every round; the network average is the evaluated model."""

    def setup(self, ctx: RunContext) -> None:
        self.losses = torch.full((ctx.num_nodes,), torch.nan, dtype=torch.float64)

    def local_phase(self, ctx: RunContext, t: int, faults: T.Faults) -> tuple[torch.Tensor,
                                                                               torch.Tensor]:
        """Train the online nodes of round t in place.

        Each process of a distributed run trains the nodes it holds; the result holds all of them.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.
        faults : the round's faults (offline nodes do not train).

        Returns
        -------
        tuple (nodes, losses): int64 [m] ids of the online nodes, [m] their losses.
        """
        params = ctx.population.params
        lr = self.node_lr(ctx, t)
        held = ctx.all_nodes()
        if faults.nodes.any():
            online = torch.as_tensor(np.flatnonzero(~faults.nodes), device=ctx.device)
            nodes = ctx.owned(online)
        else:
            online, nodes = torch.arange(ctx.num_nodes, device=ctx.device), held
        if len(nodes) == len(held):
            losses = self.train(ctx, params, nodes, t, lr[nodes])
        elif not len(nodes):  # every node this process holds is offline
            losses = lr.new_zeros(0)
        else:
            rows = ctx.population.rows(nodes)
            losses = self.train(ctx, rows, nodes, t, lr[nodes])
            ctx.population.write(nodes, rows)
        every = torch.zeros(ctx.num_nodes, device=ctx.device, dtype=torch.float64)
        every[nodes] = losses.detach().double()
        every = ctx.comm.all_sum(every)[online]
        self.losses[online.cpu()] = every.cpu()
        return online, every.to(losses.dtype)

    def combine_then_adapt(self, ctx: RunContext, t: int, faults: T.Faults,
                           mix: Callable[[Params], None]) -> tuple[torch.Tensor, torch.Tensor]:
        """x_i <- (M x)_i + (y_i^K - x_i): the local phase's offset added to the mixed models it
        started from (offline nodes add 0).

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.
        faults : the round's faults.
        mix : x <- M x in place on the models it is given (e.g. ``lambda p: ctx.comm.mix(W, p,
            steps)``, or a Gossip round's `exchange`).

        Returns
        -------
        tuple (nodes, losses), as `local_phase`.
        """
        params = ctx.population.params
        old = {k: v.clone() for k, v in params.items()}
        nodes, losses = self.local_phase(ctx, t, faults)
        for k, v in params.items():
            v.sub_(old[k])
        mix(old)
        for k, v in params.items():
            v.add_(old[k])
        return nodes, losses

    def selection_losses(self) -> np.ndarray | None:
        """Latest training loss of every node (one that never trained: the others' mean).

        Returns
        -------
        [N] float64 array, or None before any node has trained.
        """
        known = torch.isfinite(self.losses)
        if not known.any():
            return None
        return torch.where(known, self.losses, self.losses[known].mean()).numpy()

    @staticmethod
    def sparse_mixing(ctx: RunContext, graph: nx.Graph) -> bool:
        """Whether the round's mixing matrix is built sparse.

        The comm's choice for a matrix with one entry per message and per node (no dense n x n
        is ever formed when it says yes).

        Parameters
        ----------
        ctx : the run.
        graph : the round's graph.

        Returns
        -------
        bool.
        """
        n = graph.number_of_nodes()
        messages = graph.number_of_edges() * (1 if graph.is_directed() else 2)
        return ctx.comm.sparse_for(n, n + messages)

    @staticmethod
    def delivered(graph: nx.Graph, faults: T.Faults) -> int:
        """Messages of the round's graph that arrive (an undirected edge is two).

        Parameters
        ----------
        graph : the round's graph.
        faults : the round's faults.

        Returns
        -------
        int, number of delivered messages.
        """
        edges = np.array([(i, j) for i, j in graph.edges if i != j], dtype=np.int64).reshape(-1, 2)
        if not graph.is_directed():
            edges = np.concatenate([edges, edges[:, ::-1]])
        return int((~faults.lost(edges[:, 0], edges[:, 1])).sum())

    def state_dict(self) -> dict[str, Any]:
        return {"losses": self.losses.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.losses = state["losses"].clone()

    def step_size(self, t: int) -> float:
        """The solver's step size in round t.

        `momentum_form = "dampened"` (m = a m + (1 - a) g, m_{-1} = 0) is the heavy ball
        m' = a m' + g with m = (1 - a) m', i.e. the same solver with lr * (1 - a).

        Parameters
        ----------
        t : round, from 0.

        Returns
        -------
        float, lr(t), times (1 - momentum) when dampened.
        """
        if getattr(self.cfg, "momentum_form", "heavy_ball") == "dampened":
            return self.lr(t) * (1 - self.solver.momentum)
        return self.lr(t)

    def divergence_hint(self, t: int, nodes: list[int]) -> str:
        """Heavy-ball momentum without clipping multiplies a steady step by 1 / (1 - momentum)."""
        momentum = self.solver.momentum
        dampened = getattr(self.cfg, "momentum_form", "heavy_ball") == "dampened"
        if momentum == 0 or dampened or self.cfg.clip_norm > 0:
            return ""
        return (f"heavy-ball momentum {momentum:g} without clip_norm multiplies a steady "
                f"step by 1 / (1 - momentum) = {1 / (1 - momentum):.3g} "
                "(docs/algorithms.md, settings that decide stability)")

    def node_lr(self, ctx: RunContext, t: int) -> torch.Tensor:
        """Step size of every node in round t.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.

        Returns
        -------
        [N] tensor in the run's dtype.
        """
        return torch.full((ctx.num_nodes,), self.step_size(t), device=ctx.device,
                          dtype=ctx.dtype)

    def average_model(self, ctx: RunContext) -> Params:
        weights = torch.full((ctx.num_nodes,), 1.0 / ctx.num_nodes, device=ctx.device,
                             dtype=ctx.dtype)
        return ctx.comm.node_sum(ctx.population.params, weights)

    def local_models(self, ctx: RunContext) -> Params:
        return ctx.population.params


READERS = {"trim": "trimmed_mean", "clip_radius": "self_centered_clipping"}  # option -> rule


class Gossip(Decentralized):
    """Adapt then combine: K local steps, then x <- W^Q y with W symmetric doubly stochastic."""

    mixing = "doubly_stochastic"

    @property
    def gossip_steps(self) -> int:
        """Gossip exchanges Q per round: the `gossip_steps` option where declared, else 1."""
        return getattr(self.cfg, "gossip_steps", 1)

    @property
    def exchanges(self) -> int:
        """One exchange per gossip step."""
        return self.gossip_steps

    def gossip_matrix(self, ctx: RunContext, graph: nx.Graph,
                      faults: T.Faults) -> tuple[torch.Tensor, int]:
        """The operator of x <- W^Q y over the round's surviving links (Q = gossip_steps).

        Parameters
        ----------
        ctx : the run.
        graph : the round's graph.
        faults : the round's faults (lost messages leave their share with the sender).

        Returns
        -------
        tuple (operator, applications): (W^Q, 1) dense, or (W, Q) sparse (no dense power), the
        operator in the comm's layout; `comm.mix` applies it `applications` times.
        """
        steps = self.gossip_steps
        if self.sparse_mixing(ctx, graph):
            return ctx.comm.matrix(T.doubly_stochastic(graph, faults=faults, sparse=True)), steps
        W = torch.as_tensor(T.doubly_stochastic(graph, faults=faults))
        return ctx.comm.matrix(torch.linalg.matrix_power(W, steps)), 1

    def check_options(self, cfg: AlgorithmOptions) -> None:
        """Also: `trim` and `clip_radius` are set only with the aggregator that reads them.

        Parameters
        ----------
        cfg : the algorithm's options.

        Raises
        ------
        ConfigError
            naming algorithm.trim or algorithm.clip_radius away from its default under another
            aggregator.
        """
        super().check_options(cfg)
        rule = getattr(cfg, "aggregator", "mean")
        for f in dataclasses.fields(Robust):
            reader = READERS.get(f.name)
            if reader and getattr(cfg, f.name, f.default) != f.default and rule != reader:
                raise ConfigError(f"algorithm.{f.name}", f"is read by aggregator {reader!r} "
                                  f"only (aggregator is {rule!r})")

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.ledger = (PrivacyLedger(ctx.num_nodes, ctx.privacy.accounting)
                       if ctx.privacy is not None else None)
        rule = getattr(self.cfg, "aggregator", "mean")
        attacking = ctx.byzantine is not None and ctx.byzantine.attack != "none"
        self.assumptions = (AssumptionLedger(
            ctx.num_nodes, ctx.byzantine.nodes if attacking else (), rule, self.cfg.trim,
            self.cfg.clip_radius)  # attack "none": the marked nodes send honestly
            if ctx.byzantine is not None or rule != "mean" else None)

    def exchange(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults,
                 params: Params) -> None:
        """The round's Q gossip steps on `params`, in place.

        x <- W^Q x as one operator; with a robust aggregator (`algorithm.aggregator`) or Byzantine
        nodes that attack, Q steps of algorithms/robust.py, in which the attackers send their
        messages (attack "none": the plain operator). With [privacy], `round` accounts the round's
        W (algorithms/muffliato.py). With Byzantine nodes or a robust aggregator, the
        aggregator's assumption is checked on the round's W (algorithms/assumptions.py).

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.
        graph : the round's graph.
        faults : the round's faults.
        params : name -> [N, *shape], the models sent.
        """
        robust = getattr(self.cfg, "aggregator", "mean") != "mean" or (
            ctx.byzantine is not None and ctx.byzantine.attack != "none")
        if robust or self.assumptions is not None:
            W = T.doubly_stochastic(graph, faults=faults, sparse=True)
            if self.assumptions is not None:
                self.assumptions.add(t, W)
            if robust:
                robust_gossip(ctx, t, W, params, self.cfg, self.gossip_steps)
                return
        operator, applications = self.gossip_matrix(ctx, graph, faults)
        ctx.comm.mix(operator, params, applications)

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        params = ctx.population.params
        start = {k: v.clone() for k, v in params.items()} if self.ledger is not None else None
        nodes, losses = self.local_phase(ctx, t, faults)
        if start is not None:
            privatize(ctx, t, start, nodes)
            online = np.zeros(ctx.num_nodes, dtype=bool)
            online[nodes.cpu().numpy()] = True
            self.ledger.add(T.doubly_stochastic(graph, faults=faults, sparse=True),
                            self.gossip_steps, online)
        self.exchange(ctx, t, graph, faults, params)
        return RoundReport(nodes, losses, self.gossip_steps * self.delivered(graph, faults))

    def metrics(self, ctx: RunContext) -> dict[str, float]:
        """With [privacy], the largest pairwise epsilon so far (`privacy_epsilon_max`); with
        Byzantine nodes, the honest nodes whose aggregator's assumption failed in the round's
        graph (`assumption_broken`, a count)."""
        out = {}
        if self.ledger is not None:
            out["privacy_epsilon_max"] = self.ledger.largest(ctx.privacy)
        if ctx.byzantine is not None and self.assumptions is not None:
            out["assumption_broken"] = float(self.assumptions.last_count)
        return out

    def files(self, ctx: RunContext) -> dict[str, Any]:
        """With [privacy], privacy.json: the pairwise epsilon matrix of the run and its totals;
        with Byzantine nodes, byzantine.json: the set, and the honest nodes whose aggregator's
        assumption failed in some round (algorithms/assumptions.py)."""
        out = {}
        if self.ledger is not None:
            out["privacy.json"] = self.ledger.record(ctx.privacy, self.gossip_steps)
        if ctx.byzantine is not None and self.assumptions is not None:
            checked = f"every round's graph with its faults, {self.assumptions.rounds} rounds"
            out["byzantine.json"] = ctx.byzantine.record(ctx.num_nodes) | {
                "assumption": self.assumptions.record(checked)}
        return out

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.ledger is not None:
            state["privacy"] = self.ledger.state_dict()
        if self.assumptions is not None:
            state["assumptions"] = self.assumptions.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.ledger is not None:
            self.ledger.load_state_dict(state["privacy"])
        if self.assumptions is not None and "assumptions" in state:  # older checkpoints: none
            self.assumptions.load_state_dict(state["assumptions"])


class PushSum(Decentralized):
    """Push-Sum over a column-stochastic P with de-biased gradients (SGP family).

    The population stores the de-biased models z_i = x_i / w_i and the weights w (float64); the
    numerators x_i = w_i z_i are implicit. Since w_i is constant during the local phase, a step
    x_i <- x_i - lr * m_i(z_i) is exactly z_i <- z_i - (lr / w_i) * m_i(z_i) (m: the momentum
    buffer of the (SAM) gradients taken at z); and mixing x <- P x, w <- P w is
    z <- diag(1/w') P diag(w) z with w' = P w. Gradients and SAM ascents are therefore always
    taken at z, and evaluation never sees a raw numerator.
    """

    mixing = "column_stochastic"
    supports_overlap = True

    def message_bytes(self, num_params: int, dtype: torch.dtype) -> int:
        """A model copy and the float64 weight."""
        return super().message_bytes(num_params, dtype) + 8

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.weights = torch.ones(ctx.num_nodes, device=ctx.device, dtype=torch.float64)
        self.phase_weights = self.weights  # the weights of the latest local phase
        self.in_flight = InFlight()  # overlap ([network] overlap = true): mass sent, not arrived
        self.collapse_warned = False  # a WeightCollapseWarning was given (once per run)

    def node_lr(self, ctx: RunContext, t: int) -> torch.Tensor:
        """lr / w_i: the numerator step expressed on the stored z (a collapsed weight warned
        first: `check_collapse`).

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.

        Returns
        -------
        [N] tensor in the run's dtype.
        """
        self.check_collapse(t)
        return (self.step_size(t) / self.weights).to(ctx.dtype)

    def check_collapse(self, t: int) -> None:
        """Warn (WeightCollapseWarning, once per run) when a node's weight for round t's local
        phase is below COLLAPSE_W (algorithms/weight_collapse.py).

        Parameters
        ----------
        t : round, from 0.
        """
        found = None if self.collapse_warned else collapsed(self.weights)
        if found is None:
            return
        self.collapse_warned = True
        node, w = found
        warn_collapse(node, w, self.step_size(t), f"in round {t + 1}",
                      "it received little weight in the last rounds while it kept sending its "
                      "shares (few in-neighbours in the rounds' graphs, or messages lost or "
                      "late); more out-neighbours or a balanced schedule keep w near 1")

    def divergence_hint(self, t: int, nodes: list[int]) -> str:
        """The Push-Sum weights w of `nodes` in round t's local phase and their step lr / w.

        A node that kept little mass takes a step 1 / w times the configured one.

        Parameters
        ----------
        t : round, from 0.
        nodes : the nodes that went non-finite.

        Returns
        -------
        str, the clause for the divergence message (with the momentum hint, if any).
        """
        if not nodes:
            return super().divergence_hint(t, nodes)
        shown = weights_clause(nodes, self.phase_weights[nodes[:5]].tolist(),
                               [self.step_size(t)] * len(nodes[:5]),
                               self.phase_weights.min().item())
        hint = (f"Push-Sum weights in the local phase: {shown}; more out-neighbours or a "
                "balanced schedule keep w near 1, a smaller lr or algorithm.clip_norm bound the "
                "step")
        momentum = super().divergence_hint(t, nodes)
        return f"{hint}; {momentum}" if momentum else hint

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        self.phase_weights = self.weights  # w is frozen during the local phase
        nodes, losses = self.local_phase(ctx, t, faults)
        return self.push(ctx, t, graph, faults, nodes, losses)

    def push(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults,
             nodes: torch.Tensor, losses: torch.Tensor) -> RoundReport:
        """Every node pushes (P_ji x_i, P_ji w_i) over the round's column-stochastic P.

        Lost messages' shares are kept by their senders; z = x / w is de-biased again. With overlap,
        what is late arrives in a later round.

        Parameters
        ----------
        ctx : the run.
        t : round, from 0.
        graph : the round's graph.
        faults : the round's faults.
        nodes, losses : the local phase's trained nodes [m] and their losses [m].

        Returns
        -------
        RoundReport, with one weight scalar sent per delivered message.
        """
        P = T.column_stochastic(graph, faults=faults, sparse=self.sparse_mixing(ctx, graph))
        timing = ctx.clock.plan_round(t, graph, faults) if self.overlaps(ctx) else None
        if timing is not None and timing.arrived is not None:  # delays known as they arrive
            self.weights = self.in_flight.mix_arrived(ctx, t, P, timing.sent, timing.arrived,
                                                      self.weights)
        elif timing is None or not (self.in_flight or timing.delays[2].any()):
            self.mix(ctx, P)  # synchronous: exactly Push-Sum without delays
        else:
            self.weights = self.in_flight.mix(ctx, t, P, timing.delays, self.weights)
        messages = self.delivered(graph, faults)
        return RoundReport(nodes, losses, messages, scalars_sent=messages)

    @staticmethod
    def overlaps(ctx: RunContext) -> bool:
        """Whether nodes do not wait for messages ([network] overlap): they arrive rounds late.

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        bool.
        """
        return ctx.clock is not None and ctx.clock.net.overlap

    def mix(self, ctx: RunContext, P: Matrix) -> None:
        """(x, w) <- (P x, P w), applied to z = x / w as diag(1/w') P diag(w).

        The scaling is done in float64 in the layout the comm picks for P (CSR values scaled in
        place of a dense product).

        Parameters
        ----------
        ctx : the run.
        P : [N, N] column-stochastic, dense or scipy.sparse.
        """
        P = ctx.comm.matrix(P, dtype=torch.float64)
        new_weights = P @ self.weights
        scaled = diag_scale(P, self.weights, new_weights)
        ctx.comm.mix(ctx.comm.matrix(scaled), ctx.population.params)
        self.weights = new_weights

    def average_model(self, ctx: RunContext) -> Params:
        """x_bar = (1/N) sum_i x_i = sum_i w_i z_i / sum_i w_i.

        Parameters
        ----------
        ctx : the run.

        Returns
        -------
        Params, name -> [*shape].
        """
        return ctx.comm.node_sum(ctx.population.params, self.weights / self.weights.sum())

    def metrics(self, ctx: RunContext) -> dict[str, float]:
        weights = {"ps_weight_min": self.weights.min().item(),
                   "ps_weight_max": self.weights.max().item(),
                   "ps_weight_sum": self.weights.sum().item()}
        if self.overlaps(ctx):
            weights["ps_weight_in_flight"] = self.in_flight.weight()
        return weights

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "weights": self.weights.clone(),
                "in_flight": self.in_flight.state_dict(),
                "collapse_warned": self.collapse_warned}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.weights = state["weights"].clone()
        self.in_flight.load_state_dict(state.get("in_flight", {}))
        self.collapse_warned = bool(state.get("collapse_warned", False))  # older: not yet
