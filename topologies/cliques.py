"""D-Cliques: a topology built from the nodes' label counts (Bellet, Kermarrec, Lavoie, SRDS 2022).

Nodes are grouped into cliques whose pooled label distribution is close to the global one, so
that each clique is a small, nearly IID federation; the cliques are then joined by a sparse
inter-clique graph. The grouping is the paper's greedy swap: random cliques first, then, for a
fixed number of steps, two random cliques and, among the swaps of one node of each that lower
the sum of their skews, one drawn at random. The skew of a clique is the L1 distance between its
pooled label distribution and the global one (the reference code's default metric).
"""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np

from topologies._common import ParameterError, check_int
from topologies.random_graphs import Seed
from topologies.registry import register

INTER_CLIQUE = ("fully", "ring", "small_world")
SWAP_TOLERANCE = 1e-12  # a swap must lower the skew by more than this (not a rounding change)


def check_counts(class_counts: object, name: str = "class_counts") -> np.ndarray:
    """Class counts, checked: non-negative, finite, every row with some mass.

    Parameters
    ----------
    class_counts : [n, K] array-like, samples of each class (column) on each node (row).
    name : the argument's name, for the error.

    Returns
    -------
    [n, K] float64 array of the counts.

    Raises
    ------
    ParameterError
        naming `name`, unless the array is [n, K] with n, K >= 1, non-negative and finite, and no
        row is all zero.
    """
    counts = np.asarray(class_counts, dtype=float)
    if counts.ndim != 2 or counts.shape[0] < 1 or counts.shape[1] < 1:
        raise ParameterError(name, f"must be an [n, K] array (a row per node, a column per "
                             f"class), got shape {counts.shape}")
    bad = np.argwhere(~np.isfinite(counts) | (counts < 0))
    if bad.size:
        i, k = bad[0]
        raise ParameterError(name, f"must be non-negative and finite, got {counts[i, k]!r} at "
                             f"[{i}, {k}]")
    empty = np.flatnonzero(counts.sum(axis=1) == 0)
    if empty.size:
        raise ParameterError(name, f"row {empty[0]} is all zero: every node needs a sample")
    return counts


def clique_skews(class_counts: np.ndarray, clique_of: np.ndarray) -> np.ndarray:
    """Skew of every group: L1 distance between its pooled label distribution and the global one.

    Parameters
    ----------
    class_counts : [n, K] samples of each class on each node (a partition's label counts).
    clique_of : [n] int, the group of each node (0..c-1, every id used).

    Returns
    -------
    [c] float64 in [0, 2]: 0 when the group's labels are distributed as the whole data set's.

    Examples
    --------
    >>> clique_skews(np.array([[1, 0], [0, 1], [1, 0], [0, 1]]), np.array([0, 0, 1, 1]))
    array([0., 0.])
    >>> clique_skews(np.array([[1, 0], [0, 1], [1, 0], [0, 1]]), np.array([0, 1, 0, 1]))
    array([1., 1.])
    """
    counts = check_counts(class_counts)
    groups = np.asarray(clique_of)
    if groups.shape != (counts.shape[0],) or not np.issubdtype(groups.dtype, np.integer):
        raise ParameterError("clique_of", f"must be {counts.shape[0]} integer group ids, got "
                             f"shape {groups.shape} of {groups.dtype}")
    pooled = np.zeros((int(groups.max()) + 1, counts.shape[1]))
    np.add.at(pooled, groups, counts)
    if (pooled.sum(axis=1) == 0).any():
        raise ParameterError("clique_of", "must use every group id 0..c-1")
    total = counts.sum(axis=0)
    return _skew(pooled, total / total.sum())


def _skew(pooled: np.ndarray, global_dist: np.ndarray) -> np.ndarray:
    """L1 distance of each pooled count vector [..., K], normalised, to `global_dist` [K]."""
    return np.abs(pooled / pooled.sum(axis=-1, keepdims=True) - global_dist).sum(axis=-1)


def greedy_swap(counts: np.ndarray, cliques: list[np.ndarray], steps: int,
                rng: np.random.Generator) -> list[np.ndarray]:
    """The paper's greedy swap on `cliques`.

    `steps` times: two distinct random cliques, and one of the node swaps between them that lowers
    the sum of their two skews, drawn uniformly (no swap when none does).

    Parameters
    ----------
    counts : [n, K] class counts of each node.
    cliques : lists (int arrays) of node ids, one per clique; changed in place.
    steps : number of swap attempts.
    rng : numpy Generator that draws the cliques and the swaps.

    Returns
    -------
    list of arrays, `cliques` itself (unchanged when it holds fewer than 2 cliques).
    """
    total = counts.sum(axis=0)
    global_dist = total / total.sum()
    if len(cliques) < 2:
        return cliques
    for _ in range(steps):
        a, b = rng.choice(len(cliques), size=2, replace=False)
        ca, cb = cliques[a], cliques[b]
        xa, xb = counts[ca], counts[cb]  # [sa, K], [sb, K]
        sa, sb = xa.sum(axis=0), xb.sum(axis=0)
        before = _skew(sa, global_dist) + _skew(sb, global_dist)
        moved = xb[None, :, :] - xa[:, None, :]  # [sa, sb, K]: node b in, node a out of ca
        after = _skew(sa + moved, global_dist) + _skew(sb - moved, global_dist)
        better = np.argwhere(after < before - SWAP_TOLERANCE)
        if len(better):
            i, j = better[rng.integers(len(better))]
            ca[i], cb[j] = cb[j], ca[i]
    return cliques


def _clique_pairs(c: int, inter: str) -> list[tuple[int, int]]:
    """The inter-clique links, as (clique, clique) pairs in the order their endpoints are picked
    (a pair may repeat: each occurrence is another edge)."""
    if inter == "fully":
        return list(itertools.combinations(range(c), 2))
    if inter == "ring":
        return list(nx.cycle_graph(c).edges) if c > 1 else []
    # small_world: every clique links to the cliques at ring offsets 2^s and 2^s + 1 on both
    # sides, s = 0 .. ceil(log2 c) - 1 (the reference code's scheme); a link to itself is skipped.
    offsets = [2**s for s in range(math.ceil(math.log2(c)))] if c > 1 else []
    pairs = []
    for start in range(c):
        for offset in offsets:
            for k in (0, 1):
                for other in ((start - offset - k) % c, (start + offset + k) % c):
                    if other != start:
                        pairs.append((start, other))
    return pairs


@register
def d_cliques(class_counts: np.ndarray, clique_size: int = 10, inter: str = "fully",
              steps: int = 1000, seed: Seed = None) -> nx.Graph:
    """D-Cliques topology of nodes with the given label counts.

    The nodes, in a random order, are cut into cliques of `clique_size` (the last one takes the
    remainder), then `steps` greedy swaps bring each clique's pooled label distribution close to
    the global one (module docstring). Each clique is complete; the cliques are joined by one
    edge per pair of cliques ("fully"), per consecutive pair on a ring of cliques ("ring"), or by
    the small-world scheme: each clique links to the cliques at ring offsets 2^s and 2^s + 1 on
    both sides, s < ceil(log2 c). Each inter-clique edge joins the nodes of its two cliques that
    have the fewest inter-clique edges so far (ties drawn at random), which spreads the
    inter-clique edges over distinct nodes. The mixing matrix of the paper is Metropolis-Hastings
    (``T.doubly_stochastic(G)``, no edge weights stored).

    Parameters
    ----------
    class_counts : [n, K] samples of each class on each node (``FederatedData.label_counts()``).
    clique_size : largest clique, 1 <= clique_size <= n (the paper uses 10 for 10 classes).
    inter : the inter-clique graph, one of INTER_CLIQUE.
    steps : greedy-swap steps (the reference code's default is 1000).
    seed : int, numpy Generator or None: the random cliques, swaps and ties.

    Returns
    -------
    nx.Graph on 0..n-1, connected; node attribute ``clique`` (int, 0..c-1) on every node.

    References
    ----------
    A. Bellet, A.-M. Kermarrec, E. Lavoie, "D-Cliques: Compensating for Data Heterogeneity with
    Topology in Decentralized Federated Learning", SRDS 2022.

    Examples
    --------
    >>> counts = np.repeat(np.eye(10, dtype=int), 10, axis=0)  # 100 nodes, one class each
    >>> G = d_cliques(counts, 10, seed=0)
    >>> G.number_of_edges(), float(clique_skews(counts, np.array(
    ...     [G.nodes[i]["clique"] for i in G])).max())
    (495, 0.0)
    """
    counts = check_counts(class_counts)
    n = counts.shape[0]
    size = check_int(clique_size, "clique_size", 1, n)
    if inter not in INTER_CLIQUE:
        raise ParameterError("inter", f"unknown value {inter!r} (allowed: "
                             f"{', '.join(INTER_CLIQUE)})")
    steps = check_int(steps, "steps", 0)
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    cliques = greedy_swap(counts, [order[i:i + size].copy() for i in range(0, n, size)], steps,
                          rng)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    for c, members in enumerate(cliques):
        nx.set_node_attributes(G, dict.fromkeys(members.tolist(), c), "clique")
        G.add_edges_from(itertools.combinations(members.tolist(), 2))
    links = np.zeros(n, dtype=np.int64)  # inter-clique edges of each node so far

    def least_linked(members: np.ndarray) -> int:
        fewest = members[links[members] == links[members].min()]
        node = int(fewest[rng.integers(len(fewest))])
        links[node] += 1
        return node

    for a, b in _clique_pairs(len(cliques), inter):
        G.add_edge(least_linked(cliques[a]), least_linked(cliques[b]))
    return G
