"""Lost messages and offline nodes: golden dropped-message example (docs/topologies.md),
mass conservation and exact averaging under random faults, symmetric re-weighting."""

from __future__ import annotations

from fractions import Fraction as Fr

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

import topologies as T

G4 = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3), (3, 0)])
X0 = np.array([1.0, 2.0, 3.0, 4.0])


def lose(n: int, *messages: tuple[int, int], offline: tuple[int, ...] = ()) -> T.Faults:
    """Faults losing the messages i -> j and taking `offline` nodes down."""
    f = T.Faults.none(n)
    for i, j in messages:
        f.links[j, i] = True
    f.nodes[list(offline)] = True
    return f


def test_faults_container() -> None:
    f = T.Faults.none(3)
    assert f.n == 3 and f.links.shape == (3, 3) and not f.links.any() and not f.nodes.any()
    with pytest.raises(ValueError, match="links must be a bool array"):
        T.Faults(np.zeros((3, 2), dtype=bool), np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="nodes must be a bool array"):
        T.Faults(np.zeros((3, 3), dtype=bool), np.zeros(3))
    with pytest.raises(ValueError, match="faults are for 3 nodes, the graph has 4"):
        T.column_stochastic(G4, f)
    assert np.array_equal(T.column_stochastic(G4, T.Faults.none(4)), T.column_stochastic(G4))


def test_golden_lost_message_sender_keeps_share() -> None:
    # Message 2 -> 3 lost in round 0; later rounds use the full W.
    W0 = T.column_stochastic(G4, lose(4, (2, 3)))
    assert np.array_equal(W0[:, 2], [1 / 3, 0, 2 / 3, 0])
    W = T.column_stochastic(G4)
    expected = {
        1: ([Fr(7, 2), Fr(3, 2), Fr(3), Fr(2)], [Fr(4, 3), Fr(1), Fr(7, 6), Fr(1, 2)]),
        2: ([Fr(15, 4), Fr(5, 2), Fr(7, 4), Fr(2)], [Fr(47, 36), Fr(7, 6), Fr(8, 9), Fr(23, 36)]),
        3: ([Fr(83, 24), Fr(25, 8), Fr(11, 6), Fr(19, 12)],
            [Fr(137, 108), Fr(89, 72), Fr(95, 108), Fr(133, 216)]),
    }
    z3 = [Fr(747, 274), Fr(225, 89), Fr(198, 95), Fr(18, 7)]
    x, w = W0 @ X0, W0 @ np.ones(4)
    for t in (1, 2, 3):
        if t > 1:
            x, w = W @ x, W @ w
        np.testing.assert_allclose(x, [float(v) for v in expected[t][0]], rtol=1e-12, atol=0)
        np.testing.assert_allclose(w, [float(v) for v in expected[t][1]], rtol=1e-12, atol=0)
        assert abs(x.sum() - 10) <= 1e-12 and abs(w.sum() - 4) <= 1e-12
    np.testing.assert_allclose(x / w, [float(v) for v in z3], rtol=1e-12, atol=0)
    for _ in range(250):
        x, w = W @ x, W @ w
    np.testing.assert_allclose(x / w, 2.5, rtol=0, atol=1e-12)


def test_lost_message_renormalise_rule() -> None:
    # rule 2: node 2 knows 2 -> 3 fails and splits over itself and node 0 only
    W0 = T.column_stochastic(G4, lose(4, (2, 3)), fault_rule="renormalise")
    assert np.array_equal(W0[:, 2], [0.5, 0, 0.5, 0])
    assert np.array_equal(W0[:, [0, 1, 3]], T.column_stochastic(G4)[:, [0, 1, 3]])
    with pytest.raises(ValueError, match="fault_rule"):
        T.column_stochastic(G4, lose(4), fault_rule="drop")


def test_offline_node_keeps_its_mass_and_messages_to_it_return() -> None:
    W = T.column_stochastic(G4, lose(4, offline=(0,)))
    assert np.array_equal(W[:, 0], [1, 0, 0, 0])  # node 0 keeps everything
    assert np.array_equal(W[:, 3], [0, 0, 0, 1])  # 3 -> 0 is lost: 3 keeps its half
    np.testing.assert_array_equal(W[:, 2], [0, 0, 2 / 3, 1 / 3])  # 2 -> 0 returned to 2
    np.testing.assert_allclose(W.sum(axis=0), 1, atol=1e-15)
    R = T.column_stochastic(G4, lose(4, offline=(0,)), fault_rule="renormalise")
    np.testing.assert_array_equal(R[:, 0], [1, 0, 0, 0])
    np.testing.assert_array_equal(R[:, 2], [0, 0, 0.5, 0.5])


def test_weighted_graph_faults() -> None:
    G = nx.DiGraph()
    G.add_weighted_edges_from([(0, 1, 0.25), (0, 2, 0.75), (1, 0, 0.5), (2, 0, 1.0)])
    W = T.column_stochastic(G, lose(3, (0, 2)))
    np.testing.assert_array_equal(W[:, 0], [0.75, 0.25, 0])
    R = T.column_stochastic(G, lose(3, (0, 2)), fault_rule="renormalise")
    np.testing.assert_array_equal(R[:, 0], [0, 1, 0])  # no self share: all to the survivor
    R = T.column_stochastic(G, lose(3, (2, 0)), fault_rule="renormalise")
    np.testing.assert_array_equal(R[:, 2], [0, 0, 1])  # nothing kept, nothing delivered


def test_row_stochastic_faults_return_weight_to_the_receiver() -> None:
    R = T.row_stochastic(G4, lose(4, (2, 0)))
    np.testing.assert_array_equal(R[0], [2 / 3, 0, 0, 1 / 3])
    np.testing.assert_allclose(R.sum(axis=1), 1, atol=1e-15)


def test_doubly_stochastic_drops_the_link_both_ways_and_reweights() -> None:
    W = T.doubly_stochastic(T.ring(4), faults=lose(4, (0, 1)))
    # the ring 0-1-2-3-0 without {0, 1} is the path 1-2-3-0 with MH weights
    third = 1 / 3
    expected = np.array([
        [2 * third, 0, 0, third],
        [0, 2 * third, third, 0],
        [0, third, third, third],
        [third, 0, third, third],
    ])
    np.testing.assert_allclose(W, expected, rtol=0, atol=1e-15)
    W = T.doubly_stochastic(T.complete(5), "max_degree", lose(5, offline=(4,)))
    assert np.array_equal(W[4], [0, 0, 0, 0, 1])
    np.testing.assert_allclose(W[:4, :4], np.full((4, 4), 0.25), atol=1e-15)


@pytest.mark.parametrize("link_drop", [0.0, 0.3, 0.9])
def test_column_sums_under_link_drops(link_drop: float) -> None:
    s = T.random_out(60, 6, seed=2)
    for t in range(10):
        G = s.at(t)
        f = T.sample_faults(G, link_drop, 0.1, seed=t)
        for rule in T.FAULT_RULES:
            W = T.column_stochastic(G, f, fault_rule=rule)
            np.testing.assert_allclose(W.sum(axis=0), 1, rtol=0, atol=1e-15)
            assert T.is_column_stochastic(T.column_stochastic(G, f, fault_rule=rule, sparse=True))
            np.testing.assert_array_equal(
                T.column_stochastic(G, f, fault_rule=rule, sparse=True).toarray(), W)
        U = T.random_regular(60, 4, seed=t)
        f = T.sample_faults(U, link_drop, 0.1, seed=t)
        for method in T.DOUBLY_STOCHASTIC_METHODS:
            D = T.doubly_stochastic(U, method, f)
            assert T.is_doubly_stochastic(D) and np.array_equal(D, D.T)
            assert (D[f.nodes][:, ~f.nodes] == 0).all()  # offline nodes are isolated


def test_push_sum_mass_conserved_under_random_faults() -> None:
    n, rounds = 50, 400
    s = T.random_out(n, 4, seed=0)
    x = np.random.default_rng(0).standard_normal((n, 3))
    w = np.ones(n)
    total, scale = x.sum(axis=0), np.abs(x).sum()
    for t in range(rounds):
        G = s.at(t)
        W = T.column_stochastic(G, T.sample_faults(G, 0.3, 0.1, seed=t), sparse=t % 2 == 1)
        x, w = W @ x, W @ w
        # |sum x(t) - sum x(0)| <= 1e-12 t sum|x(0)|, the same for w (sum w = n)
        assert abs(w.sum() - n) <= 1e-12 * (t + 1) * n
        assert np.abs(x.sum(axis=0) - total).max() <= 1e-12 * (t + 1) * scale
    assert abs(w.sum() - n) <= 1e-11  # measured: about 1e-12 after 400 rounds


def test_push_sum_reaches_the_exact_average_with_dropped_messages() -> None:
    n = 16
    G = T.exponential(n)
    x = np.arange(n, dtype=float) ** 2
    average = x.mean()
    w = np.ones(n)
    union = nx.DiGraph()
    for t in range(300):
        f = T.sample_faults(G, 0.3, 0.1, seed=100 + t)
        W = T.column_stochastic(G, f)
        x, w = W @ x, W @ w
        if t < 10:  # the delivered edges of the first window are jointly strongly connected
            union.add_edges_from((i, j) for j, i in np.argwhere(W > 0) if i != j)
    assert nx.is_strongly_connected(union)
    np.testing.assert_allclose(x / w, average, rtol=1e-12)


def test_sample_faults() -> None:
    G = T.random_out_graph(200, 10, seed=0)
    f = T.sample_faults(G, 0.3, 0.2, seed=5)
    A = nx.to_numpy_array(G, dtype=bool).T  # A[j, i]: message i -> j exists
    assert not (f.links & ~A).any()  # only messages of G are lost
    m = A.sum()
    assert abs(f.links.sum() - 0.3 * m) < 5 * np.sqrt(m * 0.3 * 0.7)
    assert abs(f.nodes.sum() - 0.2 * 200) < 5 * np.sqrt(200 * 0.2 * 0.8)
    same = T.sample_faults(G, 0.3, 0.2, seed=5)
    assert np.array_equal(same.links, f.links) and np.array_equal(same.nodes, f.nodes)
    more = T.sample_faults(G, 0.6, 0.4, seed=5)
    assert not (f.links & ~more.links).any() and not (f.nodes & ~more.nodes).any()
    gen = T.sample_faults(G, 0.3, 0.2, seed=np.random.default_rng(5))
    assert np.array_equal(gen.links, f.links)
    sparse = T.sample_faults(G, 0.3, 0.2, seed=5, sparse=True)
    assert sp.issparse(sparse.links) and np.array_equal(sparse.links.toarray(), f.links)
    np.testing.assert_array_equal(T.column_stochastic(G, sparse), T.column_stochastic(G, f))
    none = T.sample_faults(G, 0.0, 0.0, seed=1)
    assert not none.links.any() and not none.nodes.any()


def test_sample_faults_undirected_edge_is_two_messages() -> None:
    G = T.complete(40)
    f = T.sample_faults(G, 0.5, 0.0, seed=3)
    upper = np.triu_indices(40, 1)
    one_way = f.links[upper] != f.links.T[upper]
    assert one_way.any()  # the two directions are drawn independently
    assert not np.diag(f.links).any()
    with pytest.raises(ValueError, match=r"^link_drop must be a number in \[0, 1\)"):
        T.sample_faults(G, 1.0, 0.0, seed=0)
    with pytest.raises(ValueError, match="^node_drop must"):
        T.sample_faults(G, 0.0, -0.1, seed=0)


def test_a_node_that_delivers_nothing_keeps_exactly_its_own_row():
    """Six shares of 1/6 added back sum to 1 - 2^-52, not 1: an owner whose every message is
    lost keeps exactly 1 (found by tests/test_mixing_properties.py), so its model is unchanged."""
    G = nx.DiGraph([(0, j) for j in range(1, 6)] + [(j, 0) for j in range(1, 6)])
    offline = T.Faults(np.zeros((6, 6), dtype=bool), np.array([True] + [False] * 5))
    W = T.column_stochastic(G, offline)
    assert W[0, 0] == 1.0 and W[1:, 0].sum() == 0.0
