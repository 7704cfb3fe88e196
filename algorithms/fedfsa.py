"""FedFSA (Xing et al. 2025): MoFedSAM with layer-wise perturbation radii chosen by
perturbation sensitivity, evaluated as personalised FL.

Local step (MoFedSAM): e_k = rho_k g1_k / ||g1|| with the GLOBAL norm, rho_k = rho_larger for the
client's selected layers and rho (rho_default) elsewhere; d = alpha g(x + e) + (1 - alpha) Delta.
After the local phase every client scores each weight tensor k by its sensitivity
  paper (poster):        s_k = sum((w_k^E - w_k^0)^2), the inner product |dw_k . e_k| with the
                         round's change dw_k standing for the perturbation e_k
  reference_code:        s_k = mean((mm(w_k^E) - mm(w_k^0))^2), mm = min-max scaling of the tensor
(biases and normalisation / shortcut layers score -inf) and selects its top_c tensors for its
NEXT participation (none before its first).

The paper evaluates every method as personalised FL, each client holding out 30 % of its data:
that is the run's `algorithm.personal_fraction = 0.3` (algorithms/personal.py), which every
server algorithm takes; its head fine-tuning lasts the paper's E = 10 local epochs, which
`algorithm.personal_epochs = 10` keeps in a run with fewer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from algorithms.baselines import Baseline
from algorithms.fedcm import FedCM
from algorithms.options import Sam
from algorithms.server import ClientRound
from p2pfl.context import RunContext
from p2pfl.core.population import Params, per_node_sq_norm, row_scale
from p2pfl.core.solver import SAM_EPS
from p2pfl.core.terms import LocalTerms, Perturbation
from p2pfl.options import option, paper_default

APPENDIX = ("the appendix of Xing et al. 2025 (FedFSA, AAAI), Tables 4-6, Fashion-MNIST and "
            "CIFAR-10")

UNSCORED = ("bias", "bn", "norm", "gn", "downsample", "shortcut")


@dataclass(frozen=True)
class LayerwiseAscent(Perturbation):
    """e_k = radii[k] g1_k / (||g1|| + eps): one radius per parameter tensor k and row, the
    norm over all the tensors that move (the ascent of the local step)."""

    radii: Params = field(default_factory=dict)  # parameter name -> [m]

    def perturb(self, grads: Params | None, params: Params, rho: float) -> Params:
        norm = per_node_sq_norm(grads).sqrt() + SAM_EPS
        return {k: g * row_scale(self.radii[k] / norm, g) for k, g in grads.items()}


def _minmax(w: torch.Tensor) -> torch.Tensor:
    """Min-max scaling of each row [m, n] to [0, 1] (NaN for a constant row)."""
    low = w.min(dim=1, keepdim=True).values
    high = w.max(dim=1, keepdim=True).values
    return (w - low) / (high - low)


def sensitivity(start: Params, trained: Params, normalise: bool) -> torch.Tensor:
    """Per-row sensitivity of every tensor; -inf for unscored ones.

    Parameters
    ----------
    start : name -> [*shape], the model the rows started from.
    trained : name -> [m, *shape], the trained rows (params order).
    normalise : False: the paper's sum of squared changes; True: the code's mean of squared
        changes of the min-max scaled tensors.

    Returns
    -------
    [m, tensors] tensor, columns in params order.
    """
    scores = []
    for k, w in trained.items():
        before = start[k].reshape(1, -1).expand(w.shape[0], -1)
        after = w.flatten(1)
        if any(tag in k.lower() for tag in UNSCORED):
            scores.append(torch.full((w.shape[0],), -torch.inf, dtype=w.dtype, device=w.device))
            continue
        if normalise:
            s = (_minmax(after) - _minmax(before)).square().mean(dim=1)
        else:
            s = (after - before).square().sum(dim=1)
        scores.append(torch.nan_to_num(s, nan=-torch.inf))
    return torch.stack(scores, dim=1)


def top_layers(scores: torch.Tensor, c: int) -> torch.Tensor:
    """Each row's `c` highest scores (never a -inf one).

    Parameters
    ----------
    scores : [m, tensors] sensitivities.
    c : tensors to select per row (capped at the number of tensors).

    Returns
    -------
    bool [m, tensors] tensor, True where selected.
    """
    c = min(c, scores.shape[1])
    selected = torch.zeros_like(scores, dtype=torch.bool)
    if c == 0:
        return selected
    top = scores.topk(c, dim=1).indices
    selected.scatter_(1, top, True)
    return selected & torch.isfinite(scores)


class FedFSA(FedCM):
    name = "fedfsa"
    source = "FedFSA: Xing et al. 2025, AAAI"

    @dataclass
    class Options(FedCM.Options):
        rho: float = paper_default(Sam, "rho", 0.1, f"{APPENDIX} (0.05 on CIFAR-100)")
        rho_larger: float = option(0.2, low=0, doc="radius of the top_c most sensitive layers",
                                   source=f"{APPENDIX} (0.9 on CIFAR-100)")
        top_c: int = option(2, low=0, doc="number of layers with the larger radius",
                            source=APPENDIX)

    baselines = (Baseline({"rho": 0.0, "rho_larger": 0.0}, "FedCM (no SAM ascent)"),)
    variants = ("paper", "reference_code")

    def setup(self, ctx: RunContext) -> None:
        super().setup(ctx)
        self.selected = torch.zeros(ctx.num_nodes, len(self.server), dtype=torch.bool,
                                    device=ctx.device)

    def local_terms(self, ctx: RunContext, nodes: torch.Tensor, start: Params,
                    t: int) -> LocalTerms:
        a = self.cfg
        radii = torch.full(self.selected[nodes].shape, a.rho, device=ctx.device, dtype=ctx.dtype)
        radii[self.selected[nodes]] = a.rho_larger
        by_name = dict(zip(self.server, radii.unbind(1)))  # the server's tensors, in order
        return replace(super().local_terms(ctx, nodes, start, t),
                       perturbation=LayerwiseAscent(radii=by_name))

    def aggregate(self, ctx: RunContext, r: ClientRound) -> None:
        normalise = self.cfg.variant == "reference_code"
        scores = sensitivity(r.start, r.trained, normalise)
        self.selected[r.nodes] = top_layers(scores, self.cfg.top_c)
        super().aggregate(ctx, r)

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict() | {"selected": self.selected.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.selected.copy_(state["selected"])

