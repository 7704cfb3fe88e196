"""Random topologies: ``name(n, ..., seed=None) -> graph``, seeded by an int or a numpy Generator.

The same (arguments, int seed) always give the same graph. A Generator is advanced, so two calls
with one Generator give two independent graphs. Nodes are ``0..n-1``, no self-loops.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from topologies._common import ParameterError, check_int, check_out_degree, check_probability
from topologies.registry import register

Seed = int | np.random.Generator | None


def _simple(G: nx.Graph) -> nx.Graph:
    """G without self-loops (networkx generators may add them for tiny n)."""
    G.remove_edges_from(list(nx.selfloop_edges(G)))
    return G


def sample_out_neighbours(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """k distinct out-neighbours for every node, uniformly among the other n - 1.

    Parameters
    ----------
    rng : numpy Generator.
    n : number of nodes.
    k : out-neighbours per node, 1 <= k <= n - 1.

    Returns
    -------
    [n, k] int64 array; row i holds k distinct nodes drawn uniformly from the other n - 1.
    """
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


def out_digraph(targets: np.ndarray) -> nx.DiGraph:
    """The DiGraph in which node i sends to every node of row i of `targets`.

    Parameters
    ----------
    targets : [n, k] int array of out-neighbours.

    Returns
    -------
    nx.DiGraph on 0..n-1 with out-degree k everywhere.
    """
    n, k = targets.shape
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    senders = np.repeat(np.arange(n), k)
    G.add_edges_from(zip(senders.tolist(), targets.ravel().tolist(), strict=True))
    return G


@register(renamed={"out_degree": "k"})
def random_out_graph(n: int, k: int = 10, seed: Seed = None) -> nx.DiGraph:
    """Random k-out digraph: every node sends to k distinct nodes drawn uniformly from the others.

    Parameters
    ----------
    n : number of nodes, at least 2.
    k : out-degree of every node, 1 <= k <= n - 1.
    seed : int, numpy Generator or None (fresh entropy).

    Returns
    -------
    nx.DiGraph with out-degree k everywhere; in-degrees are random. Strongly connected with high
    probability only when k grows like ln n (a node of in-degree 0 appears with expectation
    about n e^-k).

    Examples
    --------
    >>> G = random_out_graph(10, 3, seed=0)
    >>> sorted({d for _, d in G.out_degree()})
    [3]
    """
    n = check_int(n, "n", 2)
    k = check_out_degree(k, n, "k")
    return out_digraph(sample_out_neighbours(np.random.default_rng(seed), n, k))


@register
def erdos_renyi(n: int, p: float = 0.1, seed: Seed = None, directed: bool = False) -> nx.Graph:
    """Erdos-Renyi G(n, p): every pair (every ordered pair if directed) is an edge with prob. p.

    Uses ``nx.fast_gnp_random_graph`` (O(n + m) work). Connected with high probability when
    p > ln(n) / n.

    Parameters
    ----------
    n : number of nodes, at least 1.
    p : edge probability in [0, 1].
    seed : int, numpy Generator or None.
    directed : DiGraph with independent edges i -> j and j -> i, or an undirected Graph.

    Returns
    -------
    nx.Graph or nx.DiGraph; degrees ~ Binomial(n - 1, p).

    Examples
    --------
    >>> erdos_renyi(6, 1.0, seed=0).number_of_edges()
    15
    >>> erdos_renyi(5, 0.5, seed=1, directed=True).is_directed()
    True
    """
    n = check_int(n, "n", 1)
    p = check_probability(p, "p")
    return _simple(nx.fast_gnp_random_graph(n, p, seed=seed, directed=directed))


@register(renamed={"degree": "d"})
def random_regular(n: int, d: int = 4, seed: Seed = None) -> nx.Graph:
    """Uniformly random d-regular graph on n nodes (``nx.random_regular_graph``).

    Parameters
    ----------
    n : number of nodes, at least 1.
    d : degree, 0 <= d < n, with n * d even.
    seed : int, numpy Generator or None.

    Returns
    -------
    nx.Graph, d-regular; for d >= 3 connected with high probability, its Metropolis-Hastings
    SLEM tends to (1 + 2 sqrt(d - 1)) / (d + 1) (Friedman).

    Examples
    --------
    >>> sorted({deg for _, deg in random_regular(10, 3, seed=0).degree()})
    [3]
    """
    n, d = check_regular(n, d)
    return _simple(nx.random_regular_graph(d, n, seed=seed))


@register
def random_regular_digraph(n: int, d: int = 4, seed: Seed = None) -> nx.DiGraph:
    """Random d-regular digraph: every node sends to d others and receives from d others.

    The circulant i -> i + 1, ..., i + d under a uniformly random relabelling of the nodes,
    then 2 n d degree-preserving three-edge swaps (``nx.directed_edge_swap``, whose moves reach
    every digraph with these degrees); for d > (n - 1) / 2 the complement of such a digraph of
    degree n - 1 - d. Approximately, not exactly, uniform over the d-regular digraphs.

    Parameters
    ----------
    n : number of nodes, at least 2.
    d : in- and out-degree of every node, 1 <= d <= n - 1.
    seed : int, numpy Generator or None.

    Returns
    -------
    nx.DiGraph without self-loops or parallel edges; in- and out-degree d everywhere.

    Examples
    --------
    >>> G = random_regular_digraph(12, 3, seed=0)
    >>> sorted({x for _, x in G.in_degree()} | {x for _, x in G.out_degree()})
    [3]
    """
    n = check_int(n, "n", 2)
    d = check_out_degree(d, n, "d")
    rng = np.random.default_rng(seed)
    if 2 * d > n - 1:  # dense: the complement of a sparse one (swaps there rarely succeed)
        G = nx.complete_graph(n, create_using=nx.DiGraph)
        if d < n - 1:
            G.remove_edges_from(random_regular_digraph(n, n - 1 - d, rng).edges)
        return G
    label = rng.permutation(n).tolist()
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from((label[i], label[(i + o) % n]) for o in range(1, d + 1) for i in range(n))
    if n >= 4:  # on 2 or 3 nodes the relabelled circulant is already uniform
        nx.directed_edge_swap(G, nswap=2 * n * d, max_tries=200 * n * d,
                              seed=int(rng.integers(2**31)))
    return G


def check_regular(n: int, d: int) -> tuple[int, int]:
    """(n, d) as ints, checked to admit a d-regular graph on n nodes.

    Parameters
    ----------
    n : number of nodes, at least 1.
    d : degree, in [0, n - 1].

    Returns
    -------
    tuple (n, d) of ints.

    Raises
    ------
    ParameterError
        naming n or d, unless n >= 1, 0 <= d <= n - 1 and n * d is even.
    """
    n = check_int(n, "n", 1)
    d = check_int(d, "d", 0, n - 1)
    if n * d % 2:
        raise ParameterError("d", f"times n must be even, got n={n}, d={d}")
    return n, d


@register(renamed={"ws_k": "k", "rewire": "p"})
def watts_strogatz(
    n: int, k: int = 4, p: float = 0.1, seed: Seed = None, connected: bool = True,
    tries: int = 100
) -> nx.Graph:
    """Watts-Strogatz small world: a ring joined to its k nearest nodes, edges rewired with prob. p.

    Parameters
    ----------
    n : number of nodes, at least 3.
    k : even number of ring neighbours (k / 2 per side), 2 <= k < n.
    p : rewiring probability in [0, 1].
    seed : int, numpy Generator or None.
    connected : redraw (up to `tries` times, ``nx.connected_watts_strogatz_graph``) until the
        graph is connected; ValueError if it never is.
    tries : number of draws when `connected`.

    Returns
    -------
    nx.Graph with n k / 2 edges; p = 0 gives the circulant ring lattice.

    Examples
    --------
    >>> sorted(watts_strogatz(8, 4, 0.0)[0])
    [1, 2, 6, 7]
    """
    n = check_int(n, "n", 3)
    k = check_int(k, "k", 2, n - 1)
    if k % 2:
        raise ParameterError("k", f"must be even (k / 2 neighbours per side), got {k}")
    p = check_probability(p, "p")
    if not connected:
        return _simple(nx.watts_strogatz_graph(n, k, p, seed=seed))
    try:
        return _simple(nx.connected_watts_strogatz_graph(n, k, p, check_int(tries, "tries", 1),
                                                         seed=seed))
    except nx.NetworkXError:
        raise ParameterError("p", f"gave no connected graph in {tries} tries (n={n}, k={k}, p={p})"
                             ) from None


@register(renamed={"ba_m": "m"})
def barabasi_albert(n: int, m: int = 2, seed: Seed = None) -> nx.Graph:
    """Barabasi-Albert preferential attachment: each new node joins m existing nodes.

    Parameters
    ----------
    n : number of nodes, at least 2.
    m : edges per new node, 1 <= m < n.
    seed : int, numpy Generator or None.

    Returns
    -------
    nx.Graph, connected, with m (n - m) edges and a heavy-tailed degree distribution.

    Examples
    --------
    >>> barabasi_albert(10, 2, seed=0).number_of_edges()
    16
    """
    n = check_int(n, "n", 2)
    m = check_int(m, "m", 1, n - 1)
    return _simple(nx.barabasi_albert_graph(n, m, seed=seed))


@register
def random_geometric(n: int, radius: float = 0.0, seed: Seed = None, connected: bool = True,
                     tries: int = 100) -> nx.Graph:
    """Random geometric graph: n points uniform in the unit square, linked within `radius`.

    The model of wireless and other physical networks, where a node reaches the nodes within
    its range (``nx.random_geometric_graph`` on the drawn positions, Euclidean distance).

    Parameters
    ----------
    n : number of nodes, at least 1.
    radius : link range, a finite number >= 0, in units of the square's side; 0 chooses
        sqrt(2 ln n / (pi n)), twice the area of the connectivity threshold (mean degree about
        2 ln n away from the square's sides).
    seed : int, numpy Generator or None.
    connected : redraw the positions (up to `tries` times) until the graph is connected;
        ParameterError if it never is.
    tries : number of draws when `connected`.

    Returns
    -------
    nx.Graph; node i has the attribute ``pos``, its [x, y] position in [0, 1)^2 (the last
    draw's).

    Raises
    ------
    ParameterError
        naming n, radius (not a finite number >= 0, or no connected draw in `tries`) or tries.

    Examples
    --------
    >>> G = random_geometric(20, 0.4, seed=0)
    >>> nx.is_connected(G), len(G.nodes[0]["pos"])
    (True, 2)
    >>> random_geometric(5, 2.0, seed=0).number_of_edges()  # every pair within range
    10
    """
    n = check_int(n, "n", 1)
    try:
        r = float(radius)
    except (TypeError, ValueError):
        raise ParameterError("radius", f"must be a number >= 0, got {radius!r}") from None
    if isinstance(radius, bool) or not (np.isfinite(r) and r >= 0):
        raise ParameterError("radius", f"must be a finite number >= 0, got {radius!r}")
    if r == 0 and n > 1:
        r = float(np.sqrt(2 * np.log(n) / (np.pi * n)))
    draws = check_int(tries, "tries", 1) if connected else 1
    rng = np.random.default_rng(seed)
    for _ in range(draws):
        pos = {i: p for i, p in enumerate(rng.random((n, 2)).tolist())}
        G = nx.random_geometric_graph(n, r, pos=pos)
        if not connected or nx.is_connected(G):
            return G
    raise ParameterError("radius", f"= {r:.4g} gave no connected graph in {draws} draws of {n} "
                         "points: raise radius")
