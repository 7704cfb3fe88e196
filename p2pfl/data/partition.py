"""Split a labelled training set among nodes: IID, Dirichlet(alpha) or pathological Pat(k).

All methods give every node the same number of samples, `len(labels) // num_nodes`, and never give
one sample to two nodes. Randomness comes only from `numpy.random.default_rng(seed)`.
"""

from __future__ import annotations

import numpy as np

PARTITIONS = ("iid", "dirichlet", "pathological")


def partition(
    labels: np.ndarray,
    num_nodes: int,
    method: str,
    *,
    alpha: float = 0.3,
    classes_per_node: int = 2,
    seed: int = 0,
) -> np.ndarray:
    """Split sample indices among nodes -> int64 [num_nodes, len(labels) // num_nodes].

    Row i holds the indices (into `labels`, shuffled) of node i's local dataset; each index appears
    at most once overall; `len(labels) % num_nodes` samples are left unused.

    * `iid`: random permutation, cut into equal parts.
    * `dirichlet` (Hsu et al. 2019): node i draws a class prior q_i ~ Dir(alpha, ..., alpha);
      `alpha = 0` gives each node a single class, classes spread over nodes as evenly as possible.
    * `pathological`: node i draws `classes_per_node` distinct classes uniformly at random and
      gives each of them prior 1 / classes_per_node.

    For the non-IID methods each sample slot of node i draws a class from q_i and takes a random
    unused sample of it; an exhausted class is removed from all priors, which are renormalised
    (a prior left all zero is replaced by the remaining classes' relative frequencies). See
    `_draw_counts` for the exact vectorised form. Classes are the distinct values of `labels`.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if method not in PARTITIONS:
        raise ValueError(f"unknown partition {method!r}; allowed: {', '.join(PARTITIONS)}")
    if not 1 <= num_nodes <= len(labels):
        raise ValueError(
            f"num_nodes must be in [1, {len(labels)}] (number of samples), got {num_nodes}"
        )
    rng = np.random.default_rng(seed)
    per_node = len(labels) // num_nodes
    if method == "iid":
        order = rng.permutation(len(labels)).astype(np.int64)
        return order[: num_nodes * per_node].reshape(num_nodes, per_node)
    classes, class_of = np.unique(labels, return_inverse=True)
    if method == "dirichlet":
        priors = _dirichlet_priors(len(classes), num_nodes, alpha, rng)
    else:
        priors = _pathological_priors(len(classes), num_nodes, classes_per_node, rng)
    return _sample_by_priors(class_of.reshape(-1), priors, per_node, rng)


def _dirichlet_priors(
    num_classes: int, num_nodes: int, alpha: float, rng: np.random.Generator
) -> np.ndarray:
    """Class priors float64 [num_nodes, num_classes], rows ~ Dir(alpha); one-hot if alpha == 0."""
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"dirichlet alpha must be a finite number >= 0, got {alpha}")
    if alpha == 0:
        # Deal classes round-robin in random order, then shuffle which node gets which.
        classes = rng.permutation(np.resize(rng.permutation(num_classes), num_nodes))
        return np.eye(num_classes)[classes]
    priors = rng.dirichlet(np.full(num_classes, float(alpha)), size=num_nodes)
    # Tiny alpha can underflow a whole row; _draw_counts then falls back to class frequencies.
    return np.nan_to_num(priors, nan=0.0)


def _pathological_priors(
    num_classes: int, num_nodes: int, classes_per_node: int, rng: np.random.Generator
) -> np.ndarray:
    """Class priors float64 [num_nodes, num_classes]: 1/k on k random distinct classes per row."""
    if not 1 <= classes_per_node <= num_classes:
        raise ValueError(
            f"classes_per_node must be in [1, {num_classes}] (number of classes), "
            f"got {classes_per_node}"
        )
    chosen = np.argsort(rng.random((num_nodes, num_classes)), axis=1)[:, :classes_per_node]
    priors = np.zeros((num_nodes, num_classes))
    np.put_along_axis(priors, chosen, 1.0 / classes_per_node, axis=1)
    return priors


def _draw_counts(
    prior: np.ndarray, available: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Per-class sample counts int64 [C] for one node with `n` slots; never exceeds `available`.

    Exact vectorised form of the slot-by-slot rule: drawing from the prior renormalised over the
    non-exhausted classes is the same as drawing from the prior and discarding draws of exhausted
    classes. So draw all missing slots with one multinomial, clip each class to what is left
    (every clipped class is now exhausted), and redraw the shortfall from the prior restricted to
    the remaining classes; at most C rounds.
    """
    counts = np.zeros_like(available)
    while (missing := n - counts.sum()) > 0:
        left = available - counts
        p = np.where(left > 0, prior, 0.0)
        if p.sum() <= 0:
            p = left.astype(np.float64)
        draw = rng.multinomial(missing, p / p.sum())
        counts += np.minimum(draw, left)
    return counts


def _sample_by_priors(
    class_of: np.ndarray, priors: np.ndarray, per_node: int, rng: np.random.Generator
) -> np.ndarray:
    """Indices int64 [num_nodes, per_node]: node by node, counts from `_draw_counts`, then the
    next unused samples of each class from a random per-class order; each row shuffled."""
    num_nodes, num_classes = priors.shape
    order = rng.permutation(len(class_of))
    by_class = order[np.argsort(class_of[order], kind="stable")]
    available = np.bincount(class_of, minlength=num_classes).astype(np.int64)
    start = np.concatenate(([0], np.cumsum(available)[:-1]))  # next unused position per class
    rows = np.empty((num_nodes, per_node), dtype=np.int64)
    for i in range(num_nodes):
        counts = _draw_counts(priors[i], available, per_node, rng)
        row = np.concatenate([by_class[s : s + k] for s, k in zip(start, counts, strict=True)])
        rows[i] = rng.permutation(row)
        start += counts
        available -= counts
    return rows
