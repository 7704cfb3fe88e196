"""Mixing matrices of a graph, column convention: W[j, i] = share of node i's mass sent to j.

Node states are the rows of X and one gossip round is ``X <- W @ X``. Column-stochastic W
(Push-Sum, SGP) preserves the sum of the states; doubly-stochastic W (D-PSGD) also the average.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from topologies.builders import _check_nodes

DOUBLY_STOCHASTIC_METHODS = ("metropolis_hastings", "max_degree")


def _matrix(
    n: int, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, diag: np.ndarray | None = None
) -> np.ndarray:
    """Dense [n, n] float64 matrix with the given off-diagonal entries and diagonal; by default
    the diagonal completes every column to 1."""
    W = np.zeros((n, n))
    W[rows, cols] = values
    W[np.diag_indices(n)] = 1.0 - W.sum(axis=0) if diag is None else diag
    return W


def _send_edges(G: nx.Graph) -> tuple[np.ndarray, np.ndarray, list[float | None]]:
    """Senders, receivers and 'weight' attributes of every message; an undirected edge is two."""
    edges = list(G.edges(data="weight"))
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    weights = [e[2] for e in edges]
    if G.is_directed():
        return src, dst, weights
    return np.concatenate([src, dst]), np.concatenate([dst, src]), weights + weights


def column_stochastic(G: nx.Graph) -> np.ndarray:
    """Push-Sum mixing matrix of G (float64, [n, n]).

    Without edge weights, the uniform push rule: node i splits its mass equally over itself and
    its out-neighbours, ``W[j, i] = 1 / (d_out(i) + 1)``. An undirected edge counts both ways.
    If edges carry a 'weight' attribute (all of them must), ``W[j, i] = weight(i, j)`` and the self
    weight ``W[i, i]`` is 1 minus the weights node i sends.

    Parameters
    ----------
    G : nx.Graph or nx.DiGraph on nodes 0..n-1 without self-loops.

    Returns
    -------
    np.ndarray W with every column summing to 1.
    """
    n = _check_nodes(G)
    src, dst, weights = _send_edges(G)
    if all(w is None for w in weights):
        share = 1.0 / (np.bincount(src, minlength=n) + 1)
        return _matrix(n, dst, src, share[src], diag=share)
    if any(w is None for w in weights):
        raise ValueError("some edges have a 'weight' attribute and others do not")
    values = np.asarray(weights, dtype=float)
    if (values < 0).any():
        e = int(np.argmax(values < 0))
        raise ValueError(f"negative weight {values[e]:.6g} on edge ({src[e]}, {dst[e]})")
    sent = np.bincount(src, weights=values, minlength=n)
    if (sent > 1.0 + 1e-12).any():
        i = int(np.argmax(sent))
        raise ValueError(f"node {i} sends weights summing to {sent[i]:.12g} > 1")
    return _matrix(n, dst, src, values)


def doubly_stochastic(G: nx.Graph, method: str = "metropolis_hastings") -> np.ndarray:
    """Symmetric doubly-stochastic mixing matrix of an undirected graph (float64, [n, n]).

    ``"metropolis_hastings"``: ``W[i, j] = 1 / (1 + max(d_i, d_j))`` on edges;
    ``"max_degree"``: ``W = I - L / (d_max + 1)``. In both, ``W[i, i] = 1 - sum_{j != i} W[i, j]``.
    Edge weights are ignored.

    Parameters
    ----------
    G : nx.Graph, or an nx.DiGraph whose edge set is symmetric; nodes 0..n-1, no self-loops.
    method : one of DOUBLY_STOCHASTIC_METHODS.

    Returns
    -------
    np.ndarray W, symmetric, rows and columns summing to 1.
    """
    n = _check_nodes(G)
    if G.is_directed():
        one_way = next(((i, j) for i, j in G.edges if not G.has_edge(j, i)), None)
        if one_way is not None:
            raise ValueError(
                "doubly-stochastic (symmetric) mixing needs an undirected topology; "
                f"edge {one_way[0]} -> {one_way[1]} has no reverse edge"
            )
        G = G.to_undirected(as_view=True)
    u = np.array([e[0] for e in G.edges], dtype=np.int64)
    v = np.array([e[1] for e in G.edges], dtype=np.int64)
    degree = np.bincount(np.concatenate([u, v]), minlength=n)
    if method == "metropolis_hastings":
        values = 1.0 / (1 + np.maximum(degree[u], degree[v]))
    elif method == "max_degree":
        values = np.full(len(u), 1.0 / (1 + degree.max(initial=0)))
    else:
        raise ValueError(f"method must be one of {DOUBLY_STOCHASTIC_METHODS}, got {method!r}")
    return _matrix(n, np.concatenate([u, v]), np.concatenate([v, u]), np.tile(values, 2))


def _problem(W: np.ndarray, atol: float, rows: bool) -> str | None:
    """Why W is not column-stochastic (and row-stochastic if `rows`), or None if it is."""
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        return f"W must be a square matrix, got shape {W.shape}"
    bad = np.argwhere(~np.isfinite(W))
    if bad.size:
        return f"non-finite entry at [{bad[0][0]}, {bad[0][1]}]"
    bad = np.argwhere(W + atol < 0)
    if bad.size:
        i, j = bad[0]
        return f"negative entry at [{i}, {j}]: {W[i, j]:.6g}"
    checks = [(0, "column"), (1, "row")] if rows else [(0, "column")]
    for axis, label in checks:
        sums = W.sum(axis=axis)
        off = np.flatnonzero(np.abs(sums - 1.0) > atol)
        if off.size:
            return f"{label} {off[0]} sums to {sums[off[0]]:.12g}, not 1"
    return None


def is_column_stochastic(W: np.ndarray, atol: float = 1e-10) -> bool:
    """True if W is square, non-negative and every column sums to 1 (within atol)."""
    return _problem(W, atol, rows=False) is None


def is_doubly_stochastic(W: np.ndarray, atol: float = 1e-10) -> bool:
    """True if W is square, non-negative and every column and row sums to 1 (within atol)."""
    return _problem(W, atol, rows=True) is None


def check_column_stochastic(W: np.ndarray, atol: float = 1e-10) -> None:
    """Raise ValueError saying where W fails to be column-stochastic."""
    problem = _problem(W, atol, rows=False)
    if problem is not None:
        raise ValueError(f"W is not column-stochastic: {problem}")


def check_doubly_stochastic(W: np.ndarray, atol: float = 1e-10) -> None:
    """Raise ValueError saying where W fails to be doubly stochastic."""
    problem = _problem(W, atol, rows=True)
    if problem is not None:
        raise ValueError(f"W is not doubly stochastic: {problem}")
