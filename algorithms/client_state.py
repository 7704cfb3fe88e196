"""Per-client state of centralized algorithms, stacked `[N, *shape]` and addressed by index.

Control variates, duals and last-seen global models persist across rounds for every client;
only the sampled clients' rows are read and written in a round (one gather / index_add, no loop).
"""

from __future__ import annotations

from typing import Any

import torch

from p2pfl.core.mixing import Comm
from p2pfl.core.population import Params


class ClientState:
    """One stacked tensor `[N, *shape]` per parameter of `like` (name -> [*shape]), zeros."""

    def __init__(self, like: Params, num_clients: int) -> None:
        self.num_clients = num_clients
        self.values: Params = {k: v.new_zeros(num_clients, *v.shape) for k, v in like.items()}

    def rows(self, nodes: torch.Tensor) -> Params:
        """Copies of the rows of `nodes` (int64 [m]): name -> [m, *shape]."""
        return {k: v[nodes] for k, v in self.values.items()}

    def write(self, nodes: torch.Tensor, rows: Params) -> None:
        """Set the rows of `nodes` to `rows` [m, *shape]."""
        for k, v in self.values.items():
            v.index_copy_(0, nodes, rows[k])

    def add(self, nodes: torch.Tensor, rows: Params, alpha: float = 1.0) -> None:
        """Add alpha * `rows` [m, *shape] to the rows of `nodes` (distinct indices)."""
        for k, v in self.values.items():
            v.index_add_(0, nodes, rows[k], alpha=alpha)

    def mean(self, comm: Comm) -> Params:
        """Mean over all N clients: name -> [*shape]."""
        some = next(iter(self.values.values()))
        weights = torch.full((self.num_clients,), 1.0 / self.num_clients, device=some.device,
                             dtype=some.dtype)
        return comm.weighted_sum(self.values, weights)

    def state_dict(self) -> dict[str, Any]:
        return {k: v.clone() for k, v in self.values.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k, v in self.values.items():
            v.copy_(state[k])


def clone(model: Params) -> Params:
    """A copy of every tensor of a model.

    Parameters
    ----------
    model : name -> tensor.

    Returns
    -------
    Params, name -> a clone of the tensor.
    """
    return {k: v.clone() for k, v in model.items()}


def expand(model: Params, rows: int) -> Params:
    """A model viewed as `rows` identical rows (no copy).

    Parameters
    ----------
    model : name -> [*shape].
    rows : number of rows.

    Returns
    -------
    Params, name -> [rows, *shape] (an expanded view).
    """
    return {k: v.unsqueeze(0).expand(rows, *v.shape) for k, v in model.items()}


def sq_norm(model: Params) -> torch.Tensor:
    """Squared L2 norm of one model over all its tensors jointly.

    Parameters
    ----------
    model : name -> tensor.

    Returns
    -------
    0-dim tensor.
    """
    return sum(v.square().sum() for v in model.values())
