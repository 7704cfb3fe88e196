"""Randomized pairwise gossip (Boyd, Ghosh, Prabhakar and Shah, "Randomized gossip algorithms",
IEEE Trans. Inf. Theory 2006), the asynchronous model.

Every node has a rate-1 Poisson clock; equivalently, one global clock ticks n times per unit of
time and each tick wakes a node i uniformly at random. Node i picks a neighbour j with
probability P_ij and both set their values to their average: x <- W_ij x with
W_ij = I - (e_i - e_j)(e_i - e_j)^T / 2. The sum is preserved at every tick. In expectation one
tick is W_bar = I - D / (2n) + (P + P^T) / (2n), D = diag_i(sum_j P_ij + P_ji), and since every
W_ij is a projection, E ||x(k) - xbar||^2 <= lambda_2(W_bar)^k ||x(0) - xbar||^2. The
epsilon-averaging time in ticks is between 0.5 log(1/eps) / log(1/lambda_2) and
3 log(1/eps) / log(1/lambda_2) (the paper's Theorem 3).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

Seed = int | np.random.Generator | None


def neighbour_probabilities(G: nx.Graph) -> np.ndarray:
    """The natural P of a graph: P_ij = 1 / deg(i) on each edge (a node without neighbours
    keeps P_ii = 1: its tick changes nothing).

    Parameters
    ----------
    G : undirected graph on nodes 0..n-1 (self-loops ignored).

    Returns
    -------
    float64 [n, n], row-stochastic, P[i, j] > 0 only on edges.
    """
    n = G.number_of_nodes()
    P = np.zeros((n, n))
    for i in range(n):
        near = [j for j in G.neighbors(i) if j != i]
        if near:
            P[i, near] = 1.0 / len(near)
        else:
            P[i, i] = 1.0
    return P


def expected_gossip_matrix(G: nx.Graph, P: np.ndarray | None = None) -> np.ndarray:
    """W_bar = I - D / (2n) + (P + P^T) / (2n): one tick in expectation.

    Parameters
    ----------
    G : undirected graph on nodes 0..n-1.
    P : [n, n] row-stochastic neighbour probabilities on G's edges; default
        `neighbour_probabilities(G)`.

    Returns
    -------
    float64 [n, n], symmetric and doubly stochastic.

    Examples
    --------
    >>> expected_gossip_matrix(nx.path_graph(2)).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    P = neighbour_probabilities(G) if P is None else _checked(G, P)
    n = len(P)
    off = P - np.diag(np.diag(P))  # a node's tick with itself changes nothing
    D = np.diag(off.sum(axis=1) + off.sum(axis=0))
    return np.eye(n) - D / (2 * n) + (off + off.T) / (2 * n)


def averaging_time_bounds(G: nx.Graph, eps: float, P: np.ndarray | None = None
                          ) -> tuple[float, float]:
    """Boyd et al.'s bounds on the epsilon-averaging time, in ticks of the global clock.

    Parameters
    ----------
    G : undirected connected graph on nodes 0..n-1.
    eps : the accuracy, in (0, 1).
    P : neighbour probabilities, as `expected_gossip_matrix`.

    Returns
    -------
    tuple (lower, upper): 0.5 and 3 times log(1/eps) / log(1/lambda_2(W_bar)).

    Raises
    ------
    ValueError
        for eps outside (0, 1), or lambda_2 = 1 (a disconnected graph never averages).
    """
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    lam = np.sort(np.linalg.eigvalsh(expected_gossip_matrix(G, P)))[-2]
    if lam >= 1 - 1e-12:
        raise ValueError("lambda_2(W_bar) = 1: the graph is not connected, it never averages")
    scale = np.log(1 / eps) / np.log(1 / lam)
    return 0.5 * scale, 3.0 * scale


def pairwise_gossip(G: nx.Graph, x0: np.ndarray, ticks: int, *, P: np.ndarray | None = None,
                    every: int = 1, seed: Seed = None) -> np.ndarray:
    """Simulate asynchronous randomized pairwise gossip for `ticks` ticks of the global clock.

    Parameters
    ----------
    G : undirected graph on nodes 0..n-1.
    x0 : [n, ...] initial values.
    ticks : ticks to simulate (n ticks are one unit of time).
    P : neighbour probabilities, as `expected_gossip_matrix`.
    every : record the values every `every` ticks.
    seed : int, numpy Generator or None (fresh entropy).

    Returns
    -------
    [ticks // every + 1, n, ...] float64 trajectory; the first row is x0.

    Raises
    ------
    ValueError
        for x0 of the wrong shape, a negative `ticks` or `every` < 1.
    """
    P = neighbour_probabilities(G) if P is None else _checked(G, P)
    x = np.array(x0, dtype=float)
    n = len(P)
    if x.ndim < 1 or x.shape[0] != n:
        raise ValueError(f"x0 must have shape [{n}, ...], got {x.shape}")
    if ticks < 0 or every < 1:
        raise ValueError(f"need ticks >= 0 and every >= 1, got {ticks}, {every}")
    rng = np.random.default_rng(seed)
    woken = rng.integers(n, size=ticks)
    u = rng.random(ticks)
    cum = np.cumsum(P, axis=1)
    partner = np.minimum((cum[woken] <= u[:, None]).sum(axis=1), n - 1)
    out = [x.copy()]
    for k, (i, j) in enumerate(zip(woken.tolist(), partner.tolist(), strict=True)):
        x[i] = x[j] = (x[i] + x[j]) * 0.5
        if (k + 1) % every == 0:
            out.append(x.copy())
    return np.stack(out)


def _checked(G: nx.Graph, P: np.ndarray) -> np.ndarray:
    """P as float64 [n, n], refused unless it is row-stochastic on G's edges (and diagonal)."""
    P = np.asarray(P, dtype=float)
    n = G.number_of_nodes()
    if P.shape != (n, n) or (P < 0).any() or not np.allclose(P.sum(axis=1), 1):
        raise ValueError(f"P must be a row-stochastic [{n}, {n}] matrix")
    allowed = nx.to_numpy_array(G, nodelist=range(n)) > 0
    np.fill_diagonal(allowed, True)
    if (P[~allowed] > 0).any():
        raise ValueError("P puts probability on a pair that is not an edge of G")
    return P
