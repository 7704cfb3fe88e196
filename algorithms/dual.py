"""The dynamic-regularization / ADMM dual shared by FedDyn, FedSpeed, FedSMOO, FedLESAM-D, FedGMT
and FedGloSS.

Every client i keeps its drift h_i = sum over the rounds it trained of (x_i^K - x_i^0), where
x_i^0 is the model it started that round from. The local step adds alpha * h_i (and, with a
proximal term, alpha * (x - x_i^0)); the server adds the mean drift to the mean client model.
In FedDyn's notation h_i = -grad L_i / alpha; in ADMM notation (FedGMT's u_i, FedGloSS's sigma_i)
h_i = -beta * u_i with beta = 1 / alpha.
"""

from __future__ import annotations

from typing import Any

import torch

from algorithms.client_state import ClientState, expand
from p2pfl.core.mixing import Comm
from p2pfl.core.population import Params
from p2pfl.core.terms import Correction, Linear, Proximal


class DriftDual:
    """Per-client drifts h [N, *shape] with coefficient `alpha` (FedDyn's alpha = 1 / beta)."""

    def __init__(self, like: Params, num_clients: int, alpha: float, proximal: bool) -> None:
        self.alpha = alpha
        self.proximal = proximal
        self.drift = ClientState(like, num_clients)

    def terms(self, nodes: torch.Tensor, start: Params) -> tuple[Correction, ...]:
        """The local step's corrections: + alpha * h_i and, if proximal, + alpha * (x - start)."""
        linear = Linear({k: self.alpha * v for k, v in self.drift.rows(nodes).items()})
        if not self.proximal:
            return (linear,)
        return linear, Proximal(self.alpha, expand(start, len(nodes)))

    def absorb(self, nodes: torch.Tensor, trained: Params, start: Params) -> None:
        """h_i <- h_i + (x_i^K - start) for the clients that trained."""
        self.drift.add(nodes, {k: v - start[k] for k, v in trained.items()})

    def mean_all(self, comm: Comm) -> Params:
        """mean over ALL N clients of h_i (clients never sampled contribute 0)."""
        return self.drift.mean(comm)

    def mean_over(self, comm: Comm, nodes: torch.Tensor) -> Params:
        """mean over the clients `nodes` of h_i."""
        rows = self.drift.rows(nodes)
        weights = torch.full((len(nodes),), 1.0 / len(nodes), device=nodes.device,
                             dtype=next(iter(rows.values())).dtype)
        return comm.weighted_sum(rows, weights)

    def state_dict(self) -> dict[str, Any]:
        return self.drift.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.drift.load_state_dict(state)
