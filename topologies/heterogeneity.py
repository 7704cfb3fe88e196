"""STL-FW: a sparse mixing matrix learned from the nodes' class proportions (Le Bars, Bellet,
Tommasi, Lavoie, Kermarrec, AISTATS 2023).

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
doubly stochastic but in general not symmetric. A W whose graph is not strongly connected (W = I
after no iteration; pairs or groups whose proportions already balance) never reaches consensus:
STL-FW refuses it unless asked for it (``connected=False``, to study tau against the budget).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.sparse.csgraph import connected_components

from topologies._common import ParameterError, check_int
from topologies.cliques import check_counts
from topologies.convert import from_adjacency
from topologies.mixing import _problem
from topologies.registry import register

PROPORTION_TOLERANCE = 1e-9  # |row sum - 1| allowed in `proportions`
STOCHASTIC_TOLERANCE = 1e-9  # |row or column sum - 1| allowed in a mixing matrix W


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


def check_mixing(W: object, n: int, doubly: bool = True) -> np.ndarray:
    """A mixing matrix of n nodes, checked to be doubly stochastic (or column-stochastic).

    Parameters
    ----------
    W : [n, n] matrix, dense or scipy sparse; ``W[j, i]`` is the share of i's mass sent to j.
    n : the number of nodes it must have.
    doubly : whether its rows must sum to 1 as well as its columns.

    Returns
    -------
    [n, n] float64 dense array.

    Raises
    ------
    ParameterError
        naming W, unless it is [n, n], finite and non-negative, with columns (and, if `doubly`,
        rows) summing to 1 within STOCHASTIC_TOLERANCE.
    """
    M = W.toarray() if sp.issparse(W) else np.asarray(W, dtype=float)
    if M.shape != (n, n):
        raise ParameterError("W", f"must be an [n, n] matrix with n = {n}, got shape "
                             f"{M.shape}")
    problem = _problem(M, STOCHASTIC_TOLERANCE, rows=doubly)
    if problem is not None:
        kind = "doubly stochastic" if doubly else "column-stochastic"
        pushsum = doubly and _problem(M, STOCHASTIC_TOLERANCE, rows=False) is None
        hint = (" (a column-stochastic, Push-Sum W: A.neighborhood_heterogeneity reads it with "
                "its steady-state weights)" if pushsum else "")
        raise ParameterError("W", f"is not {kind}: {problem}{hint}")
    return M


def neighborhood_heterogeneity(W: np.ndarray, proportions: np.ndarray,
                               weights: np.ndarray | None = None) -> float:
    """tau(W) = ||W Pi - J Pi||_F^2 / n: mean squared distance between each node's
    neighbourhood-averaged class proportions (row i of W Pi) and the global proportions.

    The paper's definition is for a doubly-stochastic W; `weights` reads a column-stochastic W
    as Push-Sum does (node j's mixture is row j of W Pi over its weight w_j), which is what
    ``A.neighborhood_heterogeneity`` passes (the steady-state weights; 1 for a doubly-stochastic
    W, where both functions give the same number).

    Parameters
    ----------
    W : [n, n] mixing matrix, x <- W x (dense or scipy sparse): doubly stochastic, or
        column-stochastic with `weights`.
    proportions : [n, K] class proportions Pi of each node, rows summing to 1.
    weights : None (W doubly stochastic), or the Push-Sum weights w [n], finite and > 0.

    Returns
    -------
    float, 0 when every neighbourhood's proportions are the global ones.

    Raises
    ------
    ParameterError
        naming W unless it is an [n, n] doubly-stochastic matrix (column-stochastic with
        `weights`; sums within 1e-9), weights unless they are [n] finite and > 0, proportions
        as ``check_proportions``.

    Examples
    --------
    >>> neighborhood_heterogeneity(np.eye(2), np.eye(2))
    0.5
    """
    pi = check_proportions(proportions)
    M = check_mixing(W, len(pi), doubly=weights is None)
    if weights is not None:
        w = np.asarray(weights, dtype=float)
        if w.shape != (len(pi),) or not (np.isfinite(w) & (w > 0)).all():
            raise ParameterError("weights", f"must be [{len(pi)}] finite and > 0 (the Push-Sum "
                                 f"weights), got shape {w.shape}")
        M = M / w[:, None]
    return _tau(M, pi)


def _tau(M: np.ndarray, pi: np.ndarray) -> float:
    """||M Pi - J Pi||_F^2 / n for any [n, n] M and checked proportions Pi [n, K]."""
    return float(((M @ pi - pi.mean(axis=0)) ** 2).sum() / len(pi))


def stl_fw_objective(W: np.ndarray, proportions: np.ndarray, lam: float) -> float:
    """g(W) = tau(W) + lam ||W - J||_F^2 / n, the function STL-FW minimises.

    The quadratic is evaluated at any W (off the Birkhoff polytope too, as a line search does).

    Parameters
    ----------
    W : [n, n] matrix, x <- W x.
    proportions : [n, K] class proportions Pi of each node, rows summing to 1.
    lam : weight of the spread term, a finite number >= 0.

    Returns
    -------
    float, g(W).

    Raises
    ------
    ParameterError
        naming lam unless it is a finite number >= 0, W unless it is [n, n], or proportions
        (``check_proportions``).
    """
    pi = check_proportions(proportions)
    W = np.asarray(W, dtype=float)
    if W.shape != (len(pi), len(pi)):
        raise ParameterError("W", f"must be an [n, n] matrix with n = {len(pi)}, got shape "
                             f"{W.shape}")
    spread = ((W - 1 / len(W)) ** 2).sum() / len(W)
    return _tau(W, pi) + _check_lam(lam) * spread


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
           max_iter: int = 100, connected: bool = True) -> np.ndarray:
    """Sparse doubly-stochastic mixing matrix of low neighbourhood heterogeneity (STL-FW).

    Frank-Wolfe on g(W) = tau(W) + lam ||W - J||_F^2 / n over the Birkhoff polytope from W = I
    (module docstring), with the exact line search; the iterations go on while every node has at
    most `budget` in-neighbours and at most `budget` out-neighbours, and the last such iterate is
    returned (as the authors' ``frank_wolfe_budg``, whose check is on the rows only), or stop after
    `max_iter` iterations, or when an iteration no longer moves W.

    Parameters
    ----------
    proportions : [n, K] class proportions Pi of each node (rows summing to 1), n >= 2.
    budget : most in- and out-neighbours of a node, 1 <= budget <= n - 1.
    lam : weight of ||W - J||_F^2 / n, >= 0: it trades neighbourhood heterogeneity against the
        variance term of the paper's bound (larger lam, closer to J, denser).
    max_iter : most Frank-Wolfe iterations (each is one linear assignment, O(n^3)).
    connected : refuse a W whose graph is not strongly connected (its nodes never reach
        consensus); False returns it (to study tau against the budget).

    Returns
    -------
    [n, n] float64 W, rows and columns summing to 1 (a convex combination of permutation
    matrices); at most `budget` off-diagonal nonzeros in every row and every column.

    Raises
    ------
    ParameterError
        naming proportions (``check_proportions``; fewer than 2 nodes), budget outside
        [1, n - 1] or, when `connected`, a W that is not strongly connected, lam or max_iter.

    References
    ----------
    B. Le Bars, A. Bellet, M. Tommasi, E. Lavoie, A.-M. Kermarrec, "Refined Convergence and
    Topology Learning for Decentralized SGD with Heterogeneous Data", AISTATS 2023.

    Examples
    --------
    >>> pi = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])
    >>> W = stl_fw(pi, budget=1, lam=0.0, connected=False)  # two pairs of opposite classes
    >>> W.sum(axis=0), neighborhood_heterogeneity(W, pi)
    (array([1., 1., 1., 1.]), 0.0)
    >>> stl_fw(pi, budget=2).round(3)[0]  # lam = 0.1 links the pairs: strongly connected
    array([0.462, 0.077, 0.462, 0.   ])
    """
    pi = check_proportions(proportions)
    n = len(pi)
    if n < 2:
        raise ParameterError("proportions", "has 1 node: STL-FW learns the links of 2 or more")
    budget = check_int(budget, "budget", 1, n - 1)
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
    if connected:
        _check_connected(W, budget)
    return W


def _check_connected(W: np.ndarray, budget: int) -> None:
    """ParameterError naming budget unless the graph of W (edge i -> j where W[j, i] > 0) is
    strongly connected."""
    groups, label = connected_components(sp.csr_array(W != 0), directed=True,
                                         connection="strong")
    if groups > 1:
        first = np.flatnonzero(label == label[0]).tolist()
        raise ParameterError("budget", f"= {budget} gives a W that is not strongly connected "
                             f"({groups} groups that never mix, one of nodes {first}): raise "
                             "budget, lam or max_iter")


def stl_fw_graph(proportions: np.ndarray, budget: int, lam: float = 0.1,
                 max_iter: int = 100, connected: bool = True) -> nx.Graph:
    """The weighted graph of ``stl_fw(proportions, budget, lam, max_iter, connected)``.

    Edge i -> j carries ``weight`` W[j, i] (the share of i's mass sent to j), so that
    ``T.column_stochastic(G)`` is W again; the self weights are implied. A directed W is run
    by a Push-Sum algorithm (``sgp``): since W is doubly stochastic the Push-Sum weights stay 1
    and SGP is D-SGD with W.

    Parameters
    ----------
    proportions : [n, K] class proportions of each node, rows summing to 1.
    budget, lam, max_iter, connected : as in ``stl_fw``.

    Returns
    -------
    nx.DiGraph, or nx.Graph when W is symmetric (then ``T.doubly_stochastic(G)`` is W too);
    strongly connected when `connected`.

    Raises
    ------
    ParameterError
        as ``stl_fw``: naming budget when W is not strongly connected (a topology whose nodes
        never reach consensus) and `connected`.

    Examples
    --------
    >>> G = stl_fw_graph(np.array([[1, 0], [1, 0], [0, 1], [0, 1]]), budget=2)
    >>> sorted(G.edges), G.is_directed()
    ([(0, 1), (0, 2), (1, 3), (2, 3)], False)
    """
    W = stl_fw(proportions, budget, lam, max_iter, connected)
    return from_adjacency(W.T, weighted=True)


@register(name="stl_fw")
def stl_fw_of_counts(class_counts: np.ndarray, budget: int, lam: float = 0.1,
                     max_iter: int = 100) -> nx.Graph:
    """STL-FW (Le Bars et al. 2023): the mixing matrix learned from the run's partition, as a
    weighted graph (``stl_fw_graph`` of the nodes' class proportions).

    Parameters
    ----------
    class_counts : [n, K] samples of each class on each node (the run's partition).
    budget : the most in- and out-neighbours of every node, 1..n-1 (each Frank-Wolfe iteration
        adds one permutation, so at most one neighbour a node); must be given.
    lam : weight of ||W - J||_F^2 / n against the heterogeneity tau(W).
    max_iter : the most Frank-Wolfe iterations.

    Returns
    -------
    nx.DiGraph, or nx.Graph when W is symmetric; edge i -> j carries weight W[j, i]. One that
    is not strongly connected is returned: a run refuses it when it starts, as every such
    topology, naming it, and a study skips its cell.
    """
    counts = check_counts(class_counts)
    return stl_fw_graph(counts / counts.sum(axis=1, keepdims=True), budget, lam, max_iter,
                        connected=False)
