"""Every operation that moves data between nodes, behind one small interface.

Algorithms never touch other nodes' rows directly: they call `mix` (gossip with a mixing matrix)
and `weighted_sum` (server aggregation). A distributed implementation (each rank holding a slice
of the nodes) can replace `LocalComm` without changing any algorithm.
"""

from __future__ import annotations

import numpy as np
import torch

from p2pfl.population import Params


class LocalComm:
    """All nodes live in this process; mixing is one matrix product per parameter block."""

    def __init__(self, device: torch.device, dtype: torch.dtype) -> None:
        self.device = device
        self.dtype = dtype
        self._scratch = torch.empty(0, device=device, dtype=dtype)

    def matrix(self, W: np.ndarray | torch.Tensor) -> torch.Tensor:
        """A mixing matrix on the run's device and dtype."""
        return torch.as_tensor(W).to(device=self.device, dtype=self.dtype)

    def mix(self, W: torch.Tensor, params: Params) -> None:
        """X <- W @ X for every block, in place (W [N, N]; W[j, i] = share of i's row sent to j)."""
        largest = max(block.numel() for block in params.values())
        if self._scratch.numel() < largest:  # reused: fresh large buffers page-fault every round
            self._scratch = torch.empty(largest, device=self.device, dtype=self.dtype)
        for block in params.values():
            flat = block.view(block.shape[0], -1)
            out = self._scratch[:flat.numel()].view_as(flat)
            torch.matmul(W, flat, out=out)
            flat.copy_(out)

    def weighted_sum(self, params: Params, weights: torch.Tensor) -> Params:
        """sum_r weights[r] * params[r] for every block: name -> [*shape]."""
        return {k: torch.tensordot(weights.to(v.dtype), v, dims=1) for k, v in params.items()}
