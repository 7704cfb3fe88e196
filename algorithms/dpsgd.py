"""D-PSGD (Lian et al. 2017): x_i <- sum_j W_ij x_j - lr * g_i(x_i), one step a round.

Combine-then-adapt by default: the gradient is taken at the node's own pre-mixing model and
added to the mixed OLD models. With K > 1 local steps (`local_epochs = 1`, the spec's alternative
reading of the source paper) the whole local offset y_i^K - x_i is added the same way.
`order = "atc"` gives the adapt-then-combine form x_i <- sum_j W_ij (x_j - lr * g_j) of the
SGP reference code (= DFedAvg with one step).

D-Cliques' D-SGD (Bellet, Kermarrec, Lavoie, SRDS 2022), one step a round (`local_steps = 1`):
`clique_averaging = true` replaces each node's gradient by the mean gradient of its clique
(algorithms/clique_averaging.py) before the step, and `persistent_momentum = a` takes the step
along a heavy-ball buffer kept across rounds, b_i <- a b_i + g_i + wd x_i, x_i <- x_i - lr b_i
(torch.optim.SGD's rule, as the reference code steps). The local phase then takes the plain
(clipped) step, whose offset gives each node's gradient g_i = (x_i - y_i) / lr; averaging, weight
decay and momentum follow it on the stacked rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import torch

import topologies as T
from algorithms.base import RoundReport
from algorithms.clique_averaging import clique_averaging
from algorithms.decentralized import Gossip
from algorithms.options import Order, Robust
from p2pfl.context import RunContext
from p2pfl.core.solver import LocalSolver
from p2pfl.errors import ConfigError
from p2pfl.options import AlgorithmOptions, option


class DPSGD(Gossip):
    name = "dpsgd"
    source = "D-PSGD: Lian et al. 2017, arXiv 1705.09056"

    orders = ("cta", "atc")
    paper_order = "cta"

    @dataclass
    class Options(Order, Robust, AlgorithmOptions):
        clique_averaging: bool = option(False, doc="D-Cliques: step along the mean gradient of "
                                        "the node's clique (topology node attribute 'clique'); "
                                        "needs local_steps = 1")
        persistent_momentum: float = option(0.0, low=0, high=1, high_open=True,
                                            doc="heavy-ball momentum kept across rounds "
                                            "(D-Cliques' D-SGD); needs local_steps = 1")

    def __init__(self, cfg: AlgorithmOptions) -> None:
        super().__init__(cfg)
        self.shared_step = cfg.clique_averaging or cfg.persistent_momentum > 0
        if self.shared_step:  # the local phase's plain step gives the gradients
            self.solver = LocalSolver(clip_norm=cfg.clip_norm)
        self.gradient_mixing: torch.Tensor | None = None  # this round's clique averaging

    def check_options(self, cfg: AlgorithmOptions) -> None:
        super().check_options(cfg)
        for key in ("clique_averaging", "persistent_momentum"):
            if getattr(cfg, key) and cfg.local_steps != 1:
                raise ConfigError(f"algorithm.{key}", f"is {getattr(cfg, key)!r} but dpsgd "
                                  "then takes one local step a round (D-Cliques' D-SGD): set "
                                  f"algorithm.local_steps = 1 (got {cfg.local_steps})")

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.momentum_buffer = ({k: torch.zeros_like(v) for k, v in
                                 ctx.population.params.items()}
                                if self.cfg.persistent_momentum > 0 else None)

    def round(self, ctx: RunContext, t: int, graph: nx.Graph, faults: T.Faults) -> RoundReport:
        gradients_sent = 0
        if self.cfg.clique_averaging:
            A, gradients_sent = clique_averaging(graph, faults)
            self.gradient_mixing = ctx.comm.matrix(A)
        if self.cfg.order == "atc":
            report = super().round(ctx, t, graph, faults)
        else:
            nodes, losses = self.combine_then_adapt(
                ctx, t, faults, lambda models: self.exchange(ctx, t, graph, faults, models))
            report = RoundReport(nodes, losses, self.delivered(graph, faults))
        report.copies_sent += gradients_sent
        return report

    def local_phase(self, ctx: RunContext, t: int, faults: T.Faults) -> tuple[torch.Tensor,
                                                                               torch.Tensor]:
        """The local phase; with clique averaging or persistent momentum, x_i <- x_i - lr d_i
        with d_i the buffer of (the clique's mean of) g_i plus weight decay (module docstring).
        An offline node keeps its model and its buffer."""
        if not self.shared_step:
            return super().local_phase(ctx, t, faults)
        params = ctx.population.params
        old = {k: v.clone() for k, v in params.items()}
        nodes, losses = super().local_phase(ctx, t, faults)
        lr, wd = self.step_size(t), self.cfg.weight_decay
        for k, v in params.items():  # the steps -lr g_i (0 on an offline node)
            v.sub_(old[k])
        if self.gradient_mixing is not None:
            ctx.comm.mix(self.gradient_mixing, params)
        held = ctx.all_nodes().cpu().numpy()
        offline = torch.as_tensor(np.flatnonzero(faults.nodes[held]), device=ctx.device)
        buffers = self.momentum_buffer or {}
        kept = {k: b[offline].clone() for k, b in buffers.items()} if len(offline) else {}
        for k, v in params.items():
            if k in buffers:  # b <- a b + g + wd x; x <- x - lr b
                b = buffers[k].mul_(self.cfg.persistent_momentum).add_(v, alpha=-1 / lr)
                if wd > 0:
                    b.add_(old[k], alpha=wd)
                torch.add(old[k], b, alpha=-lr, out=v)
            else:  # x <- x - lr (g + wd x)
                if wd > 0:
                    v.add_(old[k], alpha=-lr * wd)
                v.add_(old[k])
            if len(offline):
                v[offline] = old[k][offline]
                if k in kept:
                    buffers[k][offline] = kept[k]
        return nodes, losses

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.momentum_buffer is not None:
            state["momentum_buffer"] = {k: v.clone() for k, v in self.momentum_buffer.items()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.momentum_buffer is not None:
            self.momentum_buffer = {k: v.clone() for k, v in state["momentum_buffer"].items()}
