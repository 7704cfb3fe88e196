"""Mixing matrices of a graph, column convention: W[j, i] = share of node i's mass sent to j.

Node states are the rows of X and one gossip round is ``X <- W @ X``. Column-stochastic W
(Push-Sum, SGP) preserves the sum of the states; doubly-stochastic W (D-PSGD) also the average;
row-stochastic W (pull averaging) preserves consensus vectors. Every builder takes the round's
faults (``topologies.faults``: lost messages, offline nodes) and ``sparse=True`` for a
scipy.sparse CSR result built without any dense n x n intermediate.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp

from topologies._common import check_nodes, messages
from topologies.faults import Faults

DOUBLY_STOCHASTIC_METHODS = ("metropolis_hastings", "max_degree")
FAULT_RULES = ("keep", "renormalise")
Matrix = np.ndarray | sp.csr_array


def _assemble(n: int, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, diag: np.ndarray,
              sparse: bool) -> Matrix:
    """[n, n] float64 matrix with W[rows, cols] = values and the given diagonal."""
    if sparse:
        idx = np.arange(n)
        W = sp.csr_array((np.concatenate([values, diag]),
                          (np.concatenate([rows, idx]), np.concatenate([cols, idx]))),
                         shape=(n, n))
        W.eliminate_zeros()
        return W
    W = np.zeros((n, n))
    W[rows, cols] = values
    W[np.diag_indices(n)] = diag
    return W


def _check_faults(faults: Faults | None, n: int) -> None:
    if faults is not None and faults.n != n:
        raise ValueError(f"faults are for {faults.n} nodes, the graph has {n}")


def _shares(owner: np.ndarray, weights: list[float | None], n: int, src: np.ndarray,
            dst: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-message shares and per-owner self weights; `owner` splits its unit over its messages.

    Unweighted: uniform 1 / (messages + 1). Weighted: the 'weight' attributes, self = 1 - total.
    """
    if all(w is None for w in weights):
        self_share = 1.0 / (np.bincount(owner, minlength=n) + 1)
        return self_share[owner], self_share
    if any(w is None for w in weights):
        raise ValueError("some edges have a 'weight' attribute and others do not")
    values = np.asarray(weights, dtype=float)
    if not np.isfinite(values).all() or (values < 0).any():
        e = int(np.argmax(~np.isfinite(values) | (values < 0)))
        kind = "negative" if values[e] < 0 else "non-finite"
        raise ValueError(f"{kind} weight {values[e]:.6g} on edge ({src[e]}, {dst[e]})")
    total = np.bincount(owner, weights=values, minlength=n)
    if (total > 1.0 + 1e-12).any():
        i = int(np.argmax(total))
        raise ValueError(f"node {i} {what} weights summing to {total[i]:.12g} > 1")
    return values, 1.0 - total


def _stochastic(G: nx.Graph, by_sender: bool, faults: Faults | None, fault_rule: str,
                sparse: bool) -> Matrix:
    """Column- (by_sender) or row-stochastic matrix; the owner of a message is its sender or
    receiver, and a lost message's share returns to its owner (or the owner renormalises)."""
    if fault_rule not in FAULT_RULES:
        raise ValueError(f"fault_rule must be one of {FAULT_RULES}, got {fault_rule!r}")
    n = check_nodes(G)
    _check_faults(faults, n)
    src, dst, weights = messages(G)
    owner = src if by_sender else dst
    values, self_share = _shares(owner, weights, n, src, dst,
                                 "sends" if by_sender else "receives")
    if faults is not None:
        lost = faults.lost(src, dst)
        if fault_rule == "keep":
            self_share = self_share + np.bincount(owner[lost], weights=values[lost], minlength=n)
            delivered = np.bincount(owner[~lost], minlength=n)
            self_share[delivered == 0] = 1.0  # exactly: an owner that kept all keeps its row
            values = values[~lost]
        else:
            values = values[~lost]
            total = self_share + np.bincount(owner[~lost], weights=values, minlength=n)
            alone = total == 0  # weighted node that kept nothing and reached nobody
            total[alone], self_share = 1.0, np.where(alone, 1.0, self_share)
            values = values / total[owner[~lost]]
            self_share = self_share / total
        src, dst = src[~lost], dst[~lost]
    return _assemble(n, dst, src, values, self_share, sparse)


def column_stochastic(G: nx.Graph, faults: Faults | None = None, *, fault_rule: str = "keep",
                      sparse: bool = False) -> Matrix:
    """Push-Sum mixing matrix of G: every column sums to 1 (float64, [n, n]).

    Without edge weights, the uniform push rule: node i splits its mass equally over itself and
    its out-neighbours, ``W[j, i] = 1 / (d_out(i) + 1)``. An undirected edge counts both ways.
    If edges carry a 'weight' attribute (all of them must), ``W[j, i] = weight(i, j)`` and the self
    weight ``W[i, i]`` is 1 minus the weights node i sends.

    Parameters
    ----------
    G : nx.Graph or nx.DiGraph on nodes 0..n-1 without self-loops.
    faults : this round's lost messages and offline nodes (``topologies.faults``).
    fault_rule : "keep" (the sender keeps each undelivered share) or "renormalise" (the sender
        splits its mass over the delivered out-neighbours only).
    sparse : return a scipy.sparse CSR array.

    Returns
    -------
    W with every column summing to 1.

    Examples
    --------
    >>> column_stochastic(nx.DiGraph([(0, 1), (1, 0), (0, 2), (2, 0)]))[:, 0]
    array([0.33333333, 0.33333333, 0.33333333])
    """
    return _stochastic(G, True, faults, fault_rule, sparse)


def row_stochastic(G: nx.Graph, faults: Faults | None = None, *, fault_rule: str = "keep",
                   sparse: bool = False) -> Matrix:
    """Pull (consensus) mixing matrix of G: every row sums to 1 (float64, [n, n]).

    Without edge weights node j averages itself and its in-neighbours uniformly,
    ``W[j, i] = 1 / (d_in(j) + 1)`` for every message i -> j. With 'weight' attributes,
    ``W[j, i] = weight(i, j)`` and ``W[j, j]`` is 1 minus what j receives. A lost message's
    weight goes back to the receiver ("keep") or the receiver renormalises over what arrived.

    Parameters
    ----------
    G : nx.Graph or nx.DiGraph on nodes 0..n-1 without self-loops.
    faults, fault_rule, sparse : as in ``column_stochastic``, seen from the receiver.

    Returns
    -------
    W with every row summing to 1.

    Examples
    --------
    >>> row_stochastic(nx.DiGraph([(1, 0), (2, 0)]))[0]
    array([0.33333333, 0.33333333, 0.33333333])
    """
    return _stochastic(G, False, faults, fault_rule, sparse)


def _undirected_edges(G: nx.Graph) -> tuple[np.ndarray, np.ndarray]:
    """Endpoints (u, v) of the undirected edges of G; a DiGraph must have every reverse edge."""
    src, dst, _ = messages(G)
    if not G.is_directed():
        m = src.size // 2
        return src[:m], dst[:m]
    pairs = set(zip(src.tolist(), dst.tolist()))
    one_way = next(((i, j) for i, j in pairs if (j, i) not in pairs), None)
    if one_way is not None:
        raise ValueError(
            "doubly-stochastic (symmetric) mixing needs an undirected topology; "
            f"edge {one_way[0]} -> {one_way[1]} has no reverse edge"
        )
    keep = src < dst
    return src[keep], dst[keep]


def _symmetric_weights(G: nx.Graph, u: np.ndarray, v: np.ndarray) -> np.ndarray | None:
    """The 'weight' attributes of the undirected edges (u, v), or None if no edge has one."""
    weights = [G.edges[a, b].get("weight") for a, b in zip(u.tolist(), v.tolist())]
    if all(w is None for w in weights):
        return None
    if any(w is None for w in weights):
        raise ValueError("some edges have a 'weight' attribute and others do not")
    values = np.asarray(weights, dtype=float)
    if G.is_directed():
        back = np.asarray([G.edges[b, a].get("weight") for a, b in zip(u.tolist(), v.tolist())],
                          dtype=float)
        if (back != values).any():
            e = int(np.argmax(back != values))
            raise ValueError(f"edge ({u[e]}, {v[e]}) has weight {values[e]:.6g} and its reverse "
                             f"{back[e]:.6g}: symmetric mixing needs equal weights")
    if not np.isfinite(values).all() or (values < 0).any():
        e = int(np.argmax(~np.isfinite(values) | (values < 0)))
        raise ValueError(f"weight {values[e]:.6g} on edge ({u[e]}, {v[e]}) is not a share")
    return values


def doubly_stochastic(G: nx.Graph, method: str = "metropolis_hastings",
                      faults: Faults | None = None, *, sparse: bool = False) -> Matrix:
    """Symmetric doubly-stochastic mixing matrix of an undirected graph (float64, [n, n]).

    ``"metropolis_hastings"``: ``W[i, j] = 1 / (1 + max(d_i, d_j))`` on edges;
    ``"max_degree"``: ``W = I - L / (d_max + 1)``. In both, ``W[i, i] = 1 - sum_{j != i} W[i, j]``.
    If the edges carry a 'weight' attribute (all of them must; both directions equal in a
    DiGraph), ``W[i, j] = W[j, i] = weight`` instead, the researcher's own weights. With faults,
    a link survives only if both of its messages arrive and both ends are online, and the weights
    are computed on the surviving graph (given weights of lost links go back to the diagonal).

    Parameters
    ----------
    G : nx.Graph, or an nx.DiGraph whose edge set is symmetric; nodes 0..n-1, no self-loops.
    method : one of DOUBLY_STOCHASTIC_METHODS.
    faults : this round's lost messages and offline nodes (``topologies.faults``).
    sparse : return a scipy.sparse CSR array.

    Returns
    -------
    W, symmetric, rows and columns summing to 1.

    Examples
    --------
    >>> doubly_stochastic(nx.path_graph(3))[1]
    array([0.33333333, 0.33333333, 0.33333333])
    """
    if method not in DOUBLY_STOCHASTIC_METHODS:
        raise ValueError(f"method must be one of {DOUBLY_STOCHASTIC_METHODS}, got {method!r}")
    n = check_nodes(G)
    _check_faults(faults, n)
    u, v = _undirected_edges(G)
    if faults is not None:
        alive = ~(faults.lost(u, v) | faults.lost(v, u))
        u, v = u[alive], v[alive]
    degree = np.bincount(np.concatenate([u, v]), minlength=n)
    given = _symmetric_weights(G, u, v)
    if given is not None:
        values = given
    elif method == "metropolis_hastings":
        values = 1.0 / (1 + np.maximum(degree[u], degree[v]))
    else:
        values = np.full(u.size, 1.0 / (1 + degree.max(initial=0)))
    diag = 1.0 - np.bincount(np.concatenate([u, v]), weights=np.tile(values, 2), minlength=n)
    if (diag < -1e-12).any():
        i = int(np.argmin(diag))
        raise ValueError(f"node {i}'s edge weights sum to {1 - diag[i]:.12g} > 1")
    return _assemble(n, np.concatenate([u, v]), np.concatenate([v, u]), np.tile(values, 2),
                     diag, sparse)


def _problem(W: Matrix, atol: float, rows: bool) -> str | None:
    """Why W is not column-stochastic (and row-stochastic if `rows`), or None if it is."""
    if sp.issparse(W):
        M = sp.coo_array(W)
        if M.ndim != 2 or M.shape[0] != M.shape[1]:
            return f"W must be a square matrix, got shape {M.shape}"
        for bad, what in ((~np.isfinite(M.data), "non-finite"), (M.data + atol < 0, "negative")):
            if bad.any():
                e = int(np.argmax(bad))
                value = "" if what == "non-finite" else f": {M.data[e]:.6g}"
                return f"{what} entry at [{M.row[e]}, {M.col[e]}]{value}"
        sums = {axis: np.asarray(M.sum(axis=axis)).ravel() for axis in (0, 1)}
    else:
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
        sums = {axis: W.sum(axis=axis) for axis in (0, 1)}
    checks = [(0, "column"), (1, "row")] if rows else [(0, "column")]
    for axis, label in checks:
        off = np.flatnonzero(np.abs(sums[axis] - 1.0) > atol)
        if off.size:
            return f"{label} {off[0]} sums to {sums[axis][off[0]]:.12g}, not 1"
    return None


def is_column_stochastic(W: Matrix, atol: float = 1e-10) -> bool:
    """Whether W is column-stochastic.

    Parameters
    ----------
    W : [n, n] dense or sparse matrix.
    atol : tolerance on the column sums.

    Returns
    -------
    bool, True if W is square, non-negative and every column sums to 1.
    """
    return _problem(W, atol, rows=False) is None


def is_doubly_stochastic(W: Matrix, atol: float = 1e-10) -> bool:
    """Whether W is doubly stochastic.

    Parameters
    ----------
    W : [n, n] dense or sparse matrix.
    atol : tolerance on the row and column sums.

    Returns
    -------
    bool, True if W is square, non-negative and every column and row sums to 1.
    """
    return _problem(W, atol, rows=True) is None


def check_column_stochastic(W: Matrix, atol: float = 1e-10) -> None:
    """Check that W is column-stochastic.

    Parameters
    ----------
    W : [n, n] dense or sparse matrix.
    atol : tolerance on the column sums.

    Raises
    ------
    ValueError
        saying where W fails to be square, non-negative, or to have columns summing to 1.
    """
    problem = _problem(W, atol, rows=False)
    if problem is not None:
        raise ValueError(f"W is not column-stochastic: {problem}")


def check_doubly_stochastic(W: Matrix, atol: float = 1e-10) -> None:
    """Check that W is doubly stochastic.

    Parameters
    ----------
    W : [n, n] dense or sparse matrix.
    atol : tolerance on the row and column sums.

    Raises
    ------
    ValueError
        saying where W fails to be square, non-negative, or to have rows and columns summing to 1.
    """
    problem = _problem(W, atol, rows=True)
    if problem is not None:
        raise ValueError(f"W is not doubly stochastic: {problem}")
