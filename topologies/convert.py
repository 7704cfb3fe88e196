"""User topologies: adjacency matrices, edge lists and arbitrary networkx graphs.

Every converter returns a graph on nodes 0..n-1 without self-loops. An edge attribute ``weight``
is a mixing weight: the share of the sender's mass that the message carries (see
``topologies.mixing``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import networkx as nx
import numpy as np
import scipy.sparse as sp

from topologies._common import check_int


def from_adjacency(
    A: np.ndarray | sp.sparray | sp.spmatrix, directed: bool | None = None, weighted: bool = False
) -> nx.Graph:
    """Graph of an [n, n] matrix: ``A[i, j] != 0`` (i != j) is the edge i -> j.

    This is networkx's orientation (``nx.from_numpy_array``); a column-convention mixing matrix
    W has ``A = W.T``. The diagonal is ignored (self weights are implied).

    Parameters
    ----------
    A : dense array or scipy.sparse matrix, non-negative.
    directed : DiGraph or Graph; None picks Graph exactly when A is symmetric (with False, an
        edge is there when A[i, j] or A[j, i] is non-zero).
    weighted : store ``A[i, j]`` as the edge attribute ``weight`` (a mixing weight).

    Returns
    -------
    nx.Graph or nx.DiGraph on 0..n-1.

    Examples
    --------
    >>> sorted(from_adjacency(np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])).edges)
    [(0, 1), (1, 2), (2, 0)]
    >>> from_adjacency(np.ones((3, 3))).is_directed()
    False
    """
    M = sp.coo_array(A) if sp.issparse(A) else sp.coo_array(np.asarray(A, dtype=float))
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"adjacency matrix must be square, got shape {M.shape}")
    M = sp.coo_array(M.astype(float))
    M.sum_duplicates()
    if not np.isfinite(M.data).all():
        raise ValueError("adjacency matrix has a non-finite entry")
    if (M.data < 0).any():
        e = int(np.argmax(M.data < 0))
        raise ValueError(f"adjacency matrix has a negative entry at [{M.row[e]}, {M.col[e]}]")
    keep = (M.row != M.col) & (M.data != 0)
    rows, cols, vals = M.row[keep], M.col[keep], M.data[keep]
    off = sp.coo_array((vals, (rows, cols)), shape=M.shape).tocsr()
    asymmetric = (off != off.T).nnz > 0
    if directed is None:
        directed = asymmetric
    elif not directed and weighted and asymmetric:
        raise ValueError("an undirected weighted graph needs a symmetric matrix")
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(M.shape[0]))
    if weighted:
        G.add_weighted_edges_from(zip(rows.tolist(), cols.tolist(), vals.tolist()))
    else:
        G.add_edges_from(zip(rows.tolist(), cols.tolist()))
    return G


def from_edges(
    edges: Iterable[Sequence[float]], n: int, directed: bool = True
) -> nx.Graph:
    """Graph on 0..n-1 from (i, j) pairs, or (i, j, weight) triples for a weighted topology.

    Parameters
    ----------
    edges : iterable of (sender, receiver) or (sender, receiver, weight); all of one kind.
    n : number of nodes (isolated nodes allowed), at least 1.
    directed : DiGraph (i sends to j) or Graph (i and j exchange).

    Returns
    -------
    nx.Graph or nx.DiGraph; weights, if given, become the edge attribute ``weight``.

    Examples
    --------
    >>> sorted(from_edges([(0, 1), (1, 2)], 4).edges)
    [(0, 1), (1, 2)]
    >>> from_edges([(0, 1, 0.25)], 2)[0][1]
    {'weight': 0.25}
    """
    n = check_int(n, "n", 1)
    items = [tuple(e) for e in edges]
    sizes = {len(e) for e in items}
    if sizes - {2, 3} or len(sizes) > 1:
        raise ValueError("edges must all be (i, j) pairs or all (i, j, weight) triples")
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(n))
    for e in items:
        i, j = (check_int(v, "edge endpoint", 0, n - 1) for v in e[:2])
        if i == j:
            raise ValueError(f"self-loop ({i}, {i}): self weights are implied, not edges")
        if len(e) == 3:
            G.add_edge(i, j, weight=float(e[2]))
        else:
            G.add_edge(i, j)
    return G


def from_networkx(G: nx.Graph, ordering: str = "sorted") -> nx.Graph:
    """A copy of any networkx graph relabelled to 0..n-1, without self-loops.

    Parameters
    ----------
    G : nx.Graph or nx.DiGraph with any hashable node labels (no multigraphs).
    ordering : "sorted" (node i is the i-th smallest label) or "default" (insertion order).

    Returns
    -------
    Graph of the same type; edge attributes (``weight``) are kept. The old label of node i is
    the node attribute ``label``.

    Examples
    --------
    >>> H = from_networkx(nx.Graph([("b", "a"), ("a", "a")]))
    >>> H.has_edge(0, 1), H.number_of_edges(), H.nodes[0]["label"]
    (True, 1, 'a')
    """
    if G.is_multigraph():
        raise ValueError("multigraphs are not topologies: convert with nx.Graph or nx.DiGraph")
    if ordering not in ("sorted", "default"):
        raise ValueError(f"ordering must be 'sorted' or 'default', got {ordering!r}")
    H = nx.convert_node_labels_to_integers(G, ordering=ordering, label_attribute="label")
    H.remove_edges_from(list(nx.selfloop_edges(H)))
    return H
