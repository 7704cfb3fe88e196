"""Deterministic topologies: plain functions ``name(n, ...) -> graph``.

Nodes are ``0..n-1``; undirected topologies are ``nx.Graph``, directed ones ``nx.DiGraph`` where
an edge ``(i, j)`` means that i can send to j. Self-loops are never stored: every node implicitly
keeps part of its own mass. Random topologies are in ``topologies.random_graphs``.
"""

from __future__ import annotations

import networkx as nx

from topologies._common import check_int
from topologies.registry import register


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


def _row_major(G: nx.Graph, cols: int) -> nx.Graph:
    """G with grid labels (r, c) renamed r * cols + c, nodes inserted in that order."""
    H = nx.Graph()
    H.add_nodes_from(range(G.number_of_nodes()))
    H.add_edges_from((r * cols + c, s * cols + d) for (r, c), (s, d) in G.edges)
    return H


@register
def ring(n: int) -> nx.Graph:
    """Undirected ring (cycle) on n nodes: i is joined to i - 1 and i + 1 (mod n).

    Parameters
    ----------
    n : number of nodes, at least 3.

    Returns
    -------
    nx.Graph, 2-regular, diameter floor(n / 2).

    Examples
    --------
    >>> sorted(ring(5)[0])
    [1, 4]
    """
    return nx.cycle_graph(check_int(n, "n", 3))


@register
def directed_ring(n: int) -> nx.DiGraph:
    """Directed ring on n nodes: i sends to (i + 1) mod n.

    Parameters
    ----------
    n : number of nodes, at least 2.

    Returns
    -------
    nx.DiGraph with out-degree and in-degree 1, diameter n - 1.

    Examples
    --------
    >>> sorted(directed_ring(4).edges)
    [(0, 1), (1, 2), (2, 3), (3, 0)]
    """
    return nx.cycle_graph(check_int(n, "n", 2), create_using=nx.DiGraph)


@register
def line(n: int) -> nx.Graph:
    """Path (line) on n nodes: i is joined to i + 1 for i < n - 1.

    Parameters
    ----------
    n : number of nodes, at least 1.

    Returns
    -------
    nx.Graph; end nodes have degree 1, the others 2; diameter n - 1.

    Examples
    --------
    >>> sorted(line(4).edges)
    [(0, 1), (1, 2), (2, 3)]
    """
    return nx.path_graph(check_int(n, "n", 1))


def grid(rows: int, cols: int) -> nx.Graph:
    """2-D grid (mesh) of rows x cols nodes; node r * cols + c sits at row r, column c.

    Parameters
    ----------
    rows, cols : grid size, each at least 1.

    Returns
    -------
    nx.Graph; degrees 2 (corners) to 4; diameter (rows - 1) + (cols - 1).

    Examples
    --------
    >>> sorted(grid(2, 3)[1])
    [0, 2, 4]
    """
    rows, cols = check_int(rows, "rows", 1), check_int(cols, "cols", 1)
    return _row_major(nx.grid_2d_graph(rows, cols), cols)


def torus(rows: int, cols: int) -> nx.Graph:
    """2-D torus: the rows x cols grid with wrap-around edges; node r * cols + c.

    Parameters
    ----------
    rows, cols : each at least 3 (with 2 the wrap-around edge would double an existing one).

    Returns
    -------
    nx.Graph, 4-regular, diameter floor(rows / 2) + floor(cols / 2).

    Examples
    --------
    >>> sorted(torus(3, 4)[0])
    [1, 3, 4, 8]
    """
    rows, cols = check_int(rows, "rows", 3), check_int(cols, "cols", 3)
    return _row_major(nx.grid_2d_graph(rows, cols, periodic=True), cols)


def hypercube(dim: int) -> nx.Graph:
    """Hypercube on n = 2**dim nodes: i is joined to i XOR 2**k for k < dim.

    Parameters
    ----------
    dim : dimension, at least 1.

    Returns
    -------
    nx.Graph, dim-regular, diameter dim.

    Examples
    --------
    >>> sorted(hypercube(3)[5])
    [1, 4, 7]
    >>> sorted(hypercube(1).edges)
    [(0, 1)]
    """
    dim = check_int(dim, "dim", 1)
    # Sorted bit tuples are the binary numbers 0..n-1 (dim = 1 has the integer nodes 0, 1).
    return nx.convert_node_labels_to_integers(nx.hypercube_graph(dim), ordering="sorted")


@register
def complete(n: int) -> nx.Graph:
    """Complete graph on n nodes: every pair of nodes is joined.

    Parameters
    ----------
    n : number of nodes, at least 1.

    Returns
    -------
    nx.Graph, (n-1)-regular, diameter 1.

    Examples
    --------
    >>> complete(5).number_of_edges()
    10
    """
    return nx.complete_graph(check_int(n, "n", 1))


@register
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
    return nx.star_graph(check_int(n, "n", 2) - 1)


@register
def dumbbell(n: int) -> nx.Graph:
    """Dumbbell: two cliques joined by one edge, the topology whose bottleneck Byzantine nodes use.

    He, Karimireddy and Jaggi, "Byzantine-robust decentralized learning via ClippedGossip", 2022,
    run their dissensus experiments on it. The cliques are 0..a-1 and a..n-1 with a = n // 2,
    joined by the edge (a - 1, a) (networkx's barbell graph without a path, for even n).

    Parameters
    ----------
    n : number of nodes, at least 4.

    Returns
    -------
    nx.Graph, n(n - 2)/4 + 1 edges for even n, diameter 3, one bridge.

    Examples
    --------
    >>> G = dumbbell(6)
    >>> G.number_of_edges(), (2, 3) in G.edges
    (7, True)
    """
    n = check_int(n, "n", 4)
    a = n // 2
    G = nx.complete_graph(a)
    G.add_edges_from((i, j) for i in range(a, n) for j in range(i + 1, n))
    G.add_nodes_from(range(a, n))
    G.add_edge(a - 1, a)
    return G


@register
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
    n = check_int(n, "n", 2)
    return _circulant(n, _powers_below(n, check_int(base, "base", 2)), directed)
