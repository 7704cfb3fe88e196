"""Assumptions that used to be broken silently: FedBuff's buffer at the end of a run, randomized
pairwise gossip's inputs, STL-FW's budget and connectivity, the two neighbourhood heterogeneities,
n_eff on a disconnected graph, `p2pfl analyze`'s edge count, and the random geometric graph."""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T
from p2pfl.cli import main
from p2pfl.config import ConfigError
from p2pfl.engine import run
from p2pfl.engine.builder import build
from p2pfl.engine.events import Simulation
from tests.conftest import small_config

# Phases of 1 s, no transfer time, no jitter: every client is back at each nominal round.
INSTANT = {"network__enabled": True, "network__step_s": 1.0, "network__latency_s": 0.0,
           "network__bandwidth_gbps": 1e290, "algorithm__local_steps": 1}
ONE_CLASS_A_NODE = np.repeat(np.eye(4), 2, axis=0)  # 8 nodes, 4 classes, 2 nodes a class


# ---------------------------------------------------------------- FedBuff's buffer
def test_fedbuff_records_the_updates_waiting_in_its_buffer_and_k_may_exceed_the_clients():
    """6 clients back at every mark, K = 7: after m marks 6m updates were added, so the server
    has stepped 6m // 7 times and 6m % 7 wait in the buffer (a client reports again each time
    it is drawn: K above the 6 clients still steps, at the second mark)."""
    ctx, algorithm = build(small_config(algorithm__name="fedbuff", topology__name="star",
                                        algorithm__buffer_size=7, algorithm__concurrency=6,
                                        **INSTANT))
    sim = Simulation(ctx, algorithm)
    seen = []
    for m in (1, 2, 3):
        sim.advance(float(m))
        record = algorithm.metrics(ctx)
        seen.append((record["server_version"], record["buffered"]))
    assert seen == [(0, 6), (1, 5), (2, 4)]
    assert algorithm.left_undone(ctx).startswith(
        "fedbuff: 4 of the 18 client updates received were still in the buffer at the end, "
        "not applied (the server steps on K = buffer_size = 7)")
    assert "never stepped" not in algorithm.left_undone(ctx)
    algorithm.buffered = 0  # an empty buffer leaves nothing to say
    assert algorithm.left_undone(ctx) == ""


def test_a_fedbuff_run_whose_server_never_stepped_says_so(tmp_path, capsys):
    """K = 10 over 6 clients and one mark: 6 updates, no server step; the row, summary.json and
    the log say it (the run used to end without a word, its metrics the initial model's)."""
    rows = run(small_config(algorithm__name="fedbuff", topology__name="star", rounds=1,
                            algorithm__buffer_size=10, algorithm__concurrency=6, **INSTANT),
               tmp_path, figures=False)
    assert (rows[-1]["server_version"], rows[-1]["buffered"]) == (0, 6)
    assert json.loads((tmp_path / "summary.json").read_text())["final"]["buffered"] == 6
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["p2pfl: fedbuff: 6 of the 6 client updates received were still in the buffer "
                   "at the end, not applied (the server steps on K = buffer_size = 10); the "
                   "server never stepped: every metric is the initial model's (lower "
                   "buffer_size or run more rounds)"]


# ---------------------------------------------------------------- randomized pairwise gossip
def test_pairwise_gossip_refuses_what_it_cannot_run_in_one_line():
    directed = nx.DiGraph([(0, 1), (1, 2)])
    for call in (lambda: A.neighbour_probabilities(directed),
                 lambda: A.expected_gossip_matrix(directed),
                 lambda: A.averaging_time_bounds(directed, 0.1),
                 lambda: A.pairwise_gossip(directed, np.arange(3.0), 5, seed=0)):
        with pytest.raises(T.ParameterError, match="^G must be undirected: a tick averages"):
            call()
    with pytest.raises(T.ParameterError, match="^G has 1 node: .* needs 2 nodes or more$"):
        A.averaging_time_bounds(nx.empty_graph(1), 0.1)  # was an IndexError
    with pytest.raises(T.ParameterError, match="^G has no nodes$"):
        A.pairwise_gossip(nx.empty_graph(0), np.zeros(0), 5)
    path = nx.path_graph(3)
    for kwargs, message in (({"ticks": 5.0}, "^ticks must be an integer >= 0, got 5.0$"),
                            ({"ticks": True}, "^ticks must be an integer >= 0, got True$"),
                            ({"ticks": -1}, "^ticks must be an integer >= 0, got -1$"),
                            ({"ticks": 4, "every": 2.0}, "^every must be an integer >= 1")):
        with pytest.raises(T.ParameterError, match=message):
            A.pairwise_gossip(path, np.arange(3.0), seed=0, **kwargs)
    trajectory = A.pairwise_gossip(path, np.arange(3.0), np.int64(4), every=np.int64(2), seed=0)
    assert trajectory.shape == (3, 3) and trajectory[-1].sum() == pytest.approx(3.0, abs=1e-15)


# ---------------------------------------------------------------- STL-FW and tau(W)
def test_stl_fw_refuses_no_budget_and_a_disconnected_w_at_the_call():
    """budget = 0 used to return W = I (no links); budget 1 on one class a node pairs the nodes
    into 4 groups that never mix, refused only when a run started."""
    for call in (lambda: T.stl_fw(ONE_CLASS_A_NODE, 0),
                 lambda: T.build_schedule("stl_fw", 8, class_counts=ONE_CLASS_A_NODE, budget=0)):
        with pytest.raises(T.ParameterError, match=r"^budget must be an integer in \[1, 7\], "
                                                   r"got 0$"):
            call()
    refused = (r"^budget = 1 gives a W that is not strongly connected \(4 groups that never "
               r"mix, one of nodes \[0, 2\]\): raise budget, lam or max_iter$")
    for call in (lambda: T.stl_fw(ONE_CLASS_A_NODE, 1),
                 lambda: T.stl_fw_graph(ONE_CLASS_A_NODE, 1)):
        with pytest.raises(T.ParameterError, match=refused):
            call()
    W = T.stl_fw(ONE_CLASS_A_NODE, 1, connected=False)  # asked for: to study tau
    assert sorted(np.unique(W).tolist()) == [0.0, 0.5]  # pairs (0, 2), (1, 3), (4, 6), (5, 7)
    assert nx.number_connected_components(nx.Graph(T.from_adjacency(W.T))) == 4
    # each node holds (1/2, 1/2, 0, 0) or (0, 0, 1/2, 1/2) against 1/4 each: 4 x 1/16
    assert T.neighborhood_heterogeneity(W, ONE_CLASS_A_NODE) == pytest.approx(0.25, abs=1e-15)
    G = T.stl_fw_graph(ONE_CLASS_A_NODE, 4)  # enough budget: connected
    assert T.is_strongly_connected(G)
    with pytest.raises(T.ParameterError, match="^proportions has 1 node"):
        T.stl_fw(np.array([[1.0, 0.0]]), 1)


def test_the_two_neighbourhood_heterogeneities_agree_and_refuse_alike():
    rng = np.random.default_rng(0)
    Pi = rng.dirichlet(np.full(3, 0.5), size=6)
    perm = np.eye(6)[:, rng.permutation(6)]
    W = 0.5 * np.roll(np.eye(6), 1, axis=0) + 0.3 * perm + 0.2 * np.eye(6)  # doubly, not symmetric
    assert A.neighborhood_heterogeneity(W, Pi) == T.neighborhood_heterogeneity(W, Pi)
    # 2I: 2.5 from T before, a refusal from A; both refuse now
    with pytest.raises(T.ParameterError, match="^W is not doubly stochastic: column 0 sums to 2"):
        T.neighborhood_heterogeneity(2 * np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match="not column-stochastic: column 0 sums to 2"):
        A.neighborhood_heterogeneity(2 * np.eye(2), np.eye(2))
    # Push-Sum W (column-stochastic only): A's extension, T with the weights A passes
    push = np.array([[1 / 2, 1 / 3], [1 / 2, 2 / 3]])
    with pytest.raises(T.ParameterError, match="^W is not doubly stochastic: row 0 sums to "):
        T.neighborhood_heterogeneity(push, np.eye(2))
    weights = np.array([4 / 5, 6 / 5])  # n pi, pi = (2/5, 3/5)
    assert T.neighborhood_heterogeneity(push, np.eye(2), weights=weights) == pytest.approx(
        169 / 10368, rel=1e-13) == A.neighborhood_heterogeneity(push, np.eye(2))
    with pytest.raises(T.ParameterError, match=r"^weights must be \[2\] finite and > 0"):
        T.neighborhood_heterogeneity(push, np.eye(2), weights=[1.0, 0.0])
    with pytest.raises(T.ParameterError, match=r"^W must be an \[n, n\] matrix with n = 2"):
        T.neighborhood_heterogeneity(np.eye(3), np.eye(2))


def test_n_eff_of_a_disconnected_graph_warns_and_the_summary_says_no_consensus():
    """Two disjoint edges: n_eff is the walk's within a pair (2 as gamma -> 0: each node holds
    half of two noises), with a warning; a connected graph gives no warning."""
    pairs = nx.Graph([(0, 1), (2, 3)])
    with pytest.warns(A.NoConsensusWarning, match=r"not strongly connected \(2 groups"):
        assert A.effective_neighbors(pairs, 0.0) == pytest.approx(2.0, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        A.effective_neighbors(T.ring(6), 0.9)
        summary = A.summary(pairs)
    assert summary["strongly_connected"] is False and summary["no_consensus"]


# ---------------------------------------------------------------- p2pfl analyze's edges
def test_analyze_counts_an_undirected_edge_once(tmp_path, capsys):
    """An edge list of 39 lines read undirected: 39 edges (78 before) and 78 messages a round."""
    G = nx.connected_watts_strogatz_graph(13, 6, 0.2, seed=1)
    assert G.number_of_edges() == 39
    edges = tmp_path / "edges.txt"
    edges.write_text("".join(f"{u} {v}\n" for u, v in G.edges))
    for directed, expected in (("false", (39, 78)), ("true", (39, 39))):
        assert main(["analyze", "from_edges", "--n", "13", "--set", f"path={edges}",
                     "--set", f"directed={directed}", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["edges"], out["messages"]) == expected
    given = A.summary(T.doubly_stochastic(T.ring(8)))  # a symmetric matrix: undirected
    assert (given["directed"], given["edges"], given["messages"]) == (False, 8, 16)


# ---------------------------------------------------------------- random geometric graph
def test_random_geometric_links_exactly_the_pairs_within_its_radius():
    G = T.random_geometric(30, 0.3, seed=4)
    pos = np.array([G.nodes[i]["pos"] for i in range(30)])
    assert pos.shape == (30, 2) and ((pos >= 0) & (pos < 1)).all()
    distance = np.linalg.norm(pos[:, None] - pos[None], axis=2)
    within = {(i, j) for i in range(30) for j in range(i + 1, 30) if distance[i, j] <= 0.3}
    assert {tuple(sorted(e)) for e in G.edges} == within and nx.is_connected(G)
    same = T.random_geometric(30, 0.3, seed=4)
    assert nx.utils.graphs_equal(G, same)  # an int seed: the same graph, positions included
    rng = np.random.default_rng(4)
    assert not nx.utils.graphs_equal(T.random_geometric(30, 0.3, rng),
                                     T.random_geometric(30, 0.3, rng))
    default = T.random_geometric(16, seed=0)  # radius 0: sqrt(2 ln 16 / (16 pi)) = 0.332
    r = math.sqrt(2 * math.log(16) / (16 * math.pi))
    p = np.array([default.nodes[i]["pos"] for i in range(16)])
    d = np.linalg.norm(p[:, None] - p[None], axis=2)
    assert default.number_of_edges() == int(np.triu(d <= r, 1).sum())


def test_random_geometric_redraws_until_connected_and_is_a_config_name():
    with pytest.raises(T.ParameterError, match="^radius = 0.01 gave no connected graph in 5 "
                                               "draws of 10 points: raise radius$"):
        T.random_geometric(10, 0.01, seed=0, tries=5)
    assert T.random_geometric(10, 0.01, seed=0, connected=False).number_of_edges() == 0
    for radius in (-0.1, math.inf, "far", True):
        with pytest.raises(T.ParameterError, match="^radius must be a "):
            T.random_geometric(10, radius)
    built = T.build_schedule("random_geometric", 12, seed=3, radius=0.5).at(0)
    assert nx.utils.graphs_equal(built, T.random_geometric(12, 0.5, seed=3))
    assert small_config(topology__name="random_geometric", topology__radius=0.5).topology.radius \
        == 0.5
    with pytest.raises(ConfigError, match="^topology.radius: "):
        build(small_config(topology__name="random_geometric", topology__radius=-1.0))


# ---------------------------------------------------------------- docs
def test_the_readme_counts_the_named_topologies_and_stl_fw_cites_its_authors():
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert int(re.search(r"\((\d+) named builders", readme).group(1)) == len(T.TOPOLOGIES)
    import topologies.heterogeneity as heterogeneity

    cited = " ".join(heterogeneity.__doc__.split())
    assert "Le Bars, Bellet, Tommasi, Lavoie, Kermarrec, AISTATS 2023" in cited
    assert "Vogels" not in cited
