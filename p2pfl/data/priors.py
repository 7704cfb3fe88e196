"""Class priors and the slot-by-slot sampling of the equal-size label-skew partitions
(`dirichlet_prior`, `pathological` in p2pfl.data.partition): node i draws a class prior, then each
of its n // N slots draws a class from it and takes a random unused sample of that class; an
exhausted class is removed from all priors, which are renormalised (a prior left all zero is
replaced by the remaining classes' relative frequencies)."""

from __future__ import annotations

import numpy as np


def dirichlet_priors(
    num_classes: int, num_nodes: int, alpha: float, rng: np.random.Generator
) -> np.ndarray:
    """Class priors with rows ~ Dir(alpha); one-hot if alpha == 0.

    Parameters
    ----------
    num_classes : C.
    num_nodes : N.
    alpha : Dirichlet concentration, a finite number >= 0 (0: classes dealt round-robin).
    rng : numpy Generator.

    Returns
    -------
    float64 [N, C] array (a row underflowed to NaN becomes 0).

    Raises
    ------
    ValueError
        unless alpha is finite and >= 0.
    """
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"dirichlet alpha must be a finite number >= 0, got {alpha}")
    if alpha == 0:
        # Deal classes round-robin in random order, then shuffle which node gets which.
        classes = rng.permutation(np.resize(rng.permutation(num_classes), num_nodes))
        return np.eye(num_classes)[classes]
    priors = rng.dirichlet(np.full(num_classes, float(alpha)), size=num_nodes)
    # Tiny alpha can underflow a whole row; draw_counts then falls back to class frequencies.
    return np.nan_to_num(priors, nan=0.0)


def pathological_priors(
    num_classes: int, num_nodes: int, classes_per_node: int, rng: np.random.Generator
) -> np.ndarray:
    """Class priors: 1/k on k random distinct classes per row.

    Parameters
    ----------
    num_classes : C.
    num_nodes : N.
    classes_per_node : k, in [1, C].
    rng : numpy Generator.

    Returns
    -------
    float64 [N, C] array.

    Raises
    ------
    ValueError
        unless 1 <= k <= C.
    """
    if not 1 <= classes_per_node <= num_classes:
        raise ValueError(
            f"classes_per_node must be in [1, {num_classes}] (number of classes), "
            f"got {classes_per_node}"
        )
    chosen = np.argsort(rng.random((num_nodes, num_classes)), axis=1)[:, :classes_per_node]
    priors = np.zeros((num_nodes, num_classes))
    np.put_along_axis(priors, chosen, 1.0 / classes_per_node, axis=1)
    return priors


def draw_counts(
    prior: np.ndarray, available: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Per-class sample counts for one node with `n` slots; never exceeds `available`.

    Exact vectorised form of the slot-by-slot rule: drawing from the prior renormalised over the
    non-exhausted classes is the same as drawing from the prior and discarding draws of exhausted
    classes. So draw all missing slots with one multinomial, clip each class to what is left
    (every clipped class is now exhausted), and redraw the shortfall from the prior restricted to
    the remaining classes; at most C rounds.

    Parameters
    ----------
    prior : [C] class prior of the node.
    available : int64 [C] unused samples of each class.
    n : slots.
    rng : numpy Generator.

    Returns
    -------
    int64 [C] array summing to n.
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


def sample_by_priors(
    class_of: np.ndarray, priors: np.ndarray, per_node: int, rng: np.random.Generator
) -> np.ndarray:
    """Indices of each node's samples drawn by class priors.

    Node by node, counts from `draw_counts`, then the next unused samples of each class from a
    random per-class order; each row shuffled.

    Parameters
    ----------
    class_of : [n] class index of each sample.
    priors : [N, C] class prior of each node.
    per_node : samples per node.
    rng : numpy Generator.

    Returns
    -------
    int64 [N, per_node] array.
    """
    num_nodes, num_classes = priors.shape
    order = rng.permutation(len(class_of))
    by_class = order[np.argsort(class_of[order], kind="stable")]
    available = np.bincount(class_of, minlength=num_classes).astype(np.int64)
    start = np.concatenate(([0], np.cumsum(available)[:-1]))  # next unused position per class
    rows = np.empty((num_nodes, per_node), dtype=np.int64)
    for i in range(num_nodes):
        counts = draw_counts(priors[i], available, per_node, rng)
        row = np.concatenate([by_class[s : s + k] for s, k in zip(start, counts, strict=True)])
        rows[i] = rng.permutation(row)
        start += counts
        available -= counts
    return rows
