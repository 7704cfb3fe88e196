"""FedAvg (McMahan et al. 2017; spec 3.10): x <- x + server_lr * mean_i (x_i^K - x)."""

from __future__ import annotations

import torch

from algorithms.server import Server
from p2pfl.context import RunContext
from p2pfl.population import Params


class FedAvg(Server):
    name = "fedavg"

    def aggregate(self, ctx: RunContext, params: Params, nodes: torch.Tensor) -> None:
        # Every node holds the same number of samples, so sample weighting is the plain mean.
        weights = torch.full((len(nodes),), 1.0 / len(nodes), device=ctx.device, dtype=ctx.dtype)
        mean = ctx.comm.weighted_sum(params, weights)
        for k, x in self.server.items():
            x.add_(mean[k] - x, alpha=self.cfg.server_lr)
