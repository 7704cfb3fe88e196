"""D-Cliques' clique averaging (Bellet, Kermarrec, Lavoie, SRDS 2022): before its step, each node
replaces its gradient by the mean of its own and those of its clique-mates, which removes the bias
that the few inter-clique edges give the mixing. The cliques are the node attribute ``clique`` of
the round's graph (``topologies.d_cliques``); a node averages over the clique-mates it has an
edge with whose gradient arrives this round (all of its clique in a D-Cliques graph without
faults, as the reference code's variant with clique edges removed does).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp

import topologies as T
from p2pfl.errors import ConfigError


def clique_ids(graph: nx.Graph) -> np.ndarray:
    """The node attribute ``clique`` of every node.

    Parameters
    ----------
    graph : the round's graph, nodes 0..n-1 (topologies.d_cliques).

    Returns
    -------
    int64 [n] array of clique ids.

    Raises
    ------
    ConfigError
        naming algorithm.clique_averaging when a node has no 'clique' attribute.
    """
    ids = [graph.nodes[i].get("clique") for i in range(graph.number_of_nodes())]
    missing = next((i for i, c in enumerate(ids) if c is None), None)
    if missing is not None:
        raise ConfigError("algorithm.clique_averaging", f"needs a topology whose nodes carry a "
                          f"'clique' attribute (topologies.d_cliques); node {missing} has none")
    return np.asarray(ids, dtype=np.int64)


def clique_averaging(graph: nx.Graph, faults: T.Faults) -> tuple[sp.csr_array, int]:
    """The gradient-averaging operator of one round and the gradients it sends.

    Parameters
    ----------
    graph : the round's graph, its nodes carrying a ``clique`` attribute.
    faults : the round's lost messages and offline nodes.

    Returns
    -------
    A : [n, n] scipy CSR, row-stochastic: row i is uniform over node i and its clique-mates j
        whose message j -> i arrives (an edge of `graph`, not lost, both ends online); an
        offline node's row is e_i. ``g <- A g`` is the clique averaging of stacked gradients.
    sent : number of gradient messages delivered (each the size of a model).

    Raises
    ------
    ConfigError
        as `clique_ids`.
    """
    clique = clique_ids(graph)
    n = len(clique)
    src, dst, _ = T.messages(graph)
    keep = (clique[src] == clique[dst]) & ~faults.lost(src, dst)
    src, dst = src[keep], dst[keep]
    share = 1.0 / (1 + np.bincount(dst, minlength=n))
    rows = np.concatenate([dst, np.arange(n)])
    cols = np.concatenate([src, np.arange(n)])
    return sp.csr_array((share[rows], (rows, cols)), shape=(n, n)), int(keep.sum())
