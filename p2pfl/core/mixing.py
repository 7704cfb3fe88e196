"""Every operation that moves data between nodes, behind one small interface (`Comm`).

Algorithms never touch other nodes' rows directly: they read and write their own nodes' rows
through the population (`Population.rows` / `write`, by node id) and call `mix` (gossip with a
mixing matrix) and `weighted_sum` (server aggregation) for everything that crosses nodes. A
distributed implementation of `Comm` (each rank holding a block of the nodes, exchanging the rows
a round's matrix needs) can then replace `LocalComm` without changing any algorithm.

A mixing operator is an [N, N] torch tensor, either dense (strided) or sparse CSR; `LocalComm`
picks the layout (`mixing = "auto" | "dense" | "sparse"`, see `sparse_for`) and `mix` runs one
matrix product per parameter block for either, with no loop over nodes or edges.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from p2pfl.core.population import Params

LAYOUTS = ("auto", "dense", "sparse")
SPARSE_MIN_NODES = 32  # "auto": dense below this many nodes (any graph; the product is cheap)
SPARSE_MAX_DENSITY = 0.2  # "auto": dense when more than this fraction of W's entries are nonzero
INT32_ELEMENTS = 2**31  # operands this large overflow the 32-bit offsets of CPU sparse kernels
TILE_BYTES = 2 << 20  # CPU: bytes of one output tile (columns of a block per product), cache-sized

Operand = np.ndarray | sp.sparray | sp.spmatrix | torch.Tensor


def tile_width(n: int, largest: int, device: torch.device, itemsize: int) -> int:
    """Columns of one tile of the in-place mix of n rows.

    The whole block, on CPU at most TILE_BYTES a tile (at least 64 columns). The mix's scratch
    holds n x tile_width values.

    Parameters
    ----------
    n : rows (nodes).
    largest : values a row of the largest block.
    device : the run's device.
    itemsize : bytes per value.

    Returns
    -------
    int, columns per tile.
    """
    if device.type != "cpu":
        return largest
    return min(largest, max(64, TILE_BYTES // (n * itemsize)))


def _nnz(W: np.ndarray | sp.sparray | sp.spmatrix) -> int:
    """Stored nonzeros of a dense or scipy.sparse [N, N] matrix."""
    return int(W.nnz) if sp.issparse(W) else int(np.count_nonzero(W))


def _to_torch(W: Operand) -> torch.Tensor:
    """W as a torch tensor on the host: sparse CSR for a scipy matrix, else as given."""
    if not sp.issparse(W):
        return torch.as_tensor(W)
    csr = sp.csr_array(W)
    return torch.sparse_csr_tensor(torch.from_numpy(csr.indptr.astype(np.int64)),
                                   torch.from_numpy(csr.indices.astype(np.int64)),
                                   torch.from_numpy(csr.data), size=csr.shape,
                                   check_invariants=False)


def diag_scale(W: torch.Tensor, right: torch.Tensor, row_divisor: torch.Tensor) -> torch.Tensor:
    """diag(1 / row_divisor) @ W @ diag(right), entry by entry W[j, i] * right[i] / row_divisor[j].

    Parameters
    ----------
    W : [N, N] dense or CSR tensor.
    right : [N] column scales.
    row_divisor : [N] row divisors.

    Returns
    -------
    [N, N] tensor in W's layout.
    """
    if W.layout != torch.sparse_csr:
        return W * right.unsqueeze(0) / row_divisor.unsqueeze(1)
    crow, col = W.crow_indices(), W.col_indices()
    rows = torch.repeat_interleave(torch.arange(W.shape[0], device=W.device), crow.diff())
    values = W.values() * right[col] / row_divisor[rows]
    return torch.sparse_csr_tensor(crow, col, values, size=W.shape, check_invariants=False)


class Comm(ABC):
    """What crosses nodes in a round: mixing matrices, mixing, and weighted sums over nodes."""

    @abstractmethod
    def sparse_for(self, n: int, nnz: int) -> bool:
        """Whether an [n, n] mixing operator with `nnz` nonzeros is best built sparse.

        Parameters
        ----------
        n : nodes.
        nnz : nonzeros of the operator.

        Returns
        -------
        bool.
        """

    @abstractmethod
    def matrix(self, W: Operand, dtype: torch.dtype | None = None) -> torch.Tensor:
        """W as the operator `mix` takes.

        Parameters
        ----------
        W : [N, N] numpy, scipy.sparse or torch; column i: what node i sends (W[j, i] = share of i's
            row sent to j).
        dtype : the operator's dtype (default: the run's).

        Returns
        -------
        [N, N] tensor, dense or sparse CSR, on the run's device.
        """

    @abstractmethod
    def mix(self, W: torch.Tensor, params: Params, steps: int = 1) -> None:
        """X <- W^steps @ X for every parameter block of the population, in place.

        Parameters
        ----------
        W : [N, N] operator from `matrix`.
        params : name -> [N, *shape], changed in place.
        steps : times W is applied.
        """

    @abstractmethod
    def product(self, W: torch.Tensor, params: Params, out: Params, add: bool = False) -> Params:
        """out <- W @ X (+ out when `add`) for every parameter block of `params`.

        Parameters
        ----------
        W : [N, N] operator from `matrix`.
        params : name -> [N, *shape] (not changed).
        out : name -> blocks of the same shapes, written.
        add : whether to add to `out` rather than overwrite it.

        Returns
        -------
        Params, `out`.
        """

    @abstractmethod
    def weighted_sum(self, params: Params, weights: torch.Tensor) -> Params:
        """sum_r weights[r] * params[r] over the rows of every block.

        Parameters
        ----------
        params : name -> [r, *shape].
        weights : [r].

        Returns
        -------
        Params, name -> [*shape].
        """

    @abstractmethod
    def node_sum(self, params: Params, weights: torch.Tensor) -> Params:
        """sum_i weights[i] * x_i over all N nodes of the population.

        Parameters
        ----------
        params : name -> [rows, *shape], this process's share of the population's rows.
        weights : [N], one per node of the population.

        Returns
        -------
        Params, name -> [*shape], the same in every process.
        """

    @abstractmethod
    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over the processes, in place.

        Parameters
        ----------
        tensor : any tensor, the same shape in every process.

        Returns
        -------
        the tensor itself.
        """

    @abstractmethod
    def all_max(self, tensor: torch.Tensor) -> torch.Tensor:
        """The elementwise maximum of `tensor` over the processes, in place.

        Parameters
        ----------
        tensor : any tensor, the same shape in every process.

        Returns
        -------
        the tensor itself.
        """

    @abstractmethod
    def all_min(self, tensor: torch.Tensor) -> torch.Tensor:
        """The elementwise minimum of `tensor` over the processes, in place.

        Parameters
        ----------
        tensor : any tensor, the same shape in every process.

        Returns
        -------
        the tensor itself.
        """

    @abstractmethod
    def share(self, count: int) -> tuple[int, int]:
        """The items (such as test batches) that this process takes.

        The processes' shares are contiguous and cover all of them in order.

        Parameters
        ----------
        count : items.

        Returns
        -------
        tuple (first, last), the range [first, last) of this process.
        """

    @abstractmethod
    def gather_objects(self, value: Any) -> list[Any] | None:
        """Every process's `value`, in process order, in the first process.

        Parameters
        ----------
        value : something small and picklable.

        Returns
        -------
        list of the values in the first process; None in the others.
        """

    @abstractmethod
    def take_bytes(self) -> tuple[int, int]:
        """Bytes this process sent to others since the last call.

        Returns
        -------
        tuple (mixing bytes, collective bytes).
        """

    @abstractmethod
    def clients_trainer(self, trainer: Any) -> Any:
        """A trainer for rows of any nodes (a centralized round's sampled clients).

        It has the trainers' `train(params, nodes, ...)`: each process trains the rows of the
        nodes it holds, and every process ends with all rows and losses.

        Parameters
        ----------
        trainer : the run's trainer.

        Returns
        -------
        a trainer.
        """


class LocalComm(Comm):
    """All nodes live in this process; mixing is one matrix product per parameter block.

    `mixing` chooses the layout of mixing operators: "dense" (a dense [N, N] matmul), "sparse"
    (CSR times dense, column tiles on CPU), or "auto" (`sparse_for`).
    """

    rank = 0  # this process among `world` (p2pfl.scale.distributed)
    world = 1

    def __init__(self, device: torch.device, dtype: torch.dtype, mixing: str = "auto") -> None:
        if mixing not in LAYOUTS:
            raise ValueError(f"mixing must be one of {LAYOUTS}, got {mixing!r}")
        self.device = device
        self.dtype = dtype
        self.mixing = mixing
        self._scratch = torch.empty(0, device=device, dtype=dtype)

    def sparse_for(self, n: int, nnz: int) -> bool:
        """Whether an [n, n] mixing operator with `nnz` nonzeros is kept sparse (CSR).

        "auto": sparse when n >= SPARSE_MIN_NODES and nnz <= SPARSE_MAX_DENSITY * n^2 (measured
        on a 2-core CPU: see docs/performance.md, "Mixing").

        Parameters
        ----------
        n : nodes.
        nnz : nonzeros of the operator.

        Returns
        -------
        bool.
        """
        if self.mixing != "auto":
            return self.mixing == "sparse"
        return n >= SPARSE_MIN_NODES and nnz <= SPARSE_MAX_DENSITY * n * n

    def matrix(self, W: Operand, dtype: torch.dtype | None = None) -> torch.Tensor:
        """W on the run's device, dense or sparse CSR as `sparse_for` picks for it.

        Under "auto" a torch tensor keeps its layout (it was chosen already; counting its nonzeros
        would sync the device).

        Parameters
        ----------
        W : [N, N] numpy, scipy.sparse or torch; W[j, i] = share of i's row sent to j.
        dtype : the operator's dtype (default: the run's).

        Returns
        -------
        [N, N] dense or CSR tensor.
        """
        if self.mixing != "auto":
            sparse = self.mixing == "sparse"
        elif isinstance(W, torch.Tensor):
            sparse = W.layout == torch.sparse_csr
        else:
            sparse = self.sparse_for(W.shape[0], _nnz(W))
        with warnings.catch_warnings():  # torch calls CSR "beta"; CSR x dense is long stable
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            T = _to_torch(W)
            if sparse and T.layout != torch.sparse_csr:
                T = T.to_sparse_csr()
        if not sparse and T.layout == torch.sparse_csr:
            T = T.to_dense()
        return T.to(device=self.device, dtype=dtype or self.dtype)

    def mix(self, W: torch.Tensor, params: Params, steps: int = 1) -> None:
        """X <- W^steps @ X for every block [N, *shape], in place, as `steps` successive products.

        Each product runs over column tiles of the block into a reused scratch tile, then copies
        it back, so X is read and written once per product and no buffer larger than a tile is
        allocated.

        Parameters
        ----------
        W : [N, N], dense or CSR (from `matrix`); W[j, i] = share of i's row sent to j.
        params : name -> [N, *shape], changed in place.
        steps : products.
        """
        n = W.shape[0]
        width = tile_width(n, max(block[0].numel() for block in params.values()), self.device,
                           self._scratch.element_size())
        if self._scratch.numel() < n * width:  # reused: fresh large buffers page-fault
            self._scratch = torch.empty(n * width, device=self.device, dtype=self.dtype)
        sparse = W.layout == torch.sparse_csr
        for _ in range(steps):
            for block in params.values():
                flat = block.view(n, -1)
                large = flat.numel() >= INT32_ELEMENTS  # a view of it crashes CSR x dense
                for start in range(0, flat.shape[1], width):
                    cols = flat[:, start:start + width]
                    out = self._scratch[:cols.numel()].view_as(cols)
                    if sparse:  # CSR x dense; beta=0 ignores the scratch's old contents
                        torch.addmm(out, W, cols.contiguous() if large else cols, beta=0,
                                    out=out)
                    else:
                        torch.mm(W, cols, out=out)
                    cols.copy_(out)

    def product(self, W: torch.Tensor, params: Params, out: Params, add: bool = False) -> Params:
        n = W.shape[0]
        for k, v in params.items():
            flat, source = out[k].view(n, -1), v.reshape(n, -1)
            if W.layout != torch.sparse_csr or source.numel() < INT32_ELEMENTS:
                torch.addmm(flat, W, source, beta=1 if add else 0, out=flat)
                continue
            width = tile_width(n, source.shape[1], self.device, source.element_size())
            for start in range(0, source.shape[1], width):
                tile = flat[:, start:start + width]
                tile.copy_(torch.addmm(tile.contiguous(), W, source[:, start:start + width]
                                       .contiguous(), beta=1 if add else 0))
        return out

    def weighted_sum(self, params: Params, weights: torch.Tensor) -> Params:
        """sum_r weights[r] * params[r] for every block.

        Parameters
        ----------
        params : name -> [r, *shape].
        weights : [r].

        Returns
        -------
        Params, name -> [*shape].
        """
        return {k: torch.tensordot(weights.to(v.dtype), v, dims=1) for k, v in params.items()}

    def node_sum(self, params: Params, weights: torch.Tensor) -> Params:
        return self.weighted_sum(params, weights)

    def all_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def all_max(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def all_min(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def share(self, count: int) -> tuple[int, int]:
        return 0, count

    def gather_objects(self, value: Any) -> list[Any] | None:
        return [value]

    def take_bytes(self) -> tuple[int, int]:
        return 0, 0

    def clients_trainer(self, trainer: Any) -> Any:
        return trainer
