"""The max-plus cycle time of an overlay on an underlay and the overlays built for it (Marfoq et
al., NeurIPS 2020): Karp's maximum cycle mean against every cycle, hand-computed delays, each
builder's defining property, and the authors' own numbers on their underlays."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T
from topologies.throughput import cube_path, delay_graph, delta_prim, max_cycle_mean

INATURALIST = (44961717, 0.0254)  # the authors' model bits and computation seconds


@pytest.mark.parametrize("seed", range(6))
def test_karp_finds_the_largest_mean_over_every_cycle(seed):
    rng = np.random.default_rng(seed)
    G = nx.gnp_random_graph(7, 0.35, seed=seed, directed=True)
    for u, v in G.edges:
        G.edges[u, v]["delay_s"] = float(rng.uniform(0, 10))
    means = [np.mean([G.edges[c[k], c[(k + 1) % len(c)]]["delay_s"] for k in range(len(c))])
             for c in nx.simple_cycles(G)]
    assert max_cycle_mean(G) == pytest.approx(max(means, default=-math.inf))


def test_a_delay_counts_compute_latency_and_the_slowest_of_access_and_path():
    """Three silos on a path underlay 0 - 1 - 2 of 1 Gbit/s links with 1 ms each; a star on
    silo 1 with 0.5 Gbit/s access links: silo 1 sends two models through its uplink."""
    U = nx.path_graph(3)
    nx.set_edge_attributes(U, 1.0, "capacity_gbps")
    nx.set_edge_attributes(U, 0.001, "latency_s")
    links = T.silo_links(U, latency_s=0.004)
    assert links.latency_s[0, 2] == pytest.approx(0.006) and links.gbps[0, 2] == 0.5  # 2 hops
    star = nx.Graph([(1, 0), (1, 2)])
    delays = delay_graph(star, links, 1e9, 0.1, access_gbps=0.5)
    assert delays.edges[1, 0]["delay_s"] == pytest.approx(0.1 + 0.005 + 2 * 2.0)  # uplink
    assert delays.edges[0, 1]["delay_s"] == pytest.approx(0.1 + 0.005 + 2 * 2.0)  # downlink
    lam = (4.105 + 4.105) / 2
    assert T.cycle_time(star, links, 1e9, 0.1, 0.5) == pytest.approx(lam)
    assert T.cycle_time(star, links, 1e9, 0.1, 0.5, server=1) == pytest.approx(
        2 * (lam - 0.1) + 0.1)  # an upload, then a download
    with pytest.raises(T.ParameterError, match="^server silo 0 is not the center"):
        T.cycle_time(star, links, 1e9, 0.1, 0.5, server=0)
    ring = nx.DiGraph([(0, 1), (1, 2), (2, 0)])  # 0 -> 2 crosses two links: 0.5 Gbit/s
    assert A.cycle_time(ring, links, 1e9, 0.1, 10.0) == pytest.approx(
        (0.105 + 1.0 + 0.105 + 1.0 + 0.106 + 2.0) / 3)


def test_each_builder_gives_its_shape():
    links = T.silo_links(T.underlay("amazon_us"), latency_s=0.004)
    n = links.n
    mst = T.mst_overlay(links, *INATURALIST)
    assert nx.is_tree(mst) and mst.number_of_nodes() == n
    for delta in (2, 3):
        tree = T.mbst_overlay(links, *INATURALIST, access_gbps=1.0, delta=delta)
        assert nx.is_tree(tree) and tree.number_of_nodes() == n
        assert max(d for _, d in tree.degree) <= delta
    ring = T.ring_overlay(links, *INATURALIST, access_gbps=1.0)
    assert ring.number_of_nodes() == ring.number_of_edges() == n
    assert nx.is_strongly_connected(ring)
    assert all(d == 1 for _, d in ring.in_degree) and all(d == 1 for _, d in ring.out_degree)
    star = T.star_overlay(links)
    assert sorted(d for _, d in star.degree) == [1] * (n - 1) + [n - 1]
    with pytest.raises(T.ParameterError, match="delta"):
        delta_prim(nx.complete_graph(3), 1)


@pytest.mark.parametrize("seed", range(4))
def test_a_path_through_the_cube_of_a_tree_visits_every_node_within_three_edges(seed):
    tree = nx.random_labeled_tree(12, seed=seed) if hasattr(nx, "random_labeled_tree") else \
        nx.random_tree(12, seed=seed)
    u, v = next(iter(tree.edges))
    path = cube_path(tree, u, v)
    hops = dict(nx.all_pairs_shortest_path_length(tree))
    assert sorted(path) == list(range(12)) and (path[0], path[-1]) == (u, v)
    assert max(hops[a][b] for a, b in zip(path[:-1], path[1:])) <= 3


def test_delta_prim_is_prim_when_the_bound_never_binds():
    G = nx.complete_graph(6)
    rng = np.random.default_rng(0)
    for u, v in G.edges:
        G.edges[u, v]["weight"] = float(rng.uniform())
    cost = {frozenset(e): G.edges[e]["weight"] for e in G.edges}
    tree = delta_prim(G, 5)
    assert sum(cost[frozenset(e)] for e in tree.edges) == pytest.approx(
        nx.minimum_spanning_tree(G).size(weight="weight"))


@pytest.mark.parametrize(("name", "expected"), [
    ("gaia", {"star": 390.9, "mst": 138.1, "mbst": 138.1, "ring": 118.1}),
    ("amazon_us", {"star": 288.1, "mst": 89.7, "mbst": 89.7}),
])
def test_the_authors_cycle_times_on_their_underlays(name, expected):
    """iNaturalist (45 Mbit, 25.4 ms), 10 Gbit/s access links, every link 1 Gbit/s, 4 ms a
    message: the cycle times (ms, one decimal) the authors' code prints (their repository,
    commit 01b2aa3, graph_utils/generate_networks.py). Their Christofides tour on amazon_us is
    another one (81.3 ms against networkx's 81.0)."""
    links = T.silo_links(T.underlay(name), latency_s=0.004, capacity_gbps=1.0)
    star = T.star_overlay(links)
    overlays = {"star": (star, star.graph["center"]), "mst": (T.mst_overlay(
        links, *INATURALIST), None), "mbst": (T.mbst_overlay(links, *INATURALIST, 10.0), None),
        "ring": (T.ring_overlay(links, *INATURALIST, 10.0), None)}
    found = {k: round(1e3 * T.cycle_time(g, links, *INATURALIST, 10.0, server=s), 1)
             for k, (g, s) in overlays.items() if k in expected}
    assert found == expected



def _engine_round_s(U: nx.Graph, overlay: nx.Graph, bits: int) -> np.ndarray:
    """Seconds per round of the engine's synchronous clock on the flow network, once periodic:
    0.03 s of compute, 4 ms a message, 0.4 Gbit/s uplinks, wide downlinks."""
    from p2pfl.config.sections import NetworkConfig
    from p2pfl.scale.network import Clock

    net = NetworkConfig(enabled=True, step_s=0.03, latency_s=0.004, model="flow",
                        uplink_gbps=0.4, downlink_gbps=1e6)
    clock = Clock(net, 5, seed=0, steps=1, message_bytes=bits // 8, underlay=U)
    starts = []
    for t in range(120):
        clock.commit(clock.plan_round(t, overlay, T.Faults.none(5)))
        starts.append(clock.start.copy())
    return (starts[-1] - starts[59]) / 60


@pytest.mark.parametrize("overlay", [nx.Graph([(0, 1), (1, 2), (1, 3), (3, 4)]),
                                     nx.DiGraph([(0, 2), (2, 4), (4, 1), (1, 3), (3, 0)])])
def test_the_cycle_time_is_the_engines_round_time_where_the_model_is_exact(overlay):
    """The engine's synchronous rounds (a node starts when its last inbound message has
    arrived) on the flow network settle into the max-plus cycle time where its delays are
    exact: a node's messages leave together and share its uplink from the same instant (equal
    path latencies), downlinks and underlay links are wide. With unequal latencies a node's
    first messages start first and get more of its uplink, so every message arrives no later
    than the model says: the cycle time is then an upper bound."""
    bits = 8 * 1_000_000
    U = nx.complete_graph(5)
    nx.set_edge_attributes(U, 0.002, "latency_s")
    nx.set_edge_attributes(U, 1e6, "capacity_gbps")
    links = T.silo_links(U, latency_s=0.004)
    expected = T.cycle_time(overlay, links, bits, 0.03, access_gbps=0.4, downlink_gbps=1e6)
    assert _engine_round_s(U, overlay, bits) == pytest.approx(np.full(5, expected), rel=1e-9)
    for k, (u, v) in enumerate(U.edges):
        U.edges[u, v]["latency_s"] = 0.001 * (k + 1)
    links = T.silo_links(U, latency_s=0.004)
    bound = T.cycle_time(overlay, links, bits, 0.03, access_gbps=0.4, downlink_gbps=1e6)
    measured = _engine_round_s(U, overlay, bits)
    assert (measured <= bound + 1e-12).all() and measured.max() > 0.8 * bound


def test_matcha_splits_into_matchings_and_spends_its_budget_where_it_connects_most():
    G = nx.random_regular_graph(4, 16, seed=1)
    S = T.matcha(G, budget=0.5, seed=0)
    found = [set(m) for m in S.matchings]
    assert set().union(*found) == {tuple(sorted(e)) for e in G.edges}
    assert all(len({v for e in m for v in e}) == 2 * len(m) for m in found)  # no shared node
    p = np.array(S.probabilities)
    assert (p >= 0).all() and (p <= 1).all() and p.sum() <= 0.5 * len(p) + 1e-9
    laplacians = []
    for m in S.matchings:
        H = nx.empty_graph(16)
        H.add_edges_from(m)
        laplacians.append(nx.laplacian_matrix(H).toarray())

    def connectivity(q: np.ndarray) -> float:
        return np.linalg.eigvalsh(np.tensordot(q, np.stack(laplacians), 1))[1]

    assert connectivity(p) > connectivity(np.full(len(p), 0.5)) + 0.05  # beats uniform
    symmetric = T.matcha(nx.cycle_graph(4), budget=0.5, seed=0)  # two perfect matchings
    assert symmetric.probabilities == pytest.approx((0.5, 0.5), abs=1e-3)
    edges = [sorted(S.at(t).edges) for t in range(200)]
    share = np.mean([[set(m) <= {tuple(e) for e in es} for m in found] for es in edges], axis=0)
    assert share == pytest.approx(p, abs=0.1)  # each matching active with its probability


def test_matcha_with_every_matching_active_is_the_best_constant_edge_weight():
    """With budget 1 every matching is always on: alpha = 2 / (lambda_2 + lambda_n) of the
    graph's Laplacian, the best constant edge weight (Xiao and Boyd 2004)."""
    G = nx.path_graph(6)
    S = T.matcha(G, budget=1.0, seed=0)
    lam = np.linalg.eigvalsh(nx.laplacian_matrix(G).toarray())
    assert S.probabilities == (1.0, 1.0)
    assert S.alpha == pytest.approx(2 / (lam[1] + lam[-1]), rel=1e-6)
    assert nx.get_edge_attributes(S.at(5), "weight") == {e: S.alpha for e in G.edges}


def test_a_static_schedules_mean_round_is_its_slowest_message():
    links = T.silo_links(T.underlay("gaia"), latency_s=0.004, capacity_gbps=1.0)
    ring = T.ring_overlay(links, *INATURALIST, 10.0)
    delays = delay_graph(ring, links, *INATURALIST, 10.0)
    assert T.mean_round_time(T.static(ring), links, *INATURALIST, 10.0, rounds=3) == \
        pytest.approx(max(d for _, _, d in delays.edges(data="delay_s")))


def test_matchas_probabilities_reach_the_optimum_a_general_solver_finds():
    """On a random graph the ascent's algebraic connectivity is within 1e-3 of what SLSQP finds
    from the uniform start under the same constraints."""
    from scipy.optimize import minimize

    G = nx.connected_watts_strogatz_graph(10, 4, 0.5, seed=2)
    S = T.matcha(G, budget=0.4, seed=0)
    laplacians = []
    for m in S.matchings:
        H = nx.empty_graph(10)
        H.add_edges_from(m)
        laplacians.append(nx.laplacian_matrix(H).toarray().astype(float))
    stack = np.stack(laplacians)

    def connectivity(q: np.ndarray) -> float:
        return np.linalg.eigvalsh(np.tensordot(q, stack, 1))[1]

    m = len(laplacians)
    best = minimize(lambda q: -connectivity(q), np.full(m, 0.4), method="SLSQP",
                    bounds=[(0, 1)] * m,
                    constraints=[{"type": "ineq", "fun": lambda q: 0.4 * m - q.sum()}])
    assert connectivity(np.array(S.probabilities)) >= -best.fun - 1e-3
