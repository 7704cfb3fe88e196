"""Neighbour selection: which out-neighbours every node pushes to in one round.

A selector is a function ``select(losses, candidates, k, rng) -> targets``:

* ``losses`` : float array [n] of the nodes' latest training losses, or None (round 0);
* ``candidates`` : an int n (every node may choose any other node of 0..n-1) or a bool
  array [n, n] whose row i marks the nodes i may choose (the diagonal is ignored);
* ``k`` : out-neighbours per node; ``rng`` : the round's numpy Generator;
* ``targets`` : int array [n, k], row i the k distinct out-neighbours of node i.

All nodes are handled at once (no Python loop over nodes). Built-in selectors: ``select_random``
(uniform k-subsets), ``select_loss_based`` (DFedSGPSM-S, docs/algorithms.md: probability
proportional to ``|f_i - f_j|``, drawn without replacement) and ``loss_softmax(temperature)``
(probability proportional to ``exp(|f_i - f_j| / temperature)``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from topologies._common import ParameterError
from topologies.random_graphs import sample_out_neighbours

Selector = Callable[[np.ndarray | None, "int | np.ndarray", int, np.random.Generator], np.ndarray]
_CHUNK = 1 << 22  # entries of one [rows, n] block of keys


def _candidates(candidates: int | np.ndarray, k: int) -> tuple[int, np.ndarray | None]:
    """(n, mask or None); ValueError unless every node has at least k candidates."""
    if isinstance(candidates, np.ndarray):
        n = candidates.shape[0]
        if candidates.shape != (n, n) or candidates.dtype != bool:
            raise ValueError(f"candidates must be a bool array [n, n], got {candidates.dtype} "
                             f"{candidates.shape}")
        mask = candidates & ~np.eye(n, dtype=bool)
        short = np.flatnonzero(mask.sum(axis=1) < k)
        if short.size:
            raise ValueError(f"node {short[0]} has fewer than k={k} candidates")
        return n, mask
    n = int(candidates)
    if not 1 <= k <= n - 1:
        raise ParameterError("k", f"must be between 1 and n - 1 = {n - 1}, got {k}")
    return n, None


def _check_losses(losses: np.ndarray | None, n: int) -> np.ndarray | None:
    if losses is None:
        return None
    losses = np.asarray(losses, dtype=float)
    if losses.shape != (n,):
        raise ValueError(f"losses must be a float array [{n}], got shape {losses.shape}")
    if not np.isfinite(losses).all():
        raise ValueError(f"losses must be finite; node {int(np.argmax(~np.isfinite(losses)))} "
                         "has a non-finite loss")
    return losses


def weighted_choice(weight: Callable[[np.ndarray], np.ndarray], n: int, mask: np.ndarray | None,
                    k: int, rng: np.random.Generator) -> np.ndarray:
    """k distinct candidates per node, drawn with probabilities proportional to weights.

    Row i draws k distinct candidates without replacement, each draw with probability proportional
    to ``weight(rows)[i, j]`` among those left. Exponential keys E_ij / w_ij, smallest first
    (Efraimidis-Spirakis), give exactly this successive sampling. Zero-weight candidates come after
    all positive ones, in uniform random order (the fallback when fewer than k candidates have
    positive weight).

    Parameters
    ----------
    weight : rows -> [len(rows), n] non-negative weights of those rows' candidates.
    n : number of nodes.
    mask : [n, n] bool array of the allowed candidates (no diagonal), or None for all others.
    k : draws per node.
    rng : numpy Generator.

    Returns
    -------
    [n, k] int64 array, row i the targets of node i.
    """
    out = np.empty((n, k), dtype=np.int64)
    step = max(1, _CHUNK // max(n, 1))
    for lo in range(0, n, step):
        rows = np.arange(lo, min(n, lo + step))
        w = weight(rows)
        allowed = (mask[rows] if mask is not None
                   else np.arange(n)[None, :] != rows[:, None])
        expo = rng.exponential(size=w.shape)
        tie = rng.random(w.shape)
        positive = allowed & (w > 0)
        key = np.where(positive, expo / np.where(positive, w, 1.0), 0.0)
        rank_class = np.where(positive, 0, np.where(allowed, 1, 2))
        order = np.lexsort((tie, key, rank_class), axis=1)
        out[rows] = order[:, :k]
    return out


def select_random(losses: np.ndarray | None, candidates: int | np.ndarray, k: int,
                  rng: np.random.Generator) -> np.ndarray:
    """k distinct out-neighbours per node, uniformly among its candidates.

    Parameters
    ----------
    losses : unused (a selector's signature).
    candidates : int n, or [n, n] bool array of allowed candidates (module docstring).
    k : out-neighbours per node.
    rng : numpy Generator.

    Returns
    -------
    [n, k] int64 array, row i the out-neighbours of node i.

    Raises
    ------
    ParameterError
        naming k unless 1 <= k <= n - 1 (candidates an int).
    ValueError
        for a malformed mask or a node with fewer than k candidates.
    """
    n, mask = _candidates(candidates, k)
    if mask is None:
        return sample_out_neighbours(rng, n, k)
    return weighted_choice(lambda rows: np.ones((rows.size, n)), n, mask, k, rng)


def select_loss_based(losses: np.ndarray | None, candidates: int | np.ndarray, k: int,
                      rng: np.random.Generator) -> np.ndarray:
    """DFedSGPSM-S: ``Pr(i picks j) = |f_i - f_j| / sum_l |f_i - f_l|``, k draws.

    The draws are without replacement: uniform when all differences are 0 or losses is None (then
    the same draw as ``select_random``), and once the nodes with a positive difference are used
    up, uniform over the rest.

    Parameters
    ----------
    losses : [n] float array of the nodes' latest losses f, or None.
    candidates : int n, or [n, n] bool array of allowed candidates (module docstring).
    k : out-neighbours per node.
    rng : numpy Generator.

    Returns
    -------
    [n, k] int64 array, row i the out-neighbours of node i.

    Raises
    ------
    ValueError
        when losses are not a finite [n] array (and as in ``select_random``).
    """
    n, mask = _candidates(candidates, k)
    f = _check_losses(losses, n)
    if f is None:
        return select_random(None, candidates, k, rng)
    return weighted_choice(lambda rows: np.abs(f[rows, None] - f[None, :]), n, mask, k, rng)


def loss_softmax(temperature: float = 1.0) -> Selector:
    """Selector with ``Pr(i picks j)`` proportional to ``exp(|f_i - f_j| / temperature)``.

    Drawn without replacement; with losses None, the draw of ``select_random``.

    Parameters
    ----------
    temperature : a positive finite number.

    Returns
    -------
    Selector.

    Raises
    ------
    ParameterError
        naming temperature unless it is a positive finite number.
    """
    try:
        tau = float(temperature)
    except (TypeError, ValueError):
        tau = float("nan")
    if not tau > 0 or not np.isfinite(tau):
        raise ParameterError("temperature", f"must be a positive number, got {temperature!r}")

    def select_loss_softmax(losses: np.ndarray | None, candidates: int | np.ndarray, k: int,
                            rng: np.random.Generator) -> np.ndarray:
        n, mask = _candidates(candidates, k)
        f = _check_losses(losses, n)
        if f is None:
            return select_random(None, candidates, k, rng)

        def weight(rows: np.ndarray) -> np.ndarray:
            logits = np.abs(f[rows, None] - f[None, :]) / tau
            return np.exp(logits - logits.max(axis=1, keepdims=True))

        return weighted_choice(weight, n, mask, k, rng)

    return select_loss_softmax


SELECTIONS = ("random", "loss_based", "loss_softmax")


def get_selector(selection: str | Selector, temperature: float = 1.0) -> Selector:
    """The selector named `selection`, or `selection` itself if callable.

    Parameters
    ----------
    selection : one of SELECTIONS, or a selector.
    temperature : loss_softmax's temperature (unused by the others).

    Returns
    -------
    Selector.

    Raises
    ------
    ParameterError
        naming selection when it is neither a known name nor callable.
    """
    if callable(selection):
        return selection
    if selection == "random":
        return select_random
    if selection == "loss_based":
        return select_loss_based
    if selection == "loss_softmax":
        return loss_softmax(temperature)
    raise ParameterError("selection", f"must be one of {', '.join(SELECTIONS)} or a callable, "
                         f"got {selection!r}")


def check_targets(targets: np.ndarray, n: int, k: int) -> np.ndarray:
    """A selector's result, checked.

    Parameters
    ----------
    targets : what the selector returned.
    n : number of nodes.
    k : out-neighbours per node.

    Returns
    -------
    [n, k] int64 array, targets.

    Raises
    ------
    ValueError
        unless targets is an int array [n, k] whose every row holds k distinct nodes of 0..n-1
        other than its own.
    """
    targets = np.asarray(targets)
    if targets.shape != (n, k) or not np.issubdtype(targets.dtype, np.integer):
        raise ValueError(f"selector must return an int array [{n}, {k}], got {targets.dtype} "
                         f"{targets.shape}")
    targets = targets.astype(np.int64)
    if ((targets < 0) | (targets >= n)).any():
        raise ValueError(f"selector returned a node outside 0..{n - 1}")
    if (targets == np.arange(n)[:, None]).any():
        raise ValueError("selector chose a node as its own out-neighbour")
    ordered = np.sort(targets, axis=1)
    if (ordered[:, 1:] == ordered[:, :-1]).any():
        raise ValueError("selector chose the same out-neighbour twice for one node")
    return targets
