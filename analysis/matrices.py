"""Inputs of the analysis functions: a graph, a dense numpy matrix or a scipy.sparse matrix.

A graph stands for its natural mixing matrix (Metropolis-Hastings if undirected, the uniform push
rule if directed); a matrix stands for its graph, edge i -> j when
``W[j, i] > 0`` (column convention). Graphs with more than DENSE_MAX nodes and sparse matrices
with more than DENSE_MAX rows stay sparse (CSR) and go to the iterative solvers.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp

from topologies.mixing import column_stochastic, doubly_stochastic

DENSE_MAX = 2000  # dense LAPACK up to this n (O(n^3): 0.4 s at n = 1000)

Matrix = np.ndarray | sp.sparray | sp.spmatrix
MatrixLike = Matrix | nx.Graph


def _edge_arrays(G: nx.Graph) -> tuple[int, np.ndarray, np.ndarray]:
    """n, senders, receivers of every message of G (an undirected edge is two messages)."""
    n = G.number_of_nodes()
    if set(G) != set(range(n)):
        raise ValueError(f"graph nodes must be the integers 0..{n - 1}")
    edges = np.array([(u, v) for u, v in G.edges if u != v], dtype=np.int64).reshape(-1, 2)
    src, dst = edges[:, 0], edges[:, 1]
    if not G.is_directed():
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    return n, src, dst


def sparse_mixing(G: nx.Graph) -> sp.csr_array:
    """Natural mixing matrix of G as a CSR array: MH if undirected, uniform push if directed.

    Same values as ``topologies.doubly_stochastic`` / ``column_stochastic`` (without edge
    weights), in O(n + m) memory.

    Parameters
    ----------
    G : nx.Graph or nx.DiGraph on 0..n-1.

    Returns
    -------
    [n, n] scipy CSR float64.
    """
    n, src, dst = _edge_arrays(G)
    out_degree = np.bincount(src, minlength=n)
    if G.is_directed():
        share = 1.0 / (out_degree + 1.0)
        values, diag = share[src], share
    else:
        values = 1.0 / (1.0 + np.maximum(out_degree[src], out_degree[dst]))
        diag = 1.0 - np.bincount(src, weights=values, minlength=n)
    rows = np.concatenate([dst, np.arange(n)])
    cols = np.concatenate([src, np.arange(n)])
    return sp.csr_array((np.concatenate([values, diag]), (rows, cols)), shape=(n, n))


def as_matrix(W: MatrixLike, dense_max: int | None = None) -> Matrix:
    """W as float64, dense or CSR.

    Parameters
    ----------
    W : a graph (its natural matrix), a dense or sparse [n, n] matrix.
    dense_max : largest n made dense (default DENSE_MAX); a dense W stays dense.

    Returns
    -------
    [n, n] ndarray if n <= dense_max or W is dense already, else CSR.

    Raises
    ------
    ValueError
        for a matrix that is not square.
    """
    dense_max = DENSE_MAX if dense_max is None else dense_max
    if isinstance(W, nx.Graph):
        if W.number_of_nodes() > dense_max:
            return sparse_mixing(W)
        return column_stochastic(W) if W.is_directed() else doubly_stochastic(W)
    if sp.issparse(W):
        if W.ndim != 2 or W.shape[0] != W.shape[1]:
            raise ValueError(f"W must be a square matrix, got shape {W.shape}")
        W = sp.csr_array(W, dtype=float)
        return W.toarray() if W.shape[0] <= dense_max else W
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be a square matrix, got shape {W.shape}")
    return W


def is_symmetric(W: Matrix, atol: float = 1e-12) -> bool:
    """Whether W equals its transpose within `atol`.

    Parameters
    ----------
    W : dense or sparse [n, n].
    atol : absolute tolerance.

    Returns
    -------
    bool.
    """
    if sp.issparse(W):
        diff = abs(W - W.T)
        return diff.nnz == 0 or float(diff.max()) <= atol
    return bool(np.allclose(W, W.T, rtol=0.0, atol=atol))


def as_graph(G: MatrixLike) -> nx.Graph:
    """G itself if it is a graph; the DiGraph of a matrix (edge i -> j when W[j, i] > 0).

    Parameters
    ----------
    G : a graph or an [n, n] matrix.

    Returns
    -------
    nx.Graph or nx.DiGraph on 0..n-1 (no self-loops from the diagonal).
    """
    if isinstance(G, nx.Graph):
        return G
    W = as_matrix(G, dense_max=0)  # CSR: its non-zeros are the edges
    W = sp.coo_array(W) if sp.issparse(W) else sp.coo_array(np.asarray(W))
    graph = nx.DiGraph()
    graph.add_nodes_from(range(W.shape[0]))
    keep = (W.data > 0) & (W.row != W.col)
    graph.add_edges_from(zip(W.col[keep].tolist(), W.row[keep].tolist()))
    return graph


def adjacency(G: MatrixLike) -> sp.csr_array:
    """Boolean adjacency A[i, j] = 1 for the edge i -> j (no self-loops), from any input.

    Parameters
    ----------
    G : a graph or an [n, n] matrix (W[j, i] > 0 is the edge i -> j).

    Returns
    -------
    [n, n] scipy CSR int8.
    """
    if isinstance(G, nx.Graph):
        n, src, dst = _edge_arrays(G)
    else:
        W = sp.coo_array(as_matrix(G, dense_max=0))
        keep = (W.data > 0) & (W.row != W.col)
        n, src, dst = W.shape[0], W.col[keep], W.row[keep]
    return sp.csr_array((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))


def check_column_stochastic(W: Matrix, what: str = "W") -> None:
    """Check that W is column-stochastic: finite, non-negative, every column summing to 1 within
    1e-9.

    Parameters
    ----------
    W : dense or sparse [n, n].
    what : the matrix's name, for the error.

    Raises
    ------
    ValueError
        naming the entry or column at fault.
    """
    values = W.data if sp.issparse(W) else np.asarray(W)
    if not np.isfinite(values).all():
        raise ValueError(f"{what} has a non-finite entry")
    if (values < 0).any():
        dense = W.toarray() if sp.issparse(W) else values
        j, i = np.unravel_index(int(np.argmin(dense)), dense.shape)
        raise ValueError(f"{what} has a negative entry W[{j}, {i}] = {dense[j, i]:.6g}")
    sums = np.asarray(W.sum(axis=0)).ravel()
    worst = int(np.argmax(np.abs(sums - 1.0)))
    if abs(sums[worst] - 1.0) > 1e-9:
        raise ValueError(f"{what} is not column-stochastic: column {worst} sums to "
                         f"{sums[worst]:.12g} (W[j, i] is the share of i's mass sent to j)")
