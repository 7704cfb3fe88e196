"""Static topologies: plain functions ``name(n, ..., seed=None) -> graph``.

Nodes are ``0..n-1``; undirected topologies are ``nx.Graph``, directed ones ``nx.DiGraph`` where
an edge ``(i, j)`` means that i can send to j. Self-loops are never stored: every node implicitly
keeps part of its own mass.
"""

from __future__ import annotations

import operator

import networkx as nx
import numpy as np


def _check_int(value: int, name: str, low: int) -> int:
    """`value` as an int, or ValueError naming `name` unless it is an integer >= low."""
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}") from None
    if isinstance(value, bool) or number < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return number


def _check_out_degree(k: int, n: int, name: str) -> int:
    """`k` as an int, or ValueError naming `name` unless 1 <= k <= n - 1."""
    k = _check_int(k, name, 1)
    if k > n - 1:
        raise ValueError(f"{name} must satisfy 1 <= {name} <= n - 1 = {n - 1}, got {k}")
    return k


def _check_nodes(G: nx.Graph) -> int:
    """Number of nodes of G, or ValueError unless its nodes are 0..n-1 and it has no self-loops."""
    n = G.number_of_nodes()
    if set(G) != set(range(n)):
        raise ValueError(f"graph nodes must be the integers 0..{n - 1}")
    loop = next(nx.selfloop_edges(G), None)
    if loop is not None:
        raise ValueError(
            f"self-loop at node {loop[0]}: self weights are implied and must not be stored as edges"
        )
    return n


def _circulant(n: int, offsets: list[int], directed: bool) -> nx.Graph:
    """Graph on 0..n-1 with the edges i -> (i + o) mod n for every offset o (0 < o < n)."""
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from((i, (i + o) % n) for o in offsets for i in range(n))
    return G


def _powers_below(n: int, base: int) -> list[int]:
    """All powers base**m (m >= 0) smaller than n, in integer arithmetic."""
    powers, p = [], 1
    while p < n:
        powers.append(p)
        p *= base
    return powers


def _sample_out_neighbours(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """[n, k] integer array; row i holds k distinct nodes drawn uniformly from the others."""
    m = n - 1
    if m <= k * k:
        # The k smallest of m random keys form a uniform k-subset: O(n m) work.
        picks = np.argpartition(rng.random((n, m)), k - 1, axis=1)[:, :k]
    else:
        # Floyd's algorithm, one column for all rows at a time: O(n k^2) work.
        picks = np.empty((n, k), dtype=np.int64)
        for col, top in enumerate(range(m - k, m)):
            draw = rng.integers(0, top + 1, size=n)
            taken = (picks[:, :col] == draw[:, None]).any(axis=1)
            picks[:, col] = np.where(taken, top, draw)
    # Skip the node itself: choices 0..n-2 map onto the n-1 other nodes.
    return picks + (picks >= np.arange(n)[:, None])


def _random_out_digraph(n: int, k: int, rng: np.random.Generator) -> nx.DiGraph:
    """A DiGraph where every node sends to k distinct uniformly random other nodes."""
    targets = _sample_out_neighbours(rng, n, k)
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    senders = np.repeat(np.arange(n), k)
    G.add_edges_from(zip(senders.tolist(), targets.ravel().tolist(), strict=True))
    return G


def ring(n: int) -> nx.Graph:
    """Undirected ring (cycle) on n nodes: i is joined to i - 1 and i + 1 (mod n).

    Parameters
    ----------
    n : number of nodes, at least 3.

    Returns
    -------
    nx.Graph, 2-regular.

    Examples
    --------
    >>> sorted(ring(5)[0])
    [1, 4]
    """
    return nx.cycle_graph(_check_int(n, "n", 3))


def directed_ring(n: int) -> nx.DiGraph:
    """Directed ring on n nodes: i sends to (i + 1) mod n.

    Parameters
    ----------
    n : number of nodes, at least 2.

    Returns
    -------
    nx.DiGraph with out-degree and in-degree 1.

    Examples
    --------
    >>> sorted(directed_ring(4).edges)
    [(0, 1), (1, 2), (2, 3), (3, 0)]
    """
    return nx.cycle_graph(_check_int(n, "n", 2), create_using=nx.DiGraph)


def complete(n: int) -> nx.Graph:
    """Complete graph on n nodes: every pair of nodes is joined.

    Parameters
    ----------
    n : number of nodes, at least 1.

    Returns
    -------
    nx.Graph, (n-1)-regular.

    Examples
    --------
    >>> complete(5).number_of_edges()
    10
    """
    return nx.complete_graph(_check_int(n, "n", 1))


def star(n: int) -> nx.Graph:
    """Star on n nodes: hub 0 joined to each of the n - 1 leaves 1..n-1.

    Parameters
    ----------
    n : number of nodes (hub included), at least 2.

    Returns
    -------
    nx.Graph; the hub has degree n - 1, every leaf degree 1.

    Examples
    --------
    >>> sorted(star(4).edges)
    [(0, 1), (0, 2), (0, 3)]
    """
    return nx.star_graph(_check_int(n, "n", 2) - 1)


def exponential(n: int, base: int = 2, directed: bool = True) -> nx.Graph:
    """Exponential graph: i sends to (i + base**m) mod n for every power base**m < n.

    Ying et al., "Exponential Graph is Provably Efficient for Decentralized Deep Training",
    NeurIPS 2021. With ``directed=False`` the edges are {i, i +- base**m} (undirected).

    Parameters
    ----------
    n : number of nodes, at least 2.
    base : integer base of the offsets, at least 2.
    directed : DiGraph with the forward offsets only, or the undirected +- version.

    Returns
    -------
    nx.DiGraph (out-degree = number of powers of base below n) or nx.Graph.

    Examples
    --------
    >>> sorted(exponential(8).successors(0))
    [1, 2, 4]
    >>> sorted(exponential(8, directed=False)[0])
    [1, 2, 4, 6, 7]
    """
    n = _check_int(n, "n", 2)
    return _circulant(n, _powers_below(n, _check_int(base, "base", 2)), directed)


def random_out_graph(n: int, k: int, seed: int | np.random.Generator | None = None) -> nx.DiGraph:
    """Random k-out digraph: every node sends to k distinct nodes drawn uniformly from the others.

    Parameters
    ----------
    n : number of nodes, at least 2.
    k : out-degree of every node, 1 <= k <= n - 1.
    seed : int, numpy Generator or None (fresh entropy), passed to ``np.random.default_rng``.

    Returns
    -------
    nx.DiGraph with out-degree k everywhere; in-degrees are random.

    Examples
    --------
    >>> G = random_out_graph(10, 3, seed=0)
    >>> sorted({d for _, d in G.out_degree()})
    [3]
    """
    n = _check_int(n, "n", 2)
    k = _check_out_degree(k, n, "k")
    return _random_out_digraph(n, k, np.random.default_rng(seed))
