"""Consensus simulation: exact averages, Push-Sum examples worked by hand, and rates."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T

G4 = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3), (3, 0)])
X4 = np.array([1.0, 2.0, 3.0, 4.0])


def test_pushsum_worked_example_iterates() -> None:
    z, w = A.pushsum_consensus(G4, X4, 3, return_weights=True)
    np.testing.assert_allclose(z[1], [21 / 8, 3 / 2, 12 / 5, 18 / 5], rtol=1e-12)
    np.testing.assert_allclose(z[2], [141 / 49, 15 / 7, 51 / 28, 78 / 25], rtol=1e-12)
    np.testing.assert_allclose(z[3], [759 / 278, 33 / 13, 186 / 91, 336 / 131], rtol=1e-12)
    np.testing.assert_allclose(w[3], [139 / 108, 91 / 72, 91 / 108, 131 / 216], rtol=1e-12)
    np.testing.assert_allclose(w.sum(axis=1), 4.0, rtol=1e-14)


def test_pushsum_error_checkpoints_and_rate_vs_slem() -> None:
    errors = A.consensus_error(A.pushsum_consensus(G4, X4, 50))
    assert errors[10] == pytest.approx(8.158e-3, rel=1e-3)
    assert errors[20] == pytest.approx(3.083e-5, rel=1e-3)
    assert errors[50] == pytest.approx(1.692e-12, rel=1e-2)
    assert A.contraction_rate(errors, 20, 50) == pytest.approx(0.5728, abs=1e-4)
    assert A.slem(G4) == pytest.approx(0.5715213299, abs=1e-9)


def random_digraph_schedule(n: int, rounds: int, seed: int) -> list[nx.DiGraph]:
    """Random directed graphs, each a directed ring under a random relabelling plus random
    extra edges: strongly connected every round, irregular degrees."""
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(rounds):
        order = rng.permutation(n)
        G = nx.DiGraph()
        G.add_nodes_from(range(n))
        G.add_edges_from((int(order[i]), int(order[(i + 1) % n])) for i in range(n))
        for _ in range(n):
            i, j = rng.choice(n, size=2, replace=False)
            G.add_edge(int(i), int(j))
        graphs.append(G)
    return graphs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pushsum_reaches_exact_average_on_random_directed_schedules(seed: int) -> None:
    n, rounds = 20, 150
    schedule = random_digraph_schedule(n, rounds, seed)
    x0 = np.random.default_rng(100 + seed).normal(size=(n, 3))
    z, w = A.pushsum_consensus(schedule, x0, rounds, return_weights=True)
    assert z.shape == (rounds + 1, n, 3)
    np.testing.assert_allclose(z[-1], np.broadcast_to(x0.mean(axis=0), (n, 3)), atol=1e-9)
    assert not np.allclose(w[-1], 1.0)  # irregular graphs: the weights did matter
    W = T.column_stochastic(schedule[0])
    assert not np.allclose(W.sum(axis=1), 1.0)  # not doubly stochastic


def test_gossip_reaches_exact_average_and_preserves_it() -> None:
    rng = np.random.default_rng(0)
    schedule = [nx.gnp_random_graph(15, 0.3, seed=int(s)) for s in rng.integers(0, 10**6, 80)]
    x0 = rng.normal(size=(15, 2, 2))
    x = A.gossip_consensus(schedule, x0, 80)
    np.testing.assert_allclose(x.mean(axis=1), np.broadcast_to(x0.mean(0), (81, 2, 2)),
                               atol=1e-12)
    np.testing.assert_allclose(x[-1], np.broadcast_to(x0.mean(0), (15, 2, 2)), atol=1e-9)
    with pytest.raises(ValueError, match="undirected"):
        A.gossip_consensus(T.directed_ring(5), np.ones(5), 1)


TORUS = nx.convert_node_labels_to_integers(nx.grid_2d_graph(5, 5, periodic=True))


@pytest.mark.parametrize(("G", "start", "stop"), [
    (T.ring(16), 40, 60), (TORUS, 30, 50), (T.star(9), 40, 60),
    (T.exponential(16, directed=False), 8, 20),
])
def test_gossip_contraction_rate_equals_slem(G: nx.Graph, start: int, stop: int) -> None:
    """Symmetric W: the error of a generic start decays like slem^t."""
    x0 = np.random.default_rng(1).normal(size=G.number_of_nodes())
    dist = A.consensus_distance(A.gossip_consensus(G, x0, stop))
    rate = A.contraction_rate(np.sqrt(dist), start, stop)
    assert rate == pytest.approx(A.slem(G), rel=2e-3)


def test_static_matrix_input_and_one_peer_exact_averaging() -> None:
    x0 = np.zeros(16)
    x0[0] = 16.0
    x = A.gossip_consensus(None, x0, 4,
                           matrices=lambda t: T.column_stochastic(T.one_peer_exponential(16).at(t)))
    assert [np.count_nonzero(x[t]) for t in range(1, 5)] == [2, 4, 8, 16]
    np.testing.assert_array_equal(x[4], np.ones(16))  # exact in float64 (dyadic entries)
    assert A.rounds_to_consensus(A.consensus_error(x), 1e-12) == 4
    W = T.column_stochastic(G4)
    np.testing.assert_allclose(A.pushsum_consensus(W, X4, 5), A.pushsum_consensus(G4, X4, 5))


def dropped(keep: bool):
    """Hook: message 2 -> 3 lost in round 0; the sender keeps its share
    (rule 1) or the share is lost (rule 3)."""
    W = T.column_stochastic(G4)

    def matrices(t: int) -> np.ndarray:
        if t > 0:
            return W
        W0 = W.copy()
        W0[3, 2] = 0.0
        if keep:
            W0[2, 2] += 1 / 3
        return W0

    return matrices


def test_link_drop_hook_sender_keeps_share() -> None:
    z, w = A.pushsum_consensus(None, X4, 250, matrices=dropped(True), return_weights=True)
    np.testing.assert_allclose(z[1], [21 / 8, 3 / 2, 18 / 7, 4], rtol=1e-12)
    np.testing.assert_allclose(z[3], [747 / 274, 225 / 89, 198 / 95, 18 / 7], rtol=1e-12)
    np.testing.assert_allclose(w.sum(axis=1), 4.0, rtol=1e-14)
    np.testing.assert_allclose(z[-1], 2.5, atol=1e-12)


def test_link_drop_hook_uncompensated_loss_biases_the_limit() -> None:
    z, w = A.pushsum_consensus(None, X4, 250, matrices=dropped(False), return_weights=True)
    np.testing.assert_allclose(z[1], [21 / 8, 3 / 2, 12 / 5, 4], rtol=1e-12)
    np.testing.assert_allclose(w[5].sum(), 11 / 3, rtol=1e-14)
    np.testing.assert_allclose(z[-1], 27 / 11, atol=1e-12)  # not the average 5/2


def test_consensus_helpers_and_errors() -> None:
    traj = np.array([[[0.0], [2.0]], [[1.0], [1.0]]])
    np.testing.assert_allclose(A.consensus_distance(traj), [1.0, 0.0])
    np.testing.assert_allclose(A.consensus_error(traj), [1.0, 0.0])
    assert A.rounds_to_consensus(np.array([3.0, 2.0]), 1.0) is None
    with pytest.raises(ValueError, match="schedule"):
        A.pushsum_consensus(None, X4, 3)
    with pytest.raises(ValueError, match="shape"):
        A.pushsum_consensus(np.eye(3), X4, 1)
    with pytest.raises(ValueError, match="start"):
        A.contraction_rate(np.ones(3), 2, 1)


GRID = nx.convert_node_labels_to_integers(nx.grid_2d_graph(4, 4), ordering="sorted")


@pytest.mark.parametrize(("topology", "src", "expected"), [  # rounds to 1e-3 from node src
    (T.complete(16), 0, 1), (T.star(16), 15, 149), (T.exponential(16), 0, 15),
    (T.one_peer_exponential(16), 0, 4), (GRID, 15, 58), (T.ring(16), 0, 146),
    (T.directed_ring(16), 0, 391),
])
def test_rounds_to_consensus_from_one_source_golden(topology, src: int, expected: int) -> None:
    """Natural matrices (MH if undirected, push rule if directed), x(0) = 16 e_src."""
    x0 = np.zeros(16)
    x0[src] = 16.0
    natural = topology if isinstance(topology, T.OnePeerExponential) else (
        T.doubly_stochastic(topology) if not topology.is_directed()
        else T.column_stochastic(topology))
    errors = A.consensus_error(A.pushsum_consensus(natural, x0, expected + 1))
    assert A.rounds_to_consensus(errors, 1e-3) == expected


def test_pairwise_gossip_expected_tick_by_hand() -> None:
    """Path 0 - 1 - 2: the pairs (0, 1) and (1, 2) each come with probability 1/2, so W_bar is
    their mean; from x0 = [0, 0, 3] one tick leaves a squared error of 6 or 1.5 (mean 3.75 =
    y^T W_bar y); the simulator's ticks average to it."""
    G = nx.path_graph(3)
    W = A.expected_gossip_matrix(G)
    np.testing.assert_allclose(W, [[0.75, 0.25, 0], [0.25, 0.5, 0.25], [0, 0.25, 0.75]],
                               atol=1e-15)
    x0 = np.array([0.0, 0.0, 3.0])
    y = x0 - 1.0
    assert y @ W @ y == pytest.approx(3.75, abs=1e-12)
    rng = np.random.default_rng(0)
    errors = [np.square(A.pairwise_gossip(G, x0, 1, seed=rng)[-1] - 1.0).sum()
              for _ in range(2000)]
    assert set(np.round(errors, 12)) == {6.0, 1.5}
    assert np.mean(errors) == pytest.approx(3.75, abs=0.15)


def test_pairwise_gossip_keeps_the_sum_and_averages_within_boyds_time() -> None:
    G = T.ring(8)
    x0 = np.random.default_rng(1).normal(size=(8, 2))
    low, high = A.averaging_time_bounds(G, 1e-3)
    assert 0 < low < high
    traj = A.pairwise_gossip(G, x0, int(high), every=10, seed=2)
    np.testing.assert_allclose(traj.sum(axis=1), np.broadcast_to(x0.sum(0), (len(traj), 2)),
                               atol=1e-12)
    y0 = x0 - x0.mean(0)
    assert np.linalg.norm(traj[-1] - x0.mean(0)) < 1e-3 * np.linalg.norm(y0)
    with pytest.raises(T.ParameterError, match="^P puts probability on a pair that is not an"):
        A.expected_gossip_matrix(nx.path_graph(3), np.full((3, 3), 1 / 3))
    with pytest.raises(T.ParameterError, match=r"^x0 must have shape \[8, \.\.\.\]"):
        A.pairwise_gossip(G, np.zeros(3), 1)
    with pytest.raises(T.ParameterError, match="^eps must be in"):
        A.averaging_time_bounds(G, 1.0)
    with pytest.raises(T.ParameterError, match="^G gives lambda_2"):
        A.averaging_time_bounds(nx.empty_graph(3), 0.1)


def test_pairwise_gossip_draws_each_partner_from_the_woken_nodes_row(monkeypatch) -> None:
    """The sparse draw (a search in the woken node's own cumulative row, ticks in chunks) equals
    an independent dense one: per chunk the woken nodes, then a uniform u per tick, and the first
    column j whose cumulative P_i1 + ... + P_ij exceeds u; an uneven P on a graph with a hub and a
    node without neighbours (its tick changes nothing)."""
    import analysis.pairwise as pairwise

    monkeypatch.setattr(pairwise, "TICK_CHUNK", 7)
    G = nx.star_graph(4)
    G.add_edges_from([(1, 2), (3, 4)])
    G.add_node(5)
    rng = np.random.default_rng(0)
    P = nx.to_numpy_array(G, nodelist=range(6)) * rng.uniform(0.5, 1.5, (6, 6))
    P[5, 5] = 1.0
    P /= P.sum(axis=1, keepdims=True)
    assert (A.neighbour_probabilities(G).toarray()[0] == [0, 0.25, 0.25, 0.25, 0.25, 0]).all()
    x0 = rng.normal(size=6)
    traj = A.pairwise_gossip(G, x0, 30, P=P, seed=4)
    draws, x, expected = np.random.default_rng(4), x0.copy(), [x0.copy()]
    cum = np.cumsum(P, axis=1)
    for start in range(0, 30, 7):
        woken = draws.integers(6, size=min(7, 30 - start))
        for i, u in zip(woken, draws.random(len(woken)), strict=True):
            j = int(np.flatnonzero(cum[i] > u)[0])
            assert j == i == 5 or G.has_edge(i, j)
            x[i] = x[j] = (x[i] + x[j]) / 2
            expected.append(x.copy())
    assert np.array_equal(traj, np.stack(expected))
