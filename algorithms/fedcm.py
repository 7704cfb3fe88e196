"""FedCM (Xu et al. 2021) and MoFedSAM (Qu et al. 2022): client-level
momentum. The server broadcasts Delta = -U^{t-1} / (K * lr^{t-1}), an estimate of the previous
round's mean gradient, and clients step along alpha * g + (1 - alpha) * Delta (alpha = cm_alpha,
the weight of the LOCAL gradient; Delta = 0 in the first round)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from algorithms.baselines import Baseline
from algorithms.client_state import clone, expand
from algorithms.options import FL_SIMULATOR_RHO, Sam, ServerStep
from algorithms.server import ClientRound, Server
from p2pfl.context import RunContext
from p2pfl.core.population import Params, row_scale
from p2pfl.core.terms import Linear, LocalTerms, Scaled
from p2pfl.options import option, paper_default


class FedCM(Server):
    name = "fedcm"
    source = "FedCM: Xu et al. 2021, arXiv 2106.10874"

    @dataclass
    class Options(ServerStep, Server.Options):
        cm_alpha: float = option(0.1, low=0, high=1, low_open=True,
                                 doc="weight of the LOCAL gradient in the client step",
                                 source="Xu et al. 2021 (FedCM), arXiv 2106.10874: alpha 0.1")
    down = 2  # model and Delta
    baselines = (Baseline({"cm_alpha": 1.0}, "FedAvg (no client-level momentum)"),)
    paper_weights = "uniform"  # Delta = (1 / |S|) sum Delta_i

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.momentum = {k: torch.zeros_like(v) for k, v in self.server.items()}

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms:
        alpha = self.cfg.cm_alpha
        shared = {k: (1 - alpha) * v for k, v in self.momentum.items()}
        return LocalTerms((Scaled(alpha), Linear(expand(shared, len(nodes)))))  # a g + (1-a) D

    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        update = self.mean_update(ctx, r)
        if bool((r.steps == r.steps[0]).all()):  # Delta = U / (-K eta_l)
            steps = float(r.steps[0])
            gradient = {k: v / (-steps * r.lr) for k, v in update.items()}
        else:  # the clients' mean gradient: sum_i w_i (x_i^K - x) / (-K_i eta_l)
            per_step = {k: (v - r.start[k]) / row_scale(-r.steps * r.lr, v)
                        for k, v in r.trained.items()}
            gradient = self.client_mean(ctx, r, per_step)
        for k, x in self.server.items():
            x.add_(update[k], alpha=self.cfg.server_lr)
            self.momentum[k] = gradient[k]

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"momentum": clone(self.momentum)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.momentum = clone(state["momentum"])


class MoFedSAM(FedCM):
    """FedCM whose local gradient is the SAM gradient (the ascent uses the plain g1)."""

    name = "mofedsam"
    source = "MoFedSAM: Qu et al. 2022, arXiv 2206.02618"

    @dataclass
    class Options(FedCM.Options):
        rho: float = paper_default(Sam, "rho", 0.1, FL_SIMULATOR_RHO)

    baselines = (Baseline({"rho": 0.0, "cm_alpha": 1.0}, "FedAvg (no SAM ascent, no "
                          "client-level momentum)"),
                 Baseline({"rho": 0.0}, "FedCM (no SAM ascent)"),
                 Baseline({"cm_alpha": 1.0}, "FedSAM (no client-level momentum)"))
