"""Server optimizers: apply the mean client update (a pseudo-gradient step) to the server model.

The update U = mean_i (x_i^K - x) points downhill; FedOpt's pseudo-gradient is -U.
"""

from __future__ import annotations

from typing import Any

import torch

from p2pfl.core.population import Params


class ServerSGD:
    """x <- x + lr * U (FedAvg: lr = 1 gives the mean client model)."""

    def __init__(self, lr: float) -> None:
        self.lr = lr

    def step(self, model: Params, update: Params) -> None:
        for k, x in model.items():
            x.add_(update[k], alpha=self.lr)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Stateless."""


class ServerAdam:
    """FedAdam (Reddi et al. 2021), no bias correction:
    m <- b1 m + (1 - b1) U; v <- b2 v + (1 - b2) U^2; x <- x + lr * m / (sqrt(v) + tau)."""

    def __init__(self, lr: float, beta1: float, beta2: float, tau: float) -> None:
        self.lr, self.beta1, self.beta2, self.tau = lr, beta1, beta2, tau
        self.m: Params = {}
        self.v: Params = {}

    def step(self, model: Params, update: Params) -> None:
        for k, x in model.items():
            u = update[k]
            if k not in self.m:
                self.m[k], self.v[k] = torch.zeros_like(x), torch.zeros_like(x)
            self.m[k].mul_(self.beta1).add_(u, alpha=1 - self.beta1)
            self.v[k].mul_(self.beta2).addcmul_(u, u, value=1 - self.beta2)
            x.addcdiv_(self.m[k], self.v[k].sqrt().add_(self.tau), value=self.lr)

    def state_dict(self) -> dict[str, Any]:
        return {"m": {k: v.clone() for k, v in self.m.items()},
                "v": {k: v.clone() for k, v in self.v.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.m = {k: v.clone() for k, v in state["m"].items()}
        self.v = {k: v.clone() for k, v in state["v"].items()}
