"""The N node models as one vectorized population.

Each parameter of all nodes is one contiguous block `[N, *shape]`; the blocks are carved,
parameter-major, from a single flat buffer, so a whole population is saved, restored or copied as
one tensor, and mixing is one matrix product per block.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

Params = dict[str, torch.Tensor]  # name -> [rows, *shape]
ROW_BLOCK = 64  # rows gathered at once by index (copy_rows, add_rows): bounded temporaries
BLOCK_BYTES = 8 << 20  # CPU: at most this many bytes of a tensor's rows gathered at once


class Population:
    """Stacked parameters of `num_nodes` copies of `model`, all starting from its weights: the
    nodes first .. first + num_nodes - 1 of a network of `total` (default num_nodes) nodes. A
    process of a distributed run holds its block of nodes (p2pfl.scale.distributed); rows are
    addressed by node id."""

    def __init__(self, model: nn.Module, num_nodes: int, device: torch.device,
                 dtype: torch.dtype, first: int = 0, total: int | None = None) -> None:
        named = [(name, p.detach()) for name, p in model.named_parameters()]
        self.names = [name for name, _ in named]
        self.shapes = {name: tuple(p.shape) for name, p in named}
        self.num_nodes = num_nodes
        self.first = first
        self.total = num_nodes if total is None else total
        self.num_params = sum(p.numel() for _, p in named)
        self.flat = torch.empty(num_nodes * self.num_params, device=device, dtype=dtype)
        self.params: Params = {}
        offset = 0
        for name, p in named:
            size = num_nodes * p.numel()
            block = self.flat[offset:offset + size].view(num_nodes, *p.shape)
            block.copy_(p.to(device=device, dtype=dtype).expand_as(block))
            self.params[name] = block
            offset += size

    def blocks(self) -> list[torch.Tensor]:
        """The parameter blocks as 2-D views [N, numel]."""
        return [p.view(self.num_nodes, -1) for p in self.params.values()]

    def holds(self, nodes: torch.Tensor) -> torch.Tensor:
        """bool [m]: which of `nodes` (ids) are held here."""
        return (nodes >= self.first) & (nodes < self.first + self.num_nodes)

    def rows(self, nodes: torch.Tensor) -> Params:
        """Copies of the parameters of `nodes` (node ids held here, int64 [m]):
        name -> [m, *shape]."""
        return {name: p[nodes - self.first] for name, p in self.params.items()}

    def write(self, nodes: torch.Tensor, rows: Params) -> None:
        """Set the parameters of `nodes` to `rows`.

        Parameters
        ----------
        nodes : int64 [m], distinct node ids held here.
        rows : name -> [m, *shape].
        """
        for name, p in self.params.items():
            p.index_copy_(0, nodes - self.first, rows[name])

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The rows held here: {"flat": [num_nodes * num_params]}, parameter-major."""
        return {"flat": self.flat.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore the rows held here from `state_dict()`'s layout, either of these rows or of
        the whole network (`total` rows, as a single process's checkpoint holds it)."""
        flat = state["flat"]
        if flat.numel() == self.flat.numel():
            self.flat.copy_(flat)
        elif flat.numel() == self.total * self.num_params:
            self.load_rows(0, self.total, flat)
        else:
            raise RuntimeError(f"a population of {flat.numel()} values does not fit "
                               f"{self.total} nodes of {self.num_params} parameters")

    def load_rows(self, first: int, last: int, flat: torch.Tensor) -> None:
        """Set the rows held here that are among nodes first .. last - 1 from a checkpoint shard.

        Parameters
        ----------
        first, last : the shard's nodes, first .. last - 1.
        flat : the parameter-major buffer of exactly those nodes.

        Raises
        ------
        RuntimeError
            when `flat` is not (last - first) rows of the model's parameters.
        """
        count = last - first
        if flat.numel() != count * self.num_params:
            raise RuntimeError(f"{flat.numel()} values are not {count} rows of "
                               f"{self.num_params} parameters")
        lo, hi = max(first, self.first), min(last, self.first + self.num_nodes)
        offset = 0
        for p in self.params.values():
            width = p[0].numel()
            if lo < hi:
                rows = flat[offset:offset + count * width].view(count, width)
                p.view(self.num_nodes, width)[lo - self.first:hi - self.first].copy_(
                    rows[lo - first:hi - first])
            offset += count * width


def broadcast(model: Params, rows: int) -> Params:
    """`rows` fresh copies of one model as stacked params.

    Parameters
    ----------
    model : name -> [*shape].
    rows : copies.

    Returns
    -------
    Params, name -> [rows, *shape] (new memory).
    """
    return {k: v.unsqueeze(0).expand(rows, *v.shape).clone() for k, v in model.items()}


def per_node_sq_norm(tensors: Params) -> torch.Tensor:
    """Squared L2 norm of each row over all tensors jointly.

    Parameters
    ----------
    tensors : name -> [rows, *shape].

    Returns
    -------
    [rows] tensor.
    """
    return sum(torch.linalg.vector_norm(t.flatten(1), dim=1).square() for t in tensors.values())


def row_scale(scale: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Reshape a per-row vector to broadcast against `like`.

    Parameters
    ----------
    scale : [rows].
    like : [rows, ...].

    Returns
    -------
    [rows, 1, ..., 1] view of `scale`.
    """
    return scale.view(-1, *([1] * (like.dim() - 1)))


def row_block(params: Params) -> int:
    """Rows of `params` to gather at once by index: `ROW_BLOCK`; on CPU fewer, so that a block
    of the largest tensor's rows holds at most `BLOCK_BYTES` (it stays in cache).

    Parameters
    ----------
    params : name -> [rows, *shape].

    Returns
    -------
    int >= 1.
    """
    v = next(iter(params.values()))
    if v.device.type != "cpu":
        return ROW_BLOCK
    largest = max(t[0].numel() * t.element_size() for t in params.values())
    return max(1, min(ROW_BLOCK, BLOCK_BYTES // max(largest, 1)))


def copy_rows(dst: Params, dst_rows: torch.Tensor, src: Params, src_rows: torch.Tensor) -> None:
    """Copy rows by index, `row_block` rows gathered at a time: dst[k][dst_rows[e]] =
    src[k][src_rows[e]].

    Parameters
    ----------
    dst : name -> [rows, *shape], written in place.
    dst_rows : int64 [m], distinct rows of `dst`.
    src : name -> [rows', *shape] (any dtype; cast to dst's).
    src_rows : int64 [m], rows of `src`.
    """
    block = row_block(dst)
    for start in range(0, len(dst_rows), block):
        to, of = dst_rows[start:start + block], src_rows[start:start + block]
        for k, v in dst.items():
            v.index_copy_(0, to, src[k].index_select(0, of).to(v.dtype))


_INTEGER_OF_SIZE = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # bit views


def same_rows(a: Params, a_rows: torch.Tensor, b: Params, b_rows: torch.Tensor) -> torch.Tensor:
    """Whether rows hold the same bits, `row_block` rows compared at a time: a[k][a_rows[e]]
    and b[k][b_rows[e]] for every k (NaNs and signed zeros compared by their bits, so that a row
    that is the same may be restored from the other exactly).

    Parameters
    ----------
    a : name -> [rows, *shape].
    a_rows : int64 [m], rows of `a`.
    b : name -> [rows', *shape], the same names, shapes and dtypes.
    b_rows : int64 [m], rows of `b`.

    Returns
    -------
    bool tensor [m], on `a_rows`' device.
    """
    same = torch.ones(len(a_rows), dtype=torch.bool, device=a_rows.device)
    block = row_block(a) if len(a_rows) else 1  # an empty `a` has no row to size a block
    for start in range(0, len(a_rows), block):
        i, j = a_rows[start:start + block], b_rows[start:start + block]
        for k, v in a.items():
            x, y = v.index_select(0, i), b[k].index_select(0, j)
            bits = _INTEGER_OF_SIZE[x.element_size()]
            same[start:start + len(i)] &= (x.view(bits) == y.view(bits)).flatten(1).all(1)
    return same


def add_rows(params: Params, rows: np.ndarray, coef: torch.Tensor,
             read: Callable[[slice], Params]) -> None:
    """Add scaled rows in place by index, `row_block` at a time: params[k][rows[e]] +=
    coef[e] * read(block)[k][e - block.start].

    Parameters
    ----------
    params : name -> [N, *shape], written in place.
    rows : int64 [m], distinct rows (on the host; distinct, so that the order of the additions
        is fixed on every device).
    coef : [m], in the params' dtype, on their device.
    read : the addends of positions `block` (a slice of 0..m-1): name -> [len, *shape].
    """
    if len(rows) == 1:  # one row: in place, the same product then sum as for many rows
        added = read(slice(0, 1))
        for k, v in params.items():
            v[int(rows[0])].add_(added[k][0] * coef[0])
        return
    block = row_block(params)
    for start in range(0, len(rows), block):
        part = slice(start, start + block)
        index = torch.as_tensor(rows[part], device=coef.device)
        added = read(part)
        for k, v in params.items():
            v.index_add_(0, index, added[k] * row_scale(coef[part], added[k]))
