"""FedLESAM, FedLESAM-S and FedLESAM-D (Fan et al. 2024): locally estimated global
perturbations.

Each client stores the global model it received the last time it was sampled, x_i^old. In a
round it perturbs along the estimated global ascent direction, fixed for the whole round,
e_i = rho * (x_i^old - x^t) / ||x_i^old - x^t|| (0 at its first participation), and takes ONE
forward/backward per step at x + e (paper Eq. 3, global L2 norm). At the end of the round
x_i^old <- x^t. Nothing extra is sent. Bases: FedAvg (fedlesam), SCAFFOLD (fedlesam_s), FedDyn
(fedlesam_d).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import torch

from algorithms.baselines import Baseline
from algorithms.client_state import ClientState, expand
from algorithms.fedavg import FedAvg
from algorithms.feddyn import FedDyn
from algorithms.options import FEDLESAM_RHO, Sam
from algorithms.scaffold import Scaffold
from algorithms.server import ClientRound, Server
from p2pfl.context import RunContext
from p2pfl.core.population import Params, per_node_sq_norm, row_scale
from p2pfl.core.solver import SAM_EPS
from p2pfl.core.terms import LocalTerms, Perturbation
from p2pfl.options import option, paper_default


class LocalEstimate:
    """The clients' last-seen global models and the fixed perturbation they give."""

    def __init__(self, like: Params, num_clients: int) -> None:
        self.old = ClientState(like, num_clients)
        self.seen = torch.zeros(num_clients, dtype=torch.bool,
                                device=next(iter(like.values())).device)

    def perturbation(self, nodes: torch.Tensor, start: Params, rho: float) -> Params:
        """e_i = rho (x_i^old - x^t) / (||x_i^old - x^t|| + eps); 0 for first participations."""
        diff = {k: v - start[k] for k, v in self.old.rows(nodes).items()}
        scale = rho / (per_node_sq_norm(diff).sqrt() + SAM_EPS) * self.seen[nodes]
        return {k: d * row_scale(scale, d) for k, d in diff.items()}

    def remember(self, nodes: torch.Tensor, start: Params) -> None:
        self.old.write(nodes, expand(start, len(nodes)))
        self.seen[nodes] = True

    def state_dict(self) -> dict[str, Any]:
        return {"old": self.old.state_dict(), "seen": self.seen.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.old.load_state_dict(state["old"])
        self.seen.copy_(state["seen"])


@dataclass(frozen=True)
class FixedPerturbation(Perturbation):
    """FedLESAM's perturbation, fixed for the round (estimated from the global update): the
    gradient is taken at x + e only, one forward/backward a step, and the losses reported are
    those at x + e."""

    needs_gradient: ClassVar[bool] = False
    offset: Params = field(default_factory=dict)  # e [m, ...]

    def perturb(self, grads: Params | None, params: Params, rho: float) -> Params:
        return {k: self.offset[k] for k in params}


class _LESAM(Server):
    """Mixin: the base algorithm's local terms with the fixed FedLESAM perturbation."""

    paper_weights = "uniform"  # FL-Simulator's plain mean over the active clients

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.estimate = LocalEstimate(self.server, ctx.num_nodes)

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms:
        base = super().local_terms(ctx, nodes, start, t) or LocalTerms()
        perturb = self.estimate.perturbation(nodes, start, self.cfg.rho)
        return replace(base, perturbation=FixedPerturbation(offset=perturb))

    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        super().aggregate(ctx, r)
        self.estimate.remember(r.nodes, r.start)

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"estimate": self.estimate.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.estimate.load_state_dict(state["estimate"])


class FedLESAM(_LESAM, FedAvg):
    name = "fedlesam"
    source = "FedLESAM: Fan et al. 2024, arXiv 2405.18890"
    uses_terms = True

    @dataclass
    class Options(FedAvg.Options):
        rho: float = paper_default(Sam, "rho", 0.01, FEDLESAM_RHO)

    baselines = (Baseline({"rho": 0.0}, "FedAvg (no perturbation)"),)


class FedLESAMS(_LESAM, Scaffold):
    """SCAFFOLD base. reference_code multiplies the correction c - c_i by `correction_scale`
    (MediaBrain-SJTU/FedLESAM client/fedlesam_s.py); the paper states no scale (1)."""

    name = "fedlesam_s"
    source = "FedLESAM-S: Fan et al. 2024, arXiv 2405.18890"
    variants = ("paper", "reference_code")
    form_options = {"reference_code": ("correction_scale",)}

    @dataclass
    class Options(Scaffold.Options):
        rho: float = paper_default(Sam, "rho", 0.01, FEDLESAM_RHO)
        correction_scale: float = option(0.1, low=0, doc="reference code's scale of the "
                                         "SCAFFOLD correction")

    baselines = (Baseline({"rho": 0.0, "variant": "paper"}, "SCAFFOLD (no perturbation)"),
                 Baseline({"rho": 0.0}, "SCAFFOLD with its correction scaled by "
                          "correction_scale (no perturbation)"))

    def correction_scale(self) -> float:
        return self.cfg.correction_scale if self.cfg.variant == "reference_code" else 1.0


class FedLESAMD(_LESAM, FedDyn):
    name = "fedlesam_d"
    source = "FedLESAM-D: Fan et al. 2024, arXiv 2405.18890"

    @dataclass
    class Options(FedDyn.Options):
        rho: float = paper_default(Sam, "rho", 0.01, FEDLESAM_RHO)

    baselines = (Baseline({"rho": 0.0}, "FedDyn (no perturbation)"),)
