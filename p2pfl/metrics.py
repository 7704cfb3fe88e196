"""Evaluation of the average model and of every node's own model, and consensus distance."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from p2pfl.models import StackedForward
from p2pfl.population import Params


@torch.no_grad()
def evaluate_sums(forward: StackedForward, models: Params, x: torch.Tensor, y: torch.Tensor,
                  batch_size: int, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct predictions and summed cross-entropy of each of c stacked models on the same
    samples, in batches of `batch_size` from the first sample.

    `models` name -> [c, *shape]; x [S, *input_shape]; y [S]. Returns (correct [c] float32,
    loss sum [c] float64).
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

    `models` name -> [c, *shape]; x [S, *input_shape]; y [S]. Returns (acc [c], loss [c]).
    """
    correct, loss = evaluate_sums(forward, models, x, y, batch_size, chunk_size)
    return correct / len(y), loss / len(y)


def squared_distance(models: Params, average: Params) -> torch.Tensor:
    """sum_i ||x_i - x_bar||^2 over all parameters (models [m, ...], average [...]): a float64
    0-dim tensor; over all N nodes and divided by N, it is the consensus distance."""
    return sum((torch.linalg.vector_norm(v - average[k], dtype=torch.float64).square()
                for k, v in models.items()),  # float64 accumulation, no float64 copy
               torch.zeros((), dtype=torch.float64, device=next(iter(average.values())).device))
