"""Whether a topology lets every node reach every other: a graph, or a schedule over a window.

analysis.connectivity builds on these (matrices, diameters, B-connectivity); the engine uses
them to refuse a topology on which an algorithm cannot reach the network average.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from topologies._common import messages
from topologies.schedules import Schedule


def is_strongly_connected(G: nx.Graph) -> bool:
    """Strong connectivity of a DiGraph, plain connectivity of an nx.Graph.

    Parameters
    ----------
    G : nx.Graph or nx.DiGraph, at least one node.

    Returns
    -------
    bool, True when every node reaches every other.

    Raises
    ------
    ValueError
        for the empty graph (connectivity is undefined).
    """
    if G.number_of_nodes() == 0:
        raise ValueError("connectivity is undefined for the empty graph")
    return nx.is_strongly_connected(G) if G.is_directed() else nx.is_connected(G)


def union_graph(schedule: Schedule, t0: int, t1: int) -> nx.DiGraph:
    """All the edges used in rounds t0..t1-1 of a schedule, as one graph.

    Parameters
    ----------
    schedule : Schedule on n nodes.
    t0, t1 : first round and one past the last round, 0 <= t0 <= t1.

    Returns
    -------
    nx.DiGraph on 0..n-1 (undirected edges go both ways).

    Raises
    ------
    ValueError
        unless 0 <= t0 <= t1.
    """
    if not 0 <= t0 <= t1:
        raise ValueError(f"need 0 <= t0 <= t1, got t0={t0}, t1={t1}")
    union = nx.DiGraph()
    union.add_nodes_from(range(schedule.n))
    for t in range(t0, t1):
        union.add_edges_from(nx.DiGraph(schedule.at(t)).edges)
    return union


def union_is_strongly_connected(n: int, graphs: Iterable[nx.Graph]) -> bool:
    """Whether the union of `graphs` (rounds of one schedule) is strongly connected.

    The same answer as ``is_strongly_connected(union_graph(...))`` in O(n + messages) work: only
    each graph's message arrays are kept (`graphs` may be a generator, so that no more than one
    graph is held at a time), and the union's strong components are counted by scipy's csgraph.
    An undirected edge counts both ways, so an undirected union must be connected.

    Parameters
    ----------
    n : nodes, at least 1; every graph is on 0..n-1.
    graphs : the graphs.

    Returns
    -------
    bool.

    Raises
    ------
    ValueError
        for n < 1 (connectivity is undefined for the empty graph).

    Examples
    --------
    >>> union_is_strongly_connected(3, [nx.DiGraph([(0, 1), (1, 2)]), nx.DiGraph([(2, 0)])])
    True
    """
    if n < 1:
        raise ValueError("connectivity is undefined for the empty graph")
    senders, receivers = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for G in graphs:
        src, dst, _ = messages(G)
        senders.append(src)
        receivers.append(dst)
    src, dst = np.concatenate(senders), np.concatenate(receivers)
    union = sp.csr_array((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n, n))
    return connected_components(union, directed=True, connection="strong")[0] == 1
