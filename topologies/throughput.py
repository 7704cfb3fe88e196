"""How long a synchronous round of an overlay takes on an underlay, and overlays built for it.

The max-plus model of Marfoq, Neglia, Bellet, Kameni, Vidal ("Throughput-Optimal Topology Design
for Cross-Silo Federated Learning", NeurIPS 2020). Silo i sits at underlay node i. In round k
silo j starts once it holds every in-neighbour's model of round k - 1, so its start times follow
a max-plus linear system whose delays are

    d(i, j) = compute_s + latency(i, j) + max(out_i M / up_i, in_j M / down_j, M / B(i, j)),

M the model's bits, up_i and down_j the silos' access capacities shared by their out_i messages
out and in_j messages in, latency(i, j) the latency of the path of least latency plus a fixed
per-message latency, and B(i, j) the path's available bandwidth: the smallest capacity of its
links over the number of its links (the authors' reading: a path's links are shared by as many
paths as it has hops). The cycle time, the time a round takes in the long run, is the largest
mean delay over the cycles of the delay graph (Karp's algorithm). A centralized round (the star)
is an upload then a download: 2 (lambda - compute_s) + compute_s, lambda the star's cycle time.

Overlays (undirected unless said), each on the silos 0..n-1:
- `mst_overlay`: the minimum spanning tree of the silos' one-way delays (no access term).
- `mbst_overlay(delta)`: a spanning tree of degree at most delta for the round-trip delays with
  access, the one of smallest cycle time among delta-Prim's (grown from silo 0 by the cheapest
  edge whose tree end has degree below delta) and the paths through the cube of the minimum
  spanning tree from each of its edges (degree 2, the authors' "cube algorithm"); delta None:
  among those of every delta in 2..n-1.
- `ring_overlay`: a directed Hamiltonian cycle, Christofides' tour of the delays with access.
- `star_overlay(center)`: every silo linked to the center (default: the silo of largest load
  centrality by latency).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np

from topologies._common import ParameterError
from topologies.schedules import Schedule
from topologies.underlays import underlay_routes


@dataclass(frozen=True)
class Links:
    """What a message between two silos meets: latency and available bandwidth per pair.

    `latency_s[i, j]` in seconds (path plus the fixed per-message latency), `gbps[i, j]` the
    path's available bandwidth in Gbit/s (inf on the diagonal).
    """

    latency_s: np.ndarray  # [n, n]
    gbps: np.ndarray  # [n, n]

    @property
    def n(self) -> int:
        return len(self.latency_s)


def silo_links(underlay: nx.Graph, n: int | None = None, latency_s: float = 0.0,
               capacity_gbps: float | None = None) -> Links:
    """The latency and available bandwidth between every two silos (module docstring).

    Parameters
    ----------
    underlay : an underlay (edge attributes `latency_s`, `capacity_gbps`), nodes 0..m-1.
    n : silos, at the underlay's nodes 0..n-1 (default: all m).
    latency_s : the fixed latency every message has besides its path's, in seconds.
    capacity_gbps : every link's capacity in Gbit/s instead of its own (the authors' code gives
        every link 1 Gbit/s); None: each link's `capacity_gbps`.

    Returns
    -------
    Links.

    Raises
    ------
    ParameterError
        as `underlay_routes`.
    """
    n = underlay.number_of_nodes() if n is None else n
    routes = underlay_routes(underlay, n)
    latency = np.zeros((n, n))
    gbps = np.full((n, n), math.inf)
    for (i, j), path in routes.items():
        if i == j:
            continue
        links = [underlay.edges[u, v] for u, v in path]
        latency[i, j] = latency_s + sum(d.get("latency_s", 0.0) for d in links)
        low = min(capacity_gbps if capacity_gbps is not None else d["capacity_gbps"]
                  for d in links)
        gbps[i, j] = low / len(path)
    return Links(latency, gbps)


def delay_graph(overlay: nx.Graph, links: Links, model_bits: float, compute_s: float,
                access_gbps: float = math.inf, downlink_gbps: float | None = None
                ) -> nx.DiGraph:
    """The overlay's delay graph: an edge i -> j for each message, its delay d(i, j) (module
    docstring) in the attribute `delay_s`.

    Parameters
    ----------
    overlay : nx.Graph (both directions of each edge) or nx.DiGraph on silos 0..n-1.
    links : the silos' links (`silo_links`).
    model_bits : M, the model's size in bits.
    compute_s : a silo's local computation of one round, in seconds.
    access_gbps : each silo's uplink capacity in Gbit/s, and its downlink's unless
        `downlink_gbps` (inf: no access limit).
    downlink_gbps : each silo's downlink capacity in Gbit/s; None: `access_gbps`.

    Returns
    -------
    nx.DiGraph.
    """
    directed = overlay.to_directed() if not overlay.is_directed() else nx.DiGraph(overlay)
    directed.remove_edges_from(list(nx.selfloop_edges(directed)))  # no message to itself
    up = model_bits / (access_gbps * 1e9)  # one model through one uplink, seconds
    down = model_bits / ((access_gbps if downlink_gbps is None else downlink_gbps) * 1e9)
    out_deg, in_deg = dict(directed.out_degree), dict(directed.in_degree)
    delays = nx.DiGraph()
    delays.add_nodes_from(directed.nodes)
    for i, j in directed.edges:
        if i == j:
            continue
        transfer = model_bits / (links.gbps[i, j] * 1e9)
        delays.add_edge(i, j, delay_s=compute_s + links.latency_s[i, j] + max(
            out_deg[i] * up, in_deg[j] * down, transfer))
    return delays


def max_cycle_mean(delays: nx.DiGraph, weight: str = "delay_s") -> float:
    """The largest mean weight over the cycles of a digraph (Karp, 1978), per strongly connected
    component.

    Parameters
    ----------
    delays : nx.DiGraph with edge weights.
    weight : the edge attribute.

    Returns
    -------
    float, -inf for a digraph without a cycle.

    Examples
    --------
    >>> G = nx.DiGraph([(0, 1, {"w": 1.0}), (1, 0, {"w": 3.0}), (1, 2, {"w": 9.0})])
    >>> max_cycle_mean(G, "w")
    2.0
    """
    best = -math.inf
    for component in nx.strongly_connected_components(delays):
        sub = delays.subgraph(component)
        if sub.number_of_edges() == 0:
            continue
        index = {v: k for k, v in enumerate(sub.nodes)}
        src = np.array([index[u] for u, _ in sub.edges])
        dst = np.array([index[v] for _, v in sub.edges])
        w = np.array([d[weight] for _, _, d in sub.edges(data=True)], dtype=float)
        m = len(index)
        walks = np.full((m + 1, m), -math.inf)  # walks[k, v]: heaviest k-edge walk 0 -> v
        walks[0, 0] = 0.0
        for k in range(1, m + 1):
            np.maximum.at(walks[k], dst, walks[k - 1, src] + w)
        with np.errstate(invalid="ignore"):
            ratios = (walks[m] - walks[:m]) / (m - np.arange(m))[:, None]
        ratios[~np.isfinite(walks[:m])] = math.inf  # no k-edge walk: no constraint
        per_node = ratios.min(axis=0)
        per_node[~np.isfinite(walks[m])] = -math.inf  # no m-edge walk ends here
        best = max(best, float(per_node.max()))
    return best


def cycle_time(overlay: nx.Graph, links: Links, model_bits: float, compute_s: float,
               access_gbps: float = math.inf, server: int | None = None,
               downlink_gbps: float | None = None) -> float:
    """Seconds a synchronous round of `overlay` takes in the long run (module docstring).

    Parameters
    ----------
    overlay : nx.Graph or nx.DiGraph on silos 0..n-1.
    links : the silos' links (`silo_links`).
    model_bits : M, the model's size in bits.
    compute_s : a silo's local computation of one round, in seconds.
    access_gbps : each silo's uplink in Gbit/s, and its downlink's unless `downlink_gbps`.
    server : for a centralized round on a star: its center (the round is an upload, then a
        download); None: a decentralized round.
    downlink_gbps : each silo's downlink in Gbit/s; None: `access_gbps`.

    Returns
    -------
    float, seconds.

    Raises
    ------
    ParameterError
        naming overlay when it has no cycle (every edge of a tree counts both ways: an
        undirected overlay always has one), server when an edge does not touch it.

    Examples
    --------
    >>> links = Links(np.array([[0, 0.01], [0.01, 0]]), np.array([[np.inf, 1], [1, np.inf]]))
    >>> round(cycle_time(nx.path_graph(2), links, 1e9, 0.5), 6)  # 0.5 + 0.01 + 1 s
    1.51
    """
    if server is not None and any(server not in edge for edge in overlay.edges):
        raise ParameterError("server", f"silo {server} is not the center of the overlay: a "
                             "centralized round is a star's (every edge at its server)")
    lam = max_cycle_mean(delay_graph(overlay, links, model_bits, compute_s, access_gbps,
                                     downlink_gbps))
    if lam == -math.inf:
        raise ParameterError("overlay", "has no cycle: a directed overlay must let every "
                             "silo hear back from those it sends to")
    return 2 * (lam - compute_s) + compute_s if server is not None else lam


def mean_round_time(schedule: Schedule, links: Links, model_bits: float, compute_s: float,
                    access_gbps: float = math.inf, rounds: int = 1000) -> float:
    """Seconds a round of a time-varying overlay takes on average, by the authors' rule for
    MATCHA: the silos start each round together and it lasts as long as its slowest message's
    delay d(i, j) (with that round's degrees), or compute_s when no link is active (the authors
    draw such a round again). A run where each silo starts when its own messages have arrived
    (the engine's synchronous clock) is faster: the rule is an upper bound.

    Parameters
    ----------
    schedule : an object with `at(t)` giving round t's graph on the silos (a Schedule).
    links : the silos' links.
    model_bits : M, bits.
    compute_s : seconds of computation a round.
    access_gbps : each silo's uplink and downlink in Gbit/s.
    rounds : the rounds averaged (from round 0).

    Returns
    -------
    float, seconds.
    """
    total = 0.0
    for t in range(rounds):
        delays = delay_graph(schedule.at(t), links, model_bits, compute_s, access_gbps)
        total += max((d for _, _, d in delays.edges(data="delay_s")), default=compute_s)
    return total / rounds


def _complete(links: Links, weight: np.ndarray) -> nx.Graph:
    """The complete graph on the silos with `weight[i, j]` (symmetrized by the larger way)."""
    G = nx.Graph()
    G.add_nodes_from(range(links.n))
    G.add_weighted_edges_from((i, j, max(weight[i, j], weight[j, i]))
                              for i in range(links.n) for j in range(i + 1, links.n))
    return G


def _one_way(links: Links, model_bits: float, compute_s: float,
             access_gbps: float = math.inf) -> np.ndarray:
    """[n, n] delay of one message alone on its silos' access links."""
    access = model_bits / (access_gbps * 1e9)
    with np.errstate(divide="ignore"):
        transfer = model_bits / (links.gbps * 1e9)
    return compute_s + links.latency_s + np.maximum(transfer, access)


def mst_overlay(links: Links, model_bits: float, compute_s: float) -> nx.Graph:
    """The minimum spanning tree of the one-way delays compute + latency + M / B (no access).

    Parameters
    ----------
    links : the silos' links.
    model_bits : M, bits.
    compute_s : seconds of computation a round.

    Returns
    -------
    nx.Graph, a spanning tree on 0..n-1.
    """
    tree = nx.minimum_spanning_tree(_complete(links, _one_way(links, model_bits, compute_s)))
    return nx.Graph(tree.edges)


def delta_prim(weights: nx.Graph, delta: int) -> nx.Graph:
    """A spanning tree of degree at most delta, grown from node 0 by the cheapest edge whose end
    in the tree has degree below delta (delta-Prim, Narula and Ho 1980).

    Parameters
    ----------
    weights : a complete weighted graph on 0..n-1 (edge attribute `weight`).
    delta : the degree bound, >= 2.

    Returns
    -------
    nx.Graph, a spanning tree.

    Raises
    ------
    ParameterError
        naming delta below 2.
    """
    if delta < 2:
        raise ParameterError("delta", f"must be at least 2 (a tree of degree 1 has 2 nodes), "
                             f"got {delta}")
    tree = nx.Graph()
    tree.add_node(0)
    outside = set(weights.nodes) - {0}
    while outside:
        u, v = min(((u, v) for u in tree.nodes if tree.degree[u] < delta for v in outside),
                   key=lambda e: (weights.edges[e]["weight"], e))
        tree.add_edge(u, v)
        outside.remove(v)
    return tree


def cube_path(tree: nx.Graph, start: int, end: int) -> list[int]:
    """A Hamiltonian path of the cube of a tree (any two nodes at most 3 tree edges apart may
    follow each other) from `start` to `end`, the two ends of one tree edge (Sekanina 1960:
    split the tree at that edge; a path of one side from `start` to a neighbour of it, then one
    of the other side from a neighbour of `end` to `end`: the junction is 3 edges long).

    Parameters
    ----------
    tree : a tree (edge attribute `weight` picks the neighbours used at the junctions).
    start, end : the ends of one of its edges.

    Returns
    -------
    list of every node of the tree, consecutive ones at most 3 tree edges apart.

    Examples
    --------
    >>> cube_path(nx.path_graph(4), 1, 2)
    [1, 0, 3, 2]
    """
    split = tree.copy()
    split.remove_edge(start, end)
    halves = []
    for node, first in ((start, True), (end, False)):
        side = split.subgraph(nx.node_connected_component(split, node))
        if side.number_of_nodes() == 1:
            halves.append([node])
            continue
        near = min(side[node], key=lambda k: (side.edges[node, k].get("weight", 0.0), k))
        halves.append(cube_path(side, node, near) if first else cube_path(side, near, node))
    return halves[0] + halves[1]


def mbst_overlay(links: Links, model_bits: float, compute_s: float,
                 access_gbps: float = math.inf, delta: int | None = None) -> nx.Graph:
    """A spanning tree of bounded degree for throughput (module docstring).

    Parameters
    ----------
    links : the silos' links.
    model_bits : M, bits.
    compute_s : seconds of computation a round.
    access_gbps : each silo's uplink and downlink in Gbit/s.
    delta : the degree bound; None: the one in 2..n-1 of smallest cycle time.

    Returns
    -------
    nx.Graph, a spanning tree of degree at most delta.
    """
    one = _one_way(links, model_bits, compute_s, access_gbps)
    weights = _complete(links, one + one.T)
    trees = [delta_prim(weights, d) for d in
             ([delta] if delta is not None else range(2, max(3, links.n)))]
    mst = nx.minimum_spanning_tree(weights)  # paths (degree 2 <= delta) through its cube,
    for u, v in sorted(mst.edges):  # one from each of its edges
        path = cube_path(mst, u, v)
        trees.append(nx.Graph(list(zip(path[:-1], path[1:], strict=True))))
    return min(trees, key=lambda t: cycle_time(t, links, model_bits, compute_s, access_gbps))


def ring_overlay(links: Links, model_bits: float, compute_s: float,
                 access_gbps: float = math.inf) -> nx.DiGraph:
    """A directed ring through every silo: Christofides' tour of the one-way delays with access.

    Parameters
    ----------
    links : the silos' links.
    model_bits : M, bits.
    compute_s : seconds of computation a round.
    access_gbps : each silo's uplink and downlink in Gbit/s.

    Returns
    -------
    nx.DiGraph, a Hamiltonian cycle on 0..n-1.
    """
    weights = _complete(links, _one_way(links, model_bits, compute_s, access_gbps))
    tour = nx.approximation.christofides(weights)  # closed: the first node again at the end
    return nx.DiGraph(list(zip(tour[:-1], tour[1:], strict=True)))


def star_overlay(links: Links, center: int | None = None) -> nx.Graph:
    """Every silo linked to the center.

    Parameters
    ----------
    links : the silos' links.
    center : the server's silo; None: the largest load centrality of the complete graph
        weighted by latency.

    Returns
    -------
    nx.Graph, with graph attribute `center`.
    """
    if center is None:
        load = nx.load_centrality(_complete(links, links.latency_s), weight="weight")
        center = max(sorted(load), key=load.get)
    star = nx.Graph(center=center)
    star.add_edges_from((center, j) for j in range(links.n) if j != center)
    return star
