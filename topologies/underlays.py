"""Physical networks under an overlay: routers and links with a capacity and a latency.

An underlay is an undirected networkx graph whose edges carry `capacity_gbps` (each direction
of a link has it to itself) and `latency_s`. The overlay's node i sits at the underlay's node i,
and a message i -> j crosses the links of the path of least latency from i to j (`underlay_routes`),
sharing them with every other message that crosses them at the same time (the "flow" network
model, p2pfl/scale/network.py).

Five are shipped by name, the underlays of Marfoq, Neglia, Bellet, Kameni, Vidal,
"Throughput-Optimal Topology Design for Cross-Silo Federated Learning", NeurIPS 2020, from
their repository (omarfoq/communication-in-cross-silo-fl, graph_utils/data, commit 01b2aa3,
Apache License 2.0, topologies/underlays/LICENSE): `gaia` (11 AWS regions), `amazon_us` (AWS
North America, 22 nodes), `geant` (the European research network, 40), `exodus` (79) and
`ebone` (87), the last two from the Rocketfuel measurements. Their GML gives each link a
`distance` in km and, for gaia and geant, a `capacity` in bit/s; a link without one gets
DEFAULT_GBPS, their code's default. Latency follows their code: 0.0085 ms per km of the path
(their fixed 4 ms a path is the [network] `latency_s` each message already has).
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx

from topologies._common import ParameterError, did_you_mean

UNDERLAYS = ("gaia", "amazon_us", "geant", "exodus", "ebone")
DEFAULT_GBPS = 1.0  # a link the data gives no capacity (the authors' default_capacity, 1e9 bit/s)
SECONDS_PER_KM = 0.0085e-3  # the authors' latency per km of path
FOLDER = Path(__file__).parent / "underlays"


def underlay(name: str) -> nx.Graph:
    """A shipped underlay by name (module docstring).

    Parameters
    ----------
    name : one of UNDERLAYS.

    Returns
    -------
    nx.Graph on nodes 0..m-1 with node attribute `label` (the site), edge attributes
    `capacity_gbps`, `latency_s` and `distance_km`, and graph attributes `name` and `source`.

    Raises
    ------
    ParameterError
        naming name when it is not shipped.

    Examples
    --------
    >>> G = underlay("gaia")
    >>> G.number_of_nodes(), G.nodes[0]["label"], round(G.edges[0, 1]["latency_s"] * 1e3, 2)
    (11, 'Virginia', 30.27)
    """
    if name not in UNDERLAYS:
        raise ParameterError("underlay", f"{name!r} is not shipped; "
                             f"{did_you_mean(name, UNDERLAYS)}one of {', '.join(UNDERLAYS)}")
    raw = nx.read_gml(FOLDER / f"{name}.gml", label="id")
    G = nx.Graph(name=name, source="Marfoq et al., NeurIPS 2020 (topologies/underlays.py)")
    G.add_nodes_from((int(v), {"label": str(d.get("label", v))}) for v, d in raw.nodes(data=True))
    for u, v, d in raw.edges(data=True):
        km = float(d.get("distance", 0.0))
        capacity = d.get("capacity")
        G.add_edge(int(u), int(v), distance_km=km, latency_s=km * SECONDS_PER_KM,
                   capacity_gbps=float(capacity) / 1e9 if capacity else DEFAULT_GBPS)
    return G


def underlay_routes(graph: nx.Graph, n: int) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """The path of least latency between every two of the first n nodes, as directed links.

    Parameters
    ----------
    graph : an underlay (edge attribute `latency_s`; a missing one counts 0).
    n : the overlay's nodes, placed at the underlay's nodes 0..n-1.

    Returns
    -------
    dict (i, j) -> [(u, v), ...], the links from i to j in order ([] for i == j).

    Raises
    ------
    ParameterError
        naming underlay when it has fewer than n nodes, nodes other than 0..m-1, or no path
        between two of the first n.

    Examples
    --------
    >>> path = nx.path_graph(3)
    >>> underlay_routes(path, 3)[0, 2]
    [(0, 1), (1, 2)]
    """
    m = graph.number_of_nodes()
    if set(graph.nodes) != set(range(m)):
        raise ParameterError("underlay", "must have nodes 0..m-1")
    if m < n:
        raise ParameterError("underlay", f"has {m} nodes, fewer than the overlay's {n}: "
                             "node i of the overlay sits at node i of the underlay")
    found = {}
    for i in range(n):
        paths = nx.single_source_dijkstra_path(graph, i, weight=lambda u, v, d: d.get(
            "latency_s", 0.0))
        for j in range(n):
            if j not in paths:
                raise ParameterError("underlay", f"has no path from node {i} to node {j}")
            found[i, j] = list(zip(paths[j][:-1], paths[j][1:], strict=True))
    return found
