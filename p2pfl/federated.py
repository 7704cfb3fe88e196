"""The federated dataset on the run's device and the per-round minibatch plan of every node.

All nodes hold the same number of samples (the partitioners give balanced nodes), so a node's data
is one row of an index matrix and a minibatch of all nodes at once is one gather.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from p2pfl.data import Dataset
from p2pfl.seeding import torch_generator


@dataclass(frozen=True)
class BatchPlan:
    """Minibatches of one round for every node.

    `stream[i]` lists positions into node i's local data (concatenated fresh permutations, one per
    epoch); local step k uses positions `stream[:, bounds[k][0]:bounds[k][1]]`.
    """

    stream: torch.Tensor  # int64 [N, epochs * n_per_node]
    bounds: list[tuple[int, int]]

    @property
    def steps(self) -> int:
        return len(self.bounds)


class FederatedData:
    """Training data split over nodes, test data, and the seeded batch sampler."""

    def __init__(self, dataset: Dataset, node_indices: torch.Tensor, device: torch.device,
                 dtype: torch.dtype) -> None:
        self.num_classes = dataset.num_classes
        self.input_shape = dataset.input_shape
        self.x_train = dataset.x_train.to(device=device, dtype=dtype)
        self.y_train = dataset.y_train.to(device)
        self.x_test = dataset.x_test.to(device=device, dtype=dtype)
        self.y_test = dataset.y_test.to(device)
        self.node_indices = node_indices.to(device)  # int64 [N, n_per_node]

    @property
    def num_nodes(self) -> int:
        return self.node_indices.shape[0]

    @property
    def n_per_node(self) -> int:
        return self.node_indices.shape[1]

    def plan(self, seed: int, t: int, batch_size: int, local_epochs: int,
             local_steps: int = 0) -> BatchPlan:
        """The minibatches of round t; depends only on (seed, t) and the sizes.

        With `local_steps` > 0 the round has exactly that many steps of `batch_size` samples taken
        from consecutive epochs; otherwise `local_epochs` epochs of ceil(n / B) steps each, the last
        step of an epoch taking the remainder (every node has the same n, so all batches of one step
        have one size).
        """
        n = self.n_per_node
        b = min(batch_size, n)
        if local_steps > 0:
            epochs = math.ceil(local_steps * b / n)
            bounds = [(k * b, (k + 1) * b) for k in range(local_steps)]
        else:
            epochs = local_epochs
            per_epoch = math.ceil(n / b)
            bounds = [
                (e * n + j * b, e * n + min((j + 1) * b, n))
                for e in range(epochs)
                for j in range(per_epoch)
            ]
        gen = torch_generator(seed, "batches", t)
        keys = torch.rand(self.num_nodes, epochs, n, generator=gen)
        stream = keys.argsort(dim=-1).view(self.num_nodes, epochs * n)
        return BatchPlan(stream.to(self.node_indices.device), bounds)

    def batch(self, plan: BatchPlan, step: int, nodes: torch.Tensor) -> tuple[torch.Tensor,
                                                                               torch.Tensor]:
        """Minibatch of `step` for `nodes` (int64 [c]): x [c, B, *input_shape], y [c, B]."""
        start, stop = plan.bounds[step]
        positions = plan.stream[nodes, start:stop]
        idx = self.node_indices[nodes].gather(1, positions)
        flat = idx.flatten()  # index_select: ~4x faster than advanced indexing on CPU
        x = self.x_train.index_select(0, flat).view(*idx.shape, *self.x_train.shape[1:])
        return x, self.y_train.index_select(0, flat).view(idx.shape)
