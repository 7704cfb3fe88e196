"""FedDyn (Acar et al. 2021) and its SAM descendants FedSpeed and FedSMOO,
all on the shared drift dual (`algorithms.dual`).

Local direction g + alpha (x - x^t) + alpha h_i; after training h_i += x_i^K - x^t; server
x^{t+1} = mean_{S_t} x_i^K + mean_{all N} h_i (alpha = dyn_alpha; the server lr is unused).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from algorithms.baselines import Baseline
from algorithms.client_state import ClientState, clone, expand, sq_norm
from algorithms.dual import DriftDual
from algorithms.options import FL_SIMULATOR_RHO, Dual, Sam
from algorithms.server import ClientRound, Server
from p2pfl.context import RunContext
from p2pfl.core.population import Params, per_node_sq_norm
from p2pfl.core.solver import SAM_EPS
from p2pfl.core.terms import GradientAscent, LocalTerms, Perturbation, scaled
from p2pfl.options import option, paper_default


class FedDyn(Server):
    name = "feddyn"
    source = "FedDyn: Acar et al. 2021, arXiv 2111.04263"

    @dataclass
    class Options(Dual, Server.Options):
        pass
    paper_weights = "uniform"  # theta = (1 / |P_t|) sum theta_k - h / alpha

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.dual = DriftDual(self.server, ctx.num_nodes, self.cfg.dyn_alpha, proximal=True)

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms:
        return LocalTerms(self.dual.terms(nodes, start))

    def server_correction(self, ctx: RunContext, nodes: torch.Tensor) -> Params:
        """What the server adds to the mean client model: the mean drift of ALL clients."""
        return self.dual.mean_all(ctx.comm)

    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        self.dual.absorb(r.nodes, r.trained, r.start)
        mean = self.client_mean(ctx, r)
        correction = self.server_correction(ctx, r.nodes)
        self.server = {k: v + correction[k] for k, v in mean.items()}

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"dual": self.dual.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.dual.load_state_dict(state["dual"])


class FedSpeed(FedDyn):
    """FedDyn with SAM local gradients.

    reference_code (FL-Simulator): exactly FedDyn with the SAM gradient at radius rho.
    paper (best reading): the quasi-gradient (1 - quasi_alpha) g1 + quasi_alpha g2 and
    the server mean over the sampled clients of x_i^K - lambda g_i = x_i^K + h_i (the dual
    averaged over the active set, not all clients). The perturbation is normalised in both.
    """

    name = "fedspeed"
    source = "FedSpeed: Sun et al. 2023, arXiv 2302.10429"
    variants = ("paper", "reference_code")
    form_options = {"paper": ("quasi_alpha",)}

    @dataclass
    class Options(FedDyn.Options):
        rho: float = paper_default(Sam, "rho", 0.1, FL_SIMULATOR_RHO)
        quasi_alpha: float = option(0.95, low=0, high=1,
                                    doc="paper form: weight of the perturbed gradient")

    baselines = (Baseline({"rho": 0.0, "variant": "reference_code"}, "FedDyn (no SAM ascent)"),
                 Baseline({"rho": 0.0}, "FedDyn's client step with the dual averaged over the "
                          "sampled clients (no SAM ascent)"))

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms:
        terms = super().local_terms(ctx, nodes, start, t)
        if self.cfg.variant == "paper":
            terms = replace(terms, perturbation=GradientAscent(mix=self.cfg.quasi_alpha))
        return terms

    def server_correction(self, ctx: RunContext, nodes: torch.Tensor) -> Params:
        if self.cfg.variant == "paper":
            return self.dual.mean_over(ctx.comm, nodes)
        return super().server_correction(ctx, nodes)


@dataclass(frozen=True)
class CorrectedAscent(Perturbation):
    """FedSMOO's ascent along the corrected gradient, a = g1 - mu_i - s: e = rho a /
    (||a|| + eps), then mu_i += e - s (the dual `mu` [m, ...] is updated in place every step)."""

    dual: Params = field(default_factory=dict)  # mu_i
    shift: Params = field(default_factory=dict)  # s, the server's

    def perturb(self, grads: Params | None, params: Params, rho: float) -> Params:
        direction = {k: g - self.dual[k] - self.shift[k] for k, g in grads.items()}
        perturb = scaled(direction, rho / (per_node_sq_norm(direction).sqrt() + SAM_EPS))
        for k, e in perturb.items():
            self.dual[k].add_(e - self.shift[k])
        return perturb

    def mutable(self) -> tuple[Params, ...]:
        return (self.dual,)


class FedSMOO(FedDyn):
    """FedDyn whose SAM ascent follows the corrected gradient g1 - mu_i - s (FL-Simulator form).

    Each step: e = rho (g1 - mu_i - s) / (||g1 - mu_i - s|| + eps), mu_i += e - s. Clients upload
    x_i^K and mu_i; the server sets s = rho * mean_{S_t} mu_i / (||.|| + eps).
    """

    name = "fedsmoo"
    source = "FedSMOO: Sun et al. 2023, arXiv 2305.11584"

    @dataclass
    class Options(FedDyn.Options):
        rho: float = paper_default(Sam, "rho", 0.1, FL_SIMULATOR_RHO)

    baselines = (Baseline({"rho": 0.0}, "FedDyn (no SAM ascent, so no perturbation duals)"),)
    down = 2  # x and s
    up = 2  # x_i^K and mu_i

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.perturb_dual = ClientState(self.server, ctx.num_nodes)
        self.global_perturb = {k: torch.zeros_like(v) for k, v in self.server.items()}

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms:
        terms = super().local_terms(ctx, nodes, start, t)
        return replace(terms, perturbation=CorrectedAscent(
            dual=self.perturb_dual.rows(nodes), shift=expand(self.global_perturb, len(nodes))))

    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        super().aggregate(ctx, r)
        dual = r.terms.perturbation.dual
        self.perturb_dual.write(r.nodes, dual)
        mean = self.client_mean(ctx, r, dual)
        scale = self.cfg.rho / (sq_norm(mean).sqrt() + SAM_EPS)
        self.global_perturb = {k: v * scale for k, v in mean.items()}

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"perturb_dual": self.perturb_dual.state_dict(),
                                       "global_perturb": clone(self.global_perturb)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.perturb_dual.load_state_dict(state["perturb_dual"])
        self.global_perturb = clone(state["global_perturb"])
