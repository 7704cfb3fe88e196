"""STL-FW: a sparse mixing matrix learned from the nodes' class proportions (Le Bars, Bellet,
Tommasi, Vogels, AISTATS 2023).

With Pi the [n, K] class proportions and J = 11^T / n, the neighbourhood heterogeneity of a
mixing matrix W is tau(W) = ||W Pi - J Pi||_F^2 / n: how far each node's neighbourhood-averaged
label distribution is from the global one. STL-FW minimises g(W) = tau(W) + lam ||W - J||_F^2 / n
over the doubly-stochastic matrices (the Birkhoff polytope) by Frank-Wolfe from W = I: each
iteration's linear minimisation is a linear assignment (its solution is a permutation matrix P)
and the step W <- (1 - gamma) W + gamma P takes the exact line search of the quadratic g. One
iteration adds at most one in-neighbour and one out-neighbour to every node, so the number of
iterations bounds the degree.

W is in the row convention of the paper, x <- W x (row i holds what node i receives), which is
this library's column convention too: ``W[j, i]`` is the share of node i's mass sent to j. W is
doubly stochastic but in general not symmetric.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from scipy.optimize import linear_sum_assignment

from topologies._common import ParameterError, check_int
from topologies.cliques import check_counts
from topologies.convert import from_adjacency
from topologies.registry import register

PROPORTION_TOLERANCE = 1e-9  # |row sum - 1| allowed in `proportions`


def check_proportions(proportions: object) -> np.ndarray:
    """Class proportions, checked.

    Parameters
    ----------
    proportions : [n, K] array-like, each node's class proportions.

    Returns
    -------
    [n, K] float64 array, rows summing to 1.

    Raises
    ------
    ParameterError
        naming proportions, unless they are valid counts (``check_counts``) whose rows sum to 1.
    """
    pi = check_counts(proportions, "proportions")
    sums = pi.sum(axis=1)
    off = np.flatnonzero(np.abs(sums - 1) > PROPORTION_TOLERANCE)
    if off.size:
        raise ParameterError("proportions", f"row {off[0]} sums to {sums[off[0]]:.12g}, not 1 "
                             "(pass counts / counts.sum(axis=1, keepdims=True))")
    return pi


def neighborhood_heterogeneity(W: np.ndarray, proportions: np.ndarray) -> float:
    """tau(W) = ||W Pi - J Pi||_F^2 / n: mean squared distance between each node's
    neighbourhood-averaged class proportions (row i of W Pi) and the global proportions.

    Parameters
    ----------
    W : [n, n] mixing matrix, x <- W x.
    proportions : [n, K] class proportions Pi of each node, rows summing to 1.

    Returns
    -------
    float, 0 when every neighbourhood's proportions are the global ones.

    Examples
    --------
    >>> neighborhood_heterogeneity(np.eye(2), np.eye(2))
    0.5
    """
    pi = check_proportions(proportions)
    return float(((np.asarray(W, dtype=float) @ pi - pi.mean(axis=0)) ** 2).sum() / len(pi))


def stl_fw_objective(W: np.ndarray, proportions: np.ndarray, lam: float) -> float:
    """g(W) = tau(W) + lam ||W - J||_F^2 / n, the function STL-FW minimises.

    Parameters
    ----------
    W : [n, n] mixing matrix, x <- W x.
    proportions : [n, K] class proportions Pi of each node, rows summing to 1.
    lam : weight of the spread term, a finite number >= 0.

    Returns
    -------
    float, g(W).

    Raises
    ------
    ParameterError
        naming lam unless it is a finite number >= 0, or proportions (``check_proportions``).
    """
    W = np.asarray(W, dtype=float)
    spread = ((W - 1 / len(W)) ** 2).sum() / len(W)
    return neighborhood_heterogeneity(W, proportions) + _check_lam(lam) * spread


def _check_lam(lam: float) -> float:
    try:
        value = float(lam)
    except (TypeError, ValueError):
        raise ParameterError("lam", f"must be a number >= 0, got {lam!r}") from None
    if isinstance(lam, bool) or not (np.isfinite(value) and value >= 0):
        raise ParameterError("lam", f"must be a finite number >= 0, got {lam!r}")
    return value


def _max_degree(W: np.ndarray) -> int:
    """Largest number of off-diagonal nonzeros in a row or a column of W."""
    off = W != 0
    np.fill_diagonal(off, False)
    return int(max(off.sum(axis=0).max(), off.sum(axis=1).max()))


def stl_fw(proportions: np.ndarray, budget: int, lam: float = 0.1,
           max_iter: int = 100) -> np.ndarray:
    """Sparse doubly-stochastic mixing matrix of low neighbourhood heterogeneity (STL-FW).

    Frank-Wolfe on g(W) = tau(W) + lam ||W - J||_F^2 / n over the Birkhoff polytope from W = I
    (module docstring), with the exact line search; the iterations go on while every node has at
    most `budget` in-neighbours and at most `budget` out-neighbours, and the last such iterate is
    returned (as the authors' ``frank_wolfe_budg``, whose check is on the rows only), or stop after
    `max_iter` iterations, or when an iteration no longer moves W.

    Parameters
    ----------
    proportions : [n, K] class proportions Pi of each node (rows summing to 1).
    budget : most in- and out-neighbours of a node, 0 <= budget <= n - 1.
    lam : weight of ||W - J||_F^2 / n, >= 0: it trades neighbourhood heterogeneity against the
        variance term of the paper's bound (larger lam, closer to J, denser).
    max_iter : most Frank-Wolfe iterations (each is one linear assignment, O(n^3)).

    Returns
    -------
    [n, n] float64 W, rows and columns summing to 1 (a convex combination of permutation
    matrices); at most `budget` off-diagonal nonzeros in every row and every column.

    References
    ----------
    B. Le Bars, A. Bellet, M. Tommasi, E. Lavoie, A.-M. Kermarrec, "Refined Convergence and
    Topology Learning for Decentralized SGD with Heterogeneous Data", AISTATS 2023.

    Examples
    --------
    >>> W = stl_fw(np.array([[1, 0], [1, 0], [0, 1], [0, 1]]), budget=1, lam=0.0)
    >>> W.sum(axis=0), neighborhood_heterogeneity(W, np.array([[1, 0], [1, 0], [0, 1], [0, 1]]))
    (array([1., 1., 1., 1.]), 0.0)
    """
    pi = check_proportions(proportions)
    n = len(pi)
    budget = check_int(budget, "budget", 0, n - 1)
    lam = _check_lam(lam)
    max_iter = check_int(max_iter, "max_iter", 0)
    mean = pi.mean(axis=0)
    W = np.eye(n)
    for _ in range(max_iter):
        residual = W @ pi - mean  # W Pi - J Pi, [n, K]
        centred = W - 1 / n  # W - J
        gradient = (2 / n) * (residual @ pi.T + lam * centred)
        rows, cols = linear_sum_assignment(gradient)
        P = np.zeros((n, n))
        P[rows, cols] = 1.0
        D = P - W
        DPi = D @ pi
        den = (DPi**2).sum() + lam * (D**2).sum()
        if den == 0:  # P is W itself: a vertex, nothing to move
            break
        gamma = min(max(-((residual * DPi).sum() + lam * (centred * D).sum()) / den, 0.0), 1.0)
        if gamma == 0:
            break
        step = (1 - gamma) * W + gamma * P
        if _max_degree(step) > budget:
            break
        W = step
    return W


def stl_fw_graph(proportions: np.ndarray, budget: int, lam: float = 0.1,
                 max_iter: int = 100) -> nx.Graph:
    """The weighted graph of ``stl_fw(proportions, budget, lam, max_iter)``.

    Edge i -> j carries ``weight`` W[j, i] (the share of i's mass sent to j), so that
    ``T.column_stochastic(G)`` is W again; the self weights are implied. A directed W is run
    by a Push-Sum algorithm (``sgp``): since W is doubly stochastic the Push-Sum weights stay 1
    and SGP is D-SGD with W.

    Parameters
    ----------
    proportions : [n, K] class proportions of each node, rows summing to 1.
    budget, lam, max_iter : as in ``stl_fw``.

    Returns
    -------
    nx.DiGraph, or nx.Graph when W is symmetric (then ``T.doubly_stochastic(G)`` is W too).

    Examples
    --------
    >>> G = stl_fw_graph(np.array([[1, 0], [1, 0], [0, 1], [0, 1]]), budget=1, lam=0.0)
    >>> {w for *_, w in G.edges(data="weight")}
    {0.5}
    """
    W = stl_fw(proportions, budget, lam, max_iter)
    return from_adjacency(W.T, weighted=True)


@register(name="stl_fw")
def stl_fw_of_counts(class_counts: np.ndarray, budget: int, lam: float = 0.1,
                     max_iter: int = 100) -> nx.Graph:
    """STL-FW (Le Bars et al. 2023): the mixing matrix learned from the run's partition, as a
    weighted graph (``stl_fw_graph`` of the nodes' class proportions).

    Parameters
    ----------
    class_counts : [n, K] samples of each class on each node (the run's partition).
    budget : the most in- and out-neighbours of every node (each Frank-Wolfe iteration adds
        one permutation, so at most one neighbour a node); must be given.
    lam : weight of ||W - J||_F^2 / n against the heterogeneity tau(W).
    max_iter : the most Frank-Wolfe iterations.

    Returns
    -------
    nx.DiGraph, or nx.Graph when W is symmetric; edge i -> j carries weight W[j, i].
    """
    counts = check_counts(class_counts)
    return stl_fw_graph(counts / counts.sum(axis=1, keepdims=True), budget, lam, max_iter)
