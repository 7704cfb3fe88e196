"""Evaluation of the average model and of every node's own model, and consensus distance."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from p2pfl.core.models import StackedForward
from p2pfl.core.population import Params

DISTANCE_BYTES = 64 << 20  # squared_distance: bytes of the rows whose differences are taken at once


@torch.no_grad()
def evaluate_sums(forward: StackedForward, models: Params, x: torch.Tensor, y: torch.Tensor,
                  batch_size: int, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct predictions and summed cross-entropy of each of c stacked models on the same samples.

    Parameters
    ----------
    forward : the stacked forward.
    models : name -> [c, *shape].
    x : [S, *input_shape] samples.
    y : [S] labels.
    batch_size : samples per batch, from the first sample.
    chunk_size : models evaluated at a time.

    Returns
    -------
    tuple (correct [c] float32, loss sum [c] float64).
    """
    c = next(iter(models.values())).shape[0]
    correct = torch.zeros(c, device=x.device)
    loss = torch.zeros(c, device=x.device, dtype=torch.float64)
    for start in range(0, c, chunk_size):
        rows = slice(start, min(start + chunk_size, c))
        chunk = {k: v[rows] for k, v in models.items()}
        n = rows.stop - rows.start
        for s in range(0, len(y), batch_size):
            xb, yb = x[s:s + batch_size], y[s:s + batch_size]
            logits = forward(chunk, xb.expand(n, *xb.shape))
            correct[rows] += (logits.argmax(-1) == yb).sum(dim=1)
            ce = F.cross_entropy(logits.flatten(0, 1), yb.repeat(n), reduction="none")
            loss[rows] += ce.view(n, -1).sum(dim=1).double()
    return correct, loss


def evaluate(forward: StackedForward, models: Params, x: torch.Tensor, y: torch.Tensor,
             batch_size: int, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Accuracy and mean cross-entropy of each of c stacked models on the same samples.

    Parameters
    ----------
    forward : the stacked forward.
    models : name -> [c, *shape].
    x : [S, *input_shape] samples.
    y : [S] labels.
    batch_size : samples per batch.
    chunk_size : models evaluated at a time.

    Returns
    -------
    tuple (acc [c], loss [c]).
    """
    correct, loss = evaluate_sums(forward, models, x, y, batch_size, chunk_size)
    return correct / len(y), loss / len(y)


@torch.no_grad()
def evaluate_own(forward: StackedForward, models: Params, x: torch.Tensor, y: torch.Tensor,
                 rows: Sequence[np.ndarray], batch_size: int, chunk_size: int,
                 batch_statistics: bool = False) -> torch.Tensor:
    """Accuracy of each of c stacked models on its own samples: model r on x[rows[r]].

    Shorter lists are padded and masked. With `batch_statistics` (a forward that normalises over
    the batch) only models with as many samples share a chunk, so no batch holds padding.

    Parameters
    ----------
    forward : the stacked forward.
    models : name -> [c, *shape].
    x : [S, *input_shape] samples.
    y : [S] labels.
    rows : c index arrays into x (any lengths, none empty).
    batch_size : samples per model per batch.
    chunk_size : models at a time.
    batch_statistics : whether the forward normalises over the batch.

    Returns
    -------
    acc [c] float32 tensor.
    """
    c = len(rows)
    correct = torch.zeros(c, device=x.device)
    sizes = torch.as_tensor([len(r) for r in rows], device=x.device)
    groups: list[slice | np.ndarray] = [slice(s, min(s + chunk_size, c))
                                        for s in range(0, c, chunk_size)]
    if batch_statistics:
        lengths = np.array([len(r) for r in rows])
        groups = [same[s:s + chunk_size] for size in np.unique(lengths)
                  for same in [np.flatnonzero(lengths == size)]
                  for s in range(0, len(same), chunk_size)]
    for group in groups:
        part = [rows[i] for i in range(c)[group]] if isinstance(group, slice) else [
            rows[i] for i in group]
        at = group if isinstance(group, slice) else torch.as_tensor(group, device=x.device)
        longest = max(len(r) for r in part)
        padded = np.zeros((len(part), longest), dtype=np.int64)
        for j, r in enumerate(part):
            padded[j, :len(r)] = r
        idx = torch.as_tensor(padded, device=x.device)
        valid = torch.arange(longest, device=x.device) < sizes[at][:, None]
        chunk = {k: v[at] for k, v in models.items()}
        for s in range(0, longest, batch_size):
            ib = idx[:, s:s + batch_size]
            xb = x.index_select(0, ib.flatten()).view(*ib.shape, *x.shape[1:])
            hit = (forward(chunk, xb).argmax(-1) == y[ib]) & valid[:, s:s + batch_size]
            correct[at] += hit.sum(dim=1)
    return correct / sizes


def squared_distance(models: Params, average: Params) -> torch.Tensor:
    """sum_i ||x_i - x_bar||^2 over all parameters.

    Over all N nodes and divided by N, it is the consensus distance.

    Parameters
    ----------
    models : name -> [m, *shape].
    average : name -> [*shape].

    Returns
    -------
    float64 0-dim tensor (float64 accumulation, no float64 copy; the differences are taken
    DISTANCE_BYTES of rows at a time, so no temporary as large as the population is made).
    """
    total = torch.zeros((), dtype=torch.float64, device=next(iter(average.values())).device)
    for k, v in models.items():
        rows = max(1, DISTANCE_BYTES // max(1, v[:1].numel() * v.element_size()))
        for part in v.split(rows):
            total += torch.linalg.vector_norm(part - average[k], dtype=torch.float64).square()
    return total
