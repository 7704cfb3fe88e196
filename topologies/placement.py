"""Where to put k special nodes (Byzantine ones) on a graph: at random, at the highest degrees, or
on minimum vertex cuts (the bottlenecks an attacker would pick)."""

from __future__ import annotations

import networkx as nx
import numpy as np

from topologies._common import ParameterError, check_int, check_nodes
from topologies.random_graphs import Seed

PLACEMENTS = ("random", "max_degree", "cut")


def placement(G: nx.Graph, count: int, rule: str = "random", seed: Seed = None) -> np.ndarray:
    """`count` nodes of G chosen by `rule`.

    ``"random"``: uniformly without replacement. ``"max_degree"``: the highest degrees (in plus
    out degree for a DiGraph), ties to the smaller id. ``"cut"``: the nodes of a minimum vertex
    cut of the largest connected component (``nx.minimum_node_cut``, of the undirected graph),
    highest degree first; when more are asked for, the next minimum cut of what is then the
    largest component, and so on (a complete component's cut is all but one of its nodes). On a
    dumbbell the first is a bridge's end, the second the other end.

    Cost: ``"cut"`` runs ``nx.minimum_node_cut`` once a cut (max-flow computations over many
    node pairs): seconds beyond a few hundred nodes (measured 0.7 s a cut on a 256-node ring,
    1 s on a 16 x 16 torus, 3.4 s on a 512-node ring, growing about as n^2.3), minutes at a few
    thousand, where listing the ids is the way. The other rules are O(n log n).

    Parameters
    ----------
    G : graph on nodes 0..n-1.
    count : nodes to choose, 0..n.
    rule : one of PLACEMENTS.
    seed : int or numpy Generator ("random" only).

    Returns
    -------
    int64 array [count], the chosen nodes in increasing order.

    Raises
    ------
    ParameterError
        naming count outside 0..n, or rule for an unknown rule.

    Examples
    --------
    >>> from topologies.builders import dumbbell, star
    >>> placement(dumbbell(8), 2, "cut").tolist(), placement(star(5), 1, "max_degree").tolist()
    ([3, 4], [0])
    """
    n = check_nodes(G)
    count = check_int(count, "count", 0, n)
    if rule not in PLACEMENTS:
        raise ParameterError("rule", f"unknown value {rule!r} (allowed: {', '.join(PLACEMENTS)})")
    if rule == "random":
        return np.sort(np.random.default_rng(seed).choice(n, size=count, replace=False))
    degree = np.zeros(n, dtype=np.int64)
    for node, d in G.degree:
        degree[node] = d
    if rule == "max_degree":
        return np.sort(np.lexsort((np.arange(n), -degree))[:count]).astype(np.int64)
    H = nx.Graph(G.to_undirected() if G.is_directed() else G)
    chosen: list[int] = []
    while len(chosen) < count:
        part = max(nx.connected_components(H), key=lambda c: (len(c), -min(c)))
        cut = nx.minimum_node_cut(H.subgraph(part)) if len(part) > 1 else part
        take = sorted(cut, key=lambda v: (-degree[v], v))[:count - len(chosen)]
        chosen += take
        H.remove_nodes_from(take)
    return np.sort(np.array(chosen, dtype=np.int64))
