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

P is held by rows (scipy CSR) and the simulation draws its ticks `TICK_CHUNK` at a time, each
woken node's neighbour by a search in its own row's cumulative probabilities: memory O(n + edges
+ TICK_CHUNK) besides the trajectory it returns.
"""

from __future__ import annotations

import numbers

import networkx as nx
import numpy as np
import scipy.sparse as sp

from topologies import ParameterError

Seed = int | np.random.Generator | None
TICK_CHUNK = 65536  # ticks whose nodes and neighbours pairwise_gossip draws at once


def neighbour_probabilities(G: nx.Graph) -> sp.csr_array:
    """The natural P of a graph: P_ij = 1 / deg(i) on each edge (a node without neighbours
    keeps P_ii = 1: its tick changes nothing).

    Parameters
    ----------
    G : undirected graph on nodes 0..n-1 (self-loops ignored).

    Returns
    -------
    scipy.sparse.csr_array float64 [n, n], row-stochastic, P[i, j] > 0 only on edges (sorted
    column indices).

    Raises
    ------
    ParameterError
        naming G unless it is undirected, with nodes 0..n-1, n >= 1.

    Examples
    --------
    >>> neighbour_probabilities(nx.path_graph(3)).toarray().tolist()
    [[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.0, 1.0, 0.0]]
    """
    n = _nodes(G)
    A = nx.to_scipy_sparse_array(G, nodelist=range(n), weight=None, format="csr")
    A = sp.csr_array(sp.triu(A, 1) + sp.tril(A, -1))  # self-loops out
    A.sum_duplicates()
    deg = np.diff(A.indptr)
    A.data = 1.0 / np.repeat(deg, deg).astype(np.float64)
    P = sp.csr_array(A + sp.diags_array((deg == 0).astype(np.float64)))
    P.sort_indices()
    return P


def expected_gossip_matrix(G: nx.Graph, P: np.ndarray | sp.sparray | None = None) -> np.ndarray:
    """W_bar = I - D / (2n) + (P + P^T) / (2n): one tick in expectation.

    Parameters
    ----------
    G : undirected graph on nodes 0..n-1.
    P : [n, n] row-stochastic neighbour probabilities on G's edges (dense or scipy sparse);
        default `neighbour_probabilities(G)`.

    Returns
    -------
    float64 [n, n] (dense), symmetric and doubly stochastic.

    Raises
    ------
    ParameterError
        naming P when it is not row-stochastic on G's edges (and G as
        ``neighbour_probabilities``).

    Examples
    --------
    >>> expected_gossip_matrix(nx.path_graph(2)).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    P = neighbour_probabilities(G) if P is None else _checked(G, P)
    n = P.shape[0]
    off = sp.csr_array(sp.triu(P, 1) + sp.tril(P, -1))  # a node's tick with itself: nothing
    D = off.sum(axis=1) + off.sum(axis=0)
    W = ((off + off.T) / (2 * n)).toarray()
    W[np.diag_indices(n)] = 1 - D / (2 * n)
    return W


def averaging_time_bounds(G: nx.Graph, eps: float, P: np.ndarray | sp.sparray | None = None
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
    ParameterError
        naming eps outside (0, 1), or G when it has one node (no lambda_2) or lambda_2 = 1 (a
        disconnected graph never averages), and as ``neighbour_probabilities``.
    """
    if not 0 < eps < 1:
        raise ParameterError("eps", f"must be in (0, 1), got {eps}")
    W = expected_gossip_matrix(G, P)
    if len(W) < 2:
        raise ParameterError("G", "has 1 node: it is averaged from the start, and lambda_2 "
                             "(the bounds' rate) needs 2 nodes or more")
    lam = np.sort(np.linalg.eigvalsh(W))[-2]
    if lam >= 1 - 1e-12:
        raise ParameterError("G", "gives lambda_2(W_bar) = 1: it is not connected (under P), "
                             "it never averages")
    scale = np.log(1 / eps) / np.log(1 / lam)
    return 0.5 * scale, 3.0 * scale


def pairwise_gossip(G: nx.Graph, x0: np.ndarray, ticks: int, *,
                    P: np.ndarray | sp.sparray | None = None, every: int = 1,
                    seed: Seed = None) -> np.ndarray:
    """Simulate asynchronous randomized pairwise gossip for `ticks` ticks of the global clock.

    Each chunk of `TICK_CHUNK` ticks draws its woken nodes (uniform) and then one uniform u per
    tick; the woken node i takes the first neighbour j (in increasing id order) whose cumulative
    P_i1 + ... + P_ij exceeds u.

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
    ParameterError
        naming x0 of the wrong shape, `ticks` unless an integer >= 0, `every` unless an
        integer >= 1 (and as `expected_gossip_matrix` for G and P).
    """
    P = neighbour_probabilities(G) if P is None else _checked(G, P)
    x = np.array(x0, dtype=float)
    n = P.shape[0]
    if x.ndim < 1 or x.shape[0] != n:
        raise ParameterError("x0", f"must have shape [{n}, ...], got {x.shape}")
    ticks = _integer(ticks, "ticks", 0)
    every = _integer(every, "every", 1)
    rng = np.random.default_rng(seed)
    cum = _row_cumsum(P)
    out = [x.copy()]
    for start in range(0, ticks, TICK_CHUNK):
        size = min(TICK_CHUNK, ticks - start)
        woken = rng.integers(n, size=size)
        partner = P.indices[_search_rows(P.indptr, cum, woken, rng.random(size))]
        for k, (i, j) in enumerate(zip(woken.tolist(), partner.tolist(), strict=True),
                                   start=start + 1):
            x[i] = x[j] = (x[i] + x[j]) * 0.5
            if k % every == 0:
                out.append(x.copy())
    return np.stack(out)


def _row_cumsum(P: sp.csr_array) -> np.ndarray:
    """float64 [nnz]: the cumulative sums of P's stored values within each row (each row's in
    order, as np.cumsum of the row), one vectorized step per position in a row."""
    deg = np.diff(P.indptr)
    position = np.arange(P.nnz) - np.repeat(P.indptr[:-1], deg)  # within its row
    order = np.argsort(position, kind="stable")
    bounds = np.searchsorted(position[order], np.arange(int(deg.max(initial=0)) + 1))
    cum = P.data.astype(np.float64)
    for p in range(1, len(bounds) - 1):
        at = order[bounds[p]:bounds[p + 1]]
        cum[at] += cum[at - 1]
    return cum


def _search_rows(indptr: np.ndarray, cum: np.ndarray, rows: np.ndarray,
                 u: np.ndarray) -> np.ndarray:
    """int64 [m]: in row rows[e] (CSR `indptr`, cumulative values `cum`), the position of the
    first value > u[e] (the row's last where none is: u above a sum rounded below 1); a
    vectorized binary search, log2(longest row) steps."""
    lo, end = indptr[rows].astype(np.int64), indptr[rows + 1].astype(np.int64)
    hi = end.copy()
    last = len(cum) - 1
    while (active := lo < hi).any():
        mid = (lo + hi) // 2
        right = active & (cum[np.minimum(mid, last)] <= u)
        lo = np.where(right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)
    return np.minimum(lo, end - 1)


def _integer(value: int, name: str, low: int) -> int:
    """`value` as an int, refused (naming `name`) unless it is an integer >= low (a float such
    as 5.0 or a bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ParameterError(name, f"must be an integer >= {low}, got {value!r}")
    return int(value)


def _nodes(G: nx.Graph) -> int:
    """n, the nodes of G, refused unless G is an undirected graph on 0..n-1, n >= 1 (a tick
    averages both ends of an edge: there is no one-way pairwise gossip)."""
    if G.is_directed():
        raise ParameterError("G", "must be undirected: a tick averages both ends of an edge "
                             "(convert with G.to_undirected())")
    n = G.number_of_nodes()
    if n == 0:
        raise ParameterError("G", "has no nodes")
    if set(G.nodes) != set(range(n)):
        raise ParameterError("G", f"must have nodes 0..{n - 1}")
    return n


def _checked(G: nx.Graph, P: np.ndarray | sp.sparray) -> sp.csr_array:
    """P as float64 CSR [n, n] (sorted, no stored zeros), refused unless it is row-stochastic
    on G's edges (and diagonal)."""
    n = _nodes(G)
    shape = P.shape if sp.issparse(P) else np.shape(P)
    if tuple(shape) != (n, n):
        raise ParameterError("P", f"must be a row-stochastic [{n}, {n}] matrix, got shape "
                             f"{tuple(shape)}")
    P = sp.csr_array(P, dtype=np.float64)
    P.sum_duplicates()
    P.eliminate_zeros()
    P.sort_indices()
    if (P.data < 0).any() or not np.allclose(P.sum(axis=1), 1):
        raise ParameterError("P", f"must be a row-stochastic [{n}, {n}] matrix (nonnegative, "
                             "rows summing to 1)")
    rows = np.repeat(np.arange(n), np.diff(P.indptr))
    A = sp.coo_array(nx.to_scipy_sparse_array(G, nodelist=range(n), weight=None))
    edge = np.isin(rows * n + P.indices, A.row.astype(np.int64) * n + A.col)
    if not (edge | (rows == P.indices)).all():
        raise ParameterError("P", "puts probability on a pair that is not an edge of G")
    return P
