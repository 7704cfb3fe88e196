"""Weighted sums of payload rows added to model rows, one sparse product per tensor, each row's
result a function of its own messages alone.

`add_rows_of(out, rows, slots, weights, pool)` adds, for every message e,
weights[e] * pool[slots[e]] to out[rows[e]]: one CSR [rows x slots] x pool product per tensor,
which reads only the slots named, each payload once per product (a payload sent to several rows
of the batch is read once for them all: O(messages x row size) with cache reuse).

The exact windows of the event engine need a row's result to be the same, bit for bit, whatever
other rows share its product. The CPU CSR x dense kernel computes each output row from its own
entries, in their order, so it is; what can change a row's bits is the width of the dense
operand (a kernel chosen by the number of columns). So a tensor is always split into the same
column tiles, a function of its shape alone (`column_tiles`), never of the batch or of the
pool's size; the 32-bit offsets of the sparse kernels are respected by cutting the rows into
chunks and reading, where the pool is too large or a tensor is in several tiles, a compact copy
of the chunk's payloads (`tests/test_async.py` checks rows alone against rows in batches on the
CPU, with the pool too large and in tiles). On CUDA the product is deterministic from run to run;
that its rows are independent of their batch is not checked.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import torch

from p2pfl.core.mixing import INT32_ELEMENTS
from p2pfl.core.population import Params, row_scale

TILE_COLUMNS = 2**20  # the widest column tile of a tensor (its rows of 1,024 operands per chunk)


def column_tiles(width: int) -> list[slice]:
    """The column tiles of a tensor `width` wide: one, or near-equal tiles of at most
    TILE_COLUMNS (a function of the width alone).

    Parameters
    ----------
    width : columns (elements of a row).

    Returns
    -------
    list of slices covering 0..width.
    """
    count = -(-width // TILE_COLUMNS)
    edges = np.linspace(0, width, count + 1).round().astype(int).tolist()
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _chunks(rows: np.ndarray, cap: int) -> Iterator[slice]:
    """Consecutive runs of messages (sorted by row) holding whole rows, at most `cap` messages
    each, their rows spanning fewer than `cap`; a row with more messages than `cap` is split into
    runs of its own."""
    start, m = 0, len(rows)
    while start < m:
        end = min(start + cap, m, int(np.searchsorted(rows, rows[start] + cap)))  # rows < cap
        if end < m and rows[end] == rows[end - 1]:  # a row would be cut: end before it
            first = int(np.searchsorted(rows, rows[end], side="left"))
            end = first if first > start else end  # a row longer than cap: its own runs
        yield slice(start, end)
        start = end


def add_rows_of(out: Params, rows: np.ndarray, slots: np.ndarray, weights: np.ndarray,
                pool: Params, overwrite: bool = False) -> None:
    """out[k][rows[e]] += weights[e] * pool[k][slots[e]], for every message e at once (module
    docstring); a row adds its messages in the order given.

    Parameters
    ----------
    out : name -> [r, *shape], contiguous, the pool's dtype and device; added to in place (on
        the CPU it may be rows of the pool other than `slots`).
    rows : int64 [M], rows of `out`.
    slots : int64 [M], rows of the pool.
    weights : float64 [M].
    pool : name -> [S, *shape].
    overwrite : out[k][r] is the sum alone, its old value not read (every row of `out` from
        the first to the last of `rows` must be in `rows`).
    """
    if not len(rows):
        return
    order = np.argsort(rows, kind="stable")  # a row's messages in the order given
    rows, slots, weights = rows[order], slots[order], weights[order]
    count = len(next(iter(out.values())))
    beta = 0.0 if overwrite else 1.0
    with warnings.catch_warnings():  # torch calls CSR "beta"; CSR x dense is stable
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in")
        for k, v in pool.items():
            source, target = v.view(len(v), -1), out[k].view(count, -1)
            if not source.shape[1]:  # a tensor without elements: nothing to add
                continue
            for cols in column_tiles(source.shape[1]):
                width = cols.stop - cols.start
                cap = max(1, (INT32_ELEMENTS - 1) // width)
                parts = list(_chunks(rows, cap))
                split = any(rows[p.start] == rows[p.start - 1] for p in parts[1:])
                if split and beta == 0:  # a row in two products: the second adds to the first
                    target[int(rows[0]):int(rows[-1]) + 1, cols] = 0
                for part in parts:
                    _add_chunk(target[:, cols], rows[part], slots[part], weights[part],
                               source[:, cols], cap, 1.0 if split else beta)


def _add_chunk(target: torch.Tensor, rows: np.ndarray, slots: np.ndarray,
               weights: np.ndarray, source: torch.Tensor, cap: int, beta: float) -> None:
    """target[rows[e]] = beta * target[rows[e]] + weights[e] * source[slots[e]] for a chunk
    (rows sorted, at most `cap` of them and of messages; beta 0: the old rows not read): one
    CSR product over the chunk's rows, reading the whole source or, where it has more than `cap`
    rows or is a column tile, a compact copy of the chunk's payloads."""
    lo, hi = int(rows[0]), int(rows[-1]) + 1
    if len(source) > cap or not source.is_contiguous():
        used, slots = np.unique(slots, return_inverse=True)
        source = source.index_select(0, torch.as_tensor(used, device=source.device))
    device = source.device
    crow = torch.as_tensor(np.concatenate([[0], np.cumsum(np.bincount(rows - lo,
                                                                      minlength=hi - lo))]),
                           device=device)
    W = torch.sparse_csr_tensor(crow, torch.as_tensor(slots, device=device),
                                torch.as_tensor(weights, device=device, dtype=source.dtype),
                                size=(hi - lo, len(source)), check_invariants=False)
    block = target[lo:hi]
    if block.is_contiguous() and source.is_contiguous():
        torch.addmm(block, W, source, beta=beta, out=block)
        return
    block.copy_(torch.addmm(block.contiguous(), W, source.contiguous(), beta=beta))


def scaled_rows(source: Params, rows: torch.Tensor, scale: torch.Tensor) -> Params:
    """scale[e] * source[k][rows[e]] for every k, in one pass over each row: on CPU a diagonal
    CSR [m x rows of source] product (the gather and the product at once; each value the one
    rounded product), else a gather then the product.

    Parameters
    ----------
    source : name -> [n, *shape].
    rows : int64 [m], rows of `source`, on its device.
    scale : [m], the source's dtype.

    Returns
    -------
    name -> [m, *shape], new tensors.
    """
    m, out = len(rows), {}
    for k, v in source.items():
        flat = v.view(len(v), -1)
        if v.device.type != "cpu" or flat.numel() >= INT32_ELEMENTS or not m * flat.shape[1]:
            out[k] = v.index_select(0, rows).mul_(row_scale(scale, v))
            continue
        row = v.new_empty((m, *v.shape[1:]))
        with warnings.catch_warnings():  # torch calls CSR "beta"; CSR x dense is stable
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in")
            W = torch.sparse_csr_tensor(torch.arange(m + 1), rows, scale, size=(m, len(v)),
                                        check_invariants=False)
            torch.addmm(row.view(m, -1), W, flat, beta=0, out=row.view(m, -1))
        out[k] = row
    return out
