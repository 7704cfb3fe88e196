"""SCAFFOLD (Karimireddy et al. 2020, option II) and FedGamma (Dai et al. 2023: SCAFFOLD with
SAM local gradients).

Local direction g + scale * (c - c_i). After training c_i+ = c_i - c + (x^t - x_i^K) / (K lr);
the server adds (1/N) sum_i (c_i+ - c_i) to c (N = ALL clients) and x += server_lr * U.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from algorithms.baselines import Baseline
from algorithms.client_state import ClientState, clone
from algorithms.options import Sam, ServerStep
from algorithms.server import ClientRound, Server
from p2pfl.context import RunContext
from p2pfl.core.population import Params, row_scale
from p2pfl.core.terms import Linear, LocalTerms
from p2pfl.options import paper_default


class Scaffold(Server):
    name = "scaffold"
    source = "SCAFFOLD: Karimireddy et al. 2020, arXiv 1910.06378, option II"

    @dataclass
    class Options(ServerStep, Server.Options):
        pass
    down = 2  # x and c
    up = 2  # x_i^K and Delta c_i
    paper_weights = "uniform"  # x <- x + (eta_g / |S|) sum Delta y_i

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.control = {k: torch.zeros_like(v) for k, v in self.server.items()}
        self.client_control = ClientState(self.server, ctx.num_nodes)

    def correction_scale(self) -> float:
        return 1.0

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms:
        scale = self.correction_scale()
        rows = self.client_control.rows(nodes)
        linear = {k: scale * (self.control[k] - v) for k, v in rows.items()}
        return LocalTerms((Linear(linear),))  # g + c - c_i

    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        old = self.client_control.rows(r.nodes)
        step = r.steps * r.lr  # K_i eta_l per client [m]
        new = {k: v - self.control[k] + (r.start[k] - r.trained[k]) / row_scale(step, v)
               for k, v in old.items()}
        self.client_control.write(r.nodes, new)
        weights = torch.full((len(r.nodes),), 1.0 / ctx.num_nodes, device=ctx.device,
                             dtype=ctx.dtype)
        delta_c = ctx.comm.weighted_sum({k: new[k] - v for k, v in old.items()}, weights)
        update = self.mean_update(ctx, r)
        for k, x in self.server.items():
            x.add_(update[k], alpha=self.cfg.server_lr)
            self.control[k].add_(delta_c[k])

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"control": clone(self.control),
                                       "client_control": self.client_control.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.control = clone(state["control"])
        self.client_control.load_state_dict(state["client_control"])


class FedGamma(Scaffold):
    """SCAFFOLD whose local gradient is the SAM gradient (ascent from the plain g1)."""

    name = "fedgamma"
    source = "FedGamma: Dai et al. 2023, IEEE TNNLS"

    @dataclass
    class Options(Scaffold.Options):
        rho: float = paper_default(
            Sam, "rho", 0.01, "the README of woodenchild95/FL-Simulator (the TNNLS paper's "
            "text is not available)")

    baselines = (Baseline({"rho": 0.0}, "SCAFFOLD (no SAM ascent)"),)
