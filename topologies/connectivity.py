"""Whether a topology lets every node reach every other: a graph, or a schedule over a window.

analysis.connectivity builds on these (matrices, diameters, B-connectivity); the engine uses
them to refuse a topology on which an algorithm cannot reach the network average.
"""

from __future__ import annotations

import networkx as nx

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
