"""A round's neighbourhoods as padded index tensors: who each node receives from, with the
mixing weights, so that robust aggregation and attacks run over all nodes at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from topologies.mixing import Matrix


@dataclass(frozen=True)
class Neighbourhoods:
    """Who each node receives from in one gossip step, as padded tensors (module docstring)."""

    index: torch.Tensor  # int64 [n, D], the senders of receiver i; padding: i itself
    weight: torch.Tensor  # [n, D], W[i, index[i, s]]; 0 at the padding
    mask: torch.Tensor  # bool [n, D], True at the real entries
    self_weight: torch.Tensor  # [n], W[i, i]

    @property
    def degree(self) -> torch.Tensor:
        """int64 [n], the number of senders of each node."""
        return self.mask.sum(1)


def neighbourhoods(W: Matrix, device: torch.device, dtype: torch.dtype) -> Neighbourhoods:
    """The padded neighbourhoods of a mixing matrix.

    Parameters
    ----------
    W : [n, n] dense or scipy.sparse, W[i, j] > 0 when i receives from j (house convention).
    device, dtype : of the returned tensors (weights in `dtype`).

    Returns
    -------
    Neighbourhoods, senders of each row in increasing order.
    """
    M = sp.coo_array(W)
    n = M.shape[0]
    off = (M.row != M.col) & (M.data != 0)
    rows, cols, vals = M.row[off], M.col[off], M.data[off]
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    degree = np.bincount(rows, minlength=n)
    width = int(degree.max(initial=0))
    slot = np.arange(len(rows)) - (np.cumsum(degree) - degree)[rows]
    index = np.repeat(np.arange(n)[:, None], width, axis=1)
    weight = np.zeros((n, width))
    mask = np.zeros((n, width), dtype=bool)
    index[rows, slot], weight[rows, slot], mask[rows, slot] = cols, vals, True
    diagonal = np.asarray(sp.csr_array(M).diagonal(), dtype=np.float64)
    return Neighbourhoods(torch.as_tensor(index, device=device),
                          torch.as_tensor(weight, device=device, dtype=dtype),
                          torch.as_tensor(mask, device=device),
                          torch.as_tensor(diagonal, device=device, dtype=dtype))
