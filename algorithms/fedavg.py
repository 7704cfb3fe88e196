"""FedAvg (McMahan et al. 2017) and the algorithms that only change its local step or
its server optimizer: FedSAM, FedProx, FedAdam."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from algorithms.baselines import Baseline
from algorithms.client_state import expand
from algorithms.options import Sam, ServerStep
from algorithms.server import ClientRound, Server
from algorithms.server_optim import ServerAdam, ServerSGD
from p2pfl.context import RunContext
from p2pfl.core.population import Params
from p2pfl.core.terms import LocalTerms, Proximal
from p2pfl.options import option, paper_default


class FedAvg(Server):
    """x <- x + server_lr * mean_i (x_i^K - x)."""

    name = "fedavg"
    source = "FedAvg: McMahan et al. 2017, arXiv 1602.05629"

    @dataclass
    class Options(ServerStep, Server.Options):
        pass
    uses_terms = False

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.optimizer: ServerSGD | ServerAdam = ServerSGD(self.cfg.server_lr)

    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        self.optimizer.step(self.server, self.mean_update(ctx, r))

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.optimizer.load_state_dict(state["optimizer"])


class FedSAM(FedAvg):
    """FedAvg whose clients take SAM steps of radius `rho`."""

    name = "fedsam"
    source = "FedSAM: Qu et al. 2022, arXiv 2206.02618"

    @dataclass
    class Options(FedAvg.Options):
        rho: float = paper_default(
            Sam, "rho", 0.05, "the appendix of Xing et al. 2025 (FedFSA, AAAI), its FedSAM "
            "baseline (FL-Simulator's code default is 0.1)")

    baselines = (Baseline({"rho": 0.0}, "FedAvg (no SAM ascent)"),)


class FedProx(FedAvg):
    """Local step direction g + prox_mu * (x - x^t)."""

    name = "fedprox"
    source = "FedProx: Li et al. 2020, arXiv 1812.06127"

    @dataclass
    class Options(FedAvg.Options):
        prox_mu: float = option(0.01, low=0, doc="proximal coefficient mu")
    uses_terms = True
    baselines = (Baseline({"prox_mu": 0.0}, "FedAvg (no proximal term)"),)

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms:
        return LocalTerms((Proximal(self.cfg.prox_mu, expand(start, len(nodes))),))


class FedAdam(FedAvg):
    """Adam on the server with the mean client update as the (negative) pseudo-gradient."""

    name = "fedadam"
    source = "FedAdam: Reddi et al. 2021, arXiv 2003.00295"
    paper_weights = "uniform"  # Reddi et al. 2021, Algorithm 2: Delta = (1 / |S|) sum Delta_i

    @dataclass
    class Options(FedAvg.Options):
        server_beta1: float = option(0.9, low=0, high=1, high_open=True,
                                     doc="first-moment decay of the server Adam")
        server_beta2: float = option(0.99, low=0, high=1, high_open=True,
                                     doc="second-moment decay of the server Adam")
        server_tau: float = option(0.01, low=0, low_open=True, doc="server Adam epsilon tau")

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        a = self.cfg
        self.optimizer = ServerAdam(a.server_lr, a.server_beta1, a.server_beta2, a.server_tau)
