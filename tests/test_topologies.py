"""Graph builders, schedules, mixing matrices and the registry (golden values: topologies.md)."""

from __future__ import annotations

import doctest
import itertools
from collections import Counter
from fractions import Fraction as Fr

import networkx as nx
import numpy as np
import pytest

import topologies as T
from topologies import builders


def edge_set(G: nx.Graph) -> set[tuple[int, int]]:
    return set(G.edges)


# ---------------------------------------------------------------- builders


def test_builder_docstring_examples() -> None:
    assert doctest.testmod(builders).failed == 0


def test_ring_and_directed_ring() -> None:
    G = T.ring(6)
    assert not G.is_directed()
    assert {d for _, d in G.degree()} == {2}
    assert G.has_edge(5, 0) and G.has_edge(0, 1)
    D = T.directed_ring(6)
    assert D.is_directed()
    assert edge_set(D) == {(i, (i + 1) % 6) for i in range(6)}
    assert edge_set(T.directed_ring(2)) == {(0, 1), (1, 0)}


def test_complete_and_star() -> None:
    assert T.complete(6).number_of_edges() == 15
    S = T.star(6)
    assert S.degree(0) == 5
    assert edge_set(S) == {(0, i) for i in range(1, 6)}


@pytest.mark.parametrize(
    ("n", "offsets"),
    [(8, [1, 2, 4]), (16, [1, 2, 4, 8]), (12, [1, 2, 4, 8]), (100, [1, 2, 4, 8, 16, 32, 64])],
)
def test_exponential_directed(n: int, offsets: list[int]) -> None:
    G = T.exponential(n)
    assert G.is_directed()
    assert edge_set(G) == {(i, (i + o) % n) for i in range(n) for o in offsets}
    assert nx.number_of_selfloops(G) == 0


@pytest.mark.parametrize(("n", "degree"), [(8, 5), (16, 7), (100, 14)])
def test_exponential_undirected_degree(n: int, degree: int) -> None:
    G = T.exponential(n, directed=False)
    assert not G.is_directed()
    assert {d for _, d in G.degree()} == {degree}
    assert set(G[0]) == {o % n for p in (1, 2, 4, 8, 16, 32, 64) if p < n for o in (p, -p)}


@pytest.mark.parametrize(
    ("n", "base", "offsets"), [(244, 3, {1, 3, 9, 27, 81, 243}), (1001, 10, {1, 10, 100, 1000})]
)
def test_exponential_integer_power_test(n: int, base: int, offsets: set[int]) -> None:
    # math.log(243, 3) = 4.999999999999999: a float power test would miss the largest offset.
    assert set(T.exponential(n, base=base).successors(0)) == offsets


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: T.ring(2), "n"),
        (lambda: T.directed_ring(1), "n"),
        (lambda: T.star(1), "n"),
        (lambda: T.complete(0), "n"),
        (lambda: T.exponential(8, base=1), "base"),
        (lambda: T.exponential(2.5), "n"),
        (lambda: T.random_out_graph(5, 5), "k"),
        (lambda: T.random_out_graph(5, 0), "k"),
    ],
)
def test_builders_reject_bad_arguments(call, argument: str) -> None:
    with pytest.raises(ValueError, match=rf"^{argument} must"):
        call()


def test_random_out_graph() -> None:
    G = T.random_out_graph(50, 4, seed=7)
    assert dict(G.out_degree()) == {i: 4 for i in range(50)}
    assert nx.number_of_selfloops(G) == 0
    assert edge_set(G) == edge_set(T.random_out_graph(50, 4, seed=7))
    assert edge_set(G) != edge_set(T.random_out_graph(50, 4, seed=8))
    rng = np.random.default_rng(7)
    assert edge_set(T.random_out_graph(50, 4, seed=rng)) == edge_set(G)


# ---------------------------------------------------------------- schedules


def test_static_schedule() -> None:
    G = T.ring(5)
    s = T.static(G)
    assert isinstance(s, T.Schedule)
    assert (s.n, s.period, s.directed) == (5, 1, False)
    assert s.at(0) is G and s.at(17) is G
    assert T.as_schedule(G).at(3) is G
    assert T.as_schedule(s) is s
    assert T.static(T.directed_ring(4)).directed
    with pytest.raises(TypeError):
        T.as_schedule([[0.5, 0.5], [0.5, 0.5]])


def test_static_rejects_bad_graphs() -> None:
    with pytest.raises(ValueError, match="0..2"):
        T.static(nx.relabel_nodes(nx.path_graph(3), {0: 5}))
    loop = T.ring(4)
    loop.add_edge(2, 2)
    with pytest.raises(ValueError, match="self-loop at node 2"):
        T.static(loop)


def test_one_peer_exponential_graphs() -> None:
    s = T.one_peer_exponential(16)
    assert (s.n, s.period, s.directed) == (16, 4, True)
    for t in range(10):
        assert edge_set(s.at(t)) == {(i, (i + 2 ** (t % 4)) % 16) for i in range(16)}
    assert T.one_peer_exponential(12).period == 4
    assert T.one_peer_exponential(100).period == 7
    assert T.one_peer_exponential(2).period == 1


@pytest.mark.parametrize("n", [4, 8, 16, 32, 64])
def test_one_peer_exponential_exact_average(n: int) -> None:
    s = T.one_peer_exponential(n)
    J = np.full((n, n), 1.0 / n)
    for t0 in range(2 * s.period):
        P = np.eye(n)
        for t in range(t0, t0 + s.period):
            P = T.column_stochastic(s.at(t)) @ P
        assert np.array_equal(P, J), t0


def test_one_peer_exponential_trajectory_n16() -> None:
    s = T.one_peer_exponential(16)
    x = np.zeros(16)
    x[0] = 16.0
    for t, (count, value) in enumerate([(2, 8.0), (4, 4.0), (8, 2.0), (16, 1.0)]):
        x = T.column_stochastic(s.at(t)) @ x
        assert np.count_nonzero(x) == count
        assert set(x[x != 0]) == {value}
    assert np.array_equal(x, np.ones(16))


def test_random_out_schedule_structure() -> None:
    s = T.random_out(40, 5, seed=3)
    assert isinstance(s, T.Schedule)
    assert (s.n, s.period, s.directed) == (40, None, True)
    for t in range(5):
        G = s.at(t)
        assert sorted(G.nodes) == list(range(40))
        assert dict(G.out_degree()) == {i: 5 for i in range(40)}
        assert nx.number_of_selfloops(G) == 0
        W = T.column_stochastic(G)
        assert np.allclose(W.sum(axis=0), 1.0, rtol=0, atol=1e-12)
        assert np.allclose(W[W > 0], 1 / 6, rtol=0, atol=1e-15)


def test_random_out_schedule_reproducible() -> None:
    s = T.random_out(40, 5, seed=3)
    assert edge_set(s.at(4)) == edge_set(T.random_out(40, 5, seed=3).at(4))
    assert edge_set(s.at(4)) == edge_set(s.at(4))
    # at(t) depends on (seed, t) only, not on which rounds were drawn before
    fresh = T.random_out(40, 5, seed=3)
    assert edge_set(fresh.at(9)) == edge_set(s.at(9))
    assert edge_set(s.at(4)) != edge_set(s.at(5))
    assert edge_set(s.at(4)) != edge_set(T.random_out(40, 5, seed=4).at(4))


@pytest.mark.parametrize(
    ("n", "k"),
    [(7, 2), (11, 3), (4, 2), (6, 3)],  # n - 1 > k^2: Floyd's sampler, otherwise random keys
)
def test_random_out_subsets_uniform(n: int, k: int) -> None:
    s = T.random_out(n, k, seed=11)
    rounds = 3000
    counts: Counter[tuple[int, frozenset[int]]] = Counter()
    for t in range(rounds):
        G = s.at(t)
        counts.update((i, frozenset(G.successors(i))) for i in range(n))
    subsets = [frozenset(c) for c in itertools.combinations(range(n - 1), k)]
    p = 1 / len(subsets)
    sd = np.sqrt(rounds * p * (1 - p))
    for i in range(n):
        for subset in subsets:
            targets = frozenset(j + (j >= i) for j in subset)
            assert abs(counts[i, targets] - rounds * p) < 5 * sd, (i, sorted(targets))


def test_random_out_schedule_fast_at_scale() -> None:
    G = T.random_out(1000, 10, seed=0).at(123)
    assert G.number_of_edges() == 10_000
    assert nx.number_of_selfloops(G) == 0


def test_random_out_schedule_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="^k must"):
        T.random_out(10, 10, seed=0)
    with pytest.raises(ValueError, match="^seed must"):
        T.random_out(10, 3, seed=-1)


# ---------------------------------------------------------------- mixing

PUSH_SUM_EDGES = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 0)]
PUSH_SUM_W = [
    [Fr(1, 2), Fr(0), Fr(1, 3), Fr(1, 2)],
    [Fr(1, 2), Fr(1, 2), Fr(0), Fr(0)],
    [Fr(0), Fr(1, 2), Fr(1, 3), Fr(0)],
    [Fr(0), Fr(0), Fr(1, 3), Fr(1, 2)],
]


def test_column_stochastic_push_sum_example() -> None:
    W = T.column_stochastic(nx.DiGraph(PUSH_SUM_EDGES))
    assert W.dtype == np.float64
    assert np.array_equal(W, np.array(PUSH_SUM_W, dtype=float))
    np.testing.assert_allclose(W.sum(axis=1), [4 / 3, 1, 5 / 6, 5 / 6], rtol=1e-15)
    assert T.is_column_stochastic(W) and not T.is_doubly_stochastic(W)


def test_push_sum_example_three_rounds() -> None:
    W = T.column_stochastic(nx.DiGraph(PUSH_SUM_EDGES))
    x, w = np.array([1.0, 2.0, 3.0, 4.0]), np.ones(4)
    expected = {
        1: ([Fr(7, 2), Fr(3, 2), Fr(2), Fr(3)], [Fr(4, 3), Fr(1), Fr(5, 6), Fr(5, 6)]),
        2: (
            [Fr(47, 12), Fr(5, 2), Fr(17, 12), Fr(13, 6)],
            [Fr(49, 36), Fr(7, 6), Fr(7, 9), Fr(25, 36)],
        ),
        3: (
            [Fr(253, 72), Fr(77, 24), Fr(31, 18), Fr(14, 9)],
            [Fr(139, 108), Fr(91, 72), Fr(91, 108), Fr(131, 216)],
        ),
    }
    z_expected = {
        1: [Fr(21, 8), Fr(3, 2), Fr(12, 5), Fr(18, 5)],
        2: [Fr(141, 49), Fr(15, 7), Fr(51, 28), Fr(78, 25)],
        3: [Fr(759, 278), Fr(33, 13), Fr(186, 91), Fr(336, 131)],
    }
    for t in (1, 2, 3):
        x, w = W @ x, W @ w
        x_exact, w_exact = expected[t]
        np.testing.assert_allclose(x, [float(v) for v in x_exact], rtol=1e-12, atol=0)
        np.testing.assert_allclose(w, [float(v) for v in w_exact], rtol=1e-12, atol=0)
        np.testing.assert_allclose(x / w, [float(v) for v in z_expected[t]], rtol=1e-12, atol=0)
        assert abs(x.sum() - 10) <= 1e-12 and abs(w.sum() - 4) <= 1e-12


def test_column_stochastic_undirected_counts_both_ways() -> None:
    W = T.column_stochastic(T.star(4))
    assert np.allclose(W[:, 0], 0.25)  # hub: 3 neighbours + itself
    for leaf in (1, 2, 3):
        expected = np.zeros(4)
        expected[[0, leaf]] = 0.5
        assert np.array_equal(W[:, leaf], expected)


def test_column_stochastic_with_weights() -> None:
    G = nx.DiGraph()
    G.add_nodes_from(range(3))
    G.add_weighted_edges_from([(0, 1, 0.25), (0, 2, 0.5), (1, 2, 1.0), (2, 0, 0.125)])
    expected = np.array(
        [
            [0.25, 0.0, 0.125],
            [0.25, 0.0, 0.0],
            [0.5, 1.0, 0.875],
        ]
    )
    assert np.array_equal(T.column_stochastic(G), expected)


def test_column_stochastic_rejects_bad_weights() -> None:
    G = nx.DiGraph()
    G.add_weighted_edges_from([(0, 1, 0.75), (0, 2, 0.5), (1, 0, 0.5), (2, 0, 0.5)])
    with pytest.raises(ValueError, match="node 0 sends weights summing to 1.25"):
        T.column_stochastic(G)
    G[0][2]["weight"] = -0.1
    with pytest.raises(ValueError, match="negative weight"):
        T.column_stochastic(G)
    del G[0][2]["weight"]
    with pytest.raises(ValueError, match="'weight'"):
        T.column_stochastic(G)


def test_metropolis_hastings_by_hand() -> None:
    # triangle 0-1-2 with pendant 3 on node 2: degrees 2, 2, 3, 1
    G = nx.Graph([(0, 1), (1, 2), (2, 0), (2, 3)])
    q = Fr(1, 4)
    expected = [
        [1 - Fr(1, 3) - q, Fr(1, 3), q, 0],
        [Fr(1, 3), 1 - Fr(1, 3) - q, q, 0],
        [q, q, 1 - 3 * q, q],
        [0, 0, q, 1 - q],
    ]
    W = T.doubly_stochastic(G)
    np.testing.assert_allclose(W, np.array(expected, dtype=float), rtol=0, atol=1e-15)
    assert T.is_doubly_stochastic(W) and np.array_equal(W, W.T)
    # the same graph given as a symmetric DiGraph
    np.testing.assert_allclose(T.doubly_stochastic(nx.DiGraph(G)), W, rtol=0, atol=1e-15)


def test_max_degree_by_hand() -> None:
    G = nx.Graph([(0, 1), (1, 2), (2, 0), (2, 3)])  # d_max = 3: every edge 1/4
    expected = np.array(
        [
            [0.5, 0.25, 0.25, 0.0],
            [0.25, 0.5, 0.25, 0.0],
            [0.25, 0.25, 0.25, 0.25],
            [0.0, 0.0, 0.25, 0.75],
        ]
    )
    np.testing.assert_allclose(T.doubly_stochastic(G, "max_degree"), expected, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="method"):
        T.doubly_stochastic(G, "sinkhorn")


def test_metropolis_hastings_star_and_regular() -> None:
    n = 8
    W = T.doubly_stochastic(T.star(n))
    assert np.allclose(W[0, 1:], 1 / n) and np.isclose(W[0, 0], 1 / n)
    assert np.allclose(np.diag(W)[1:], 1 - 1 / n)
    # on a d-regular graph MH is (I + A) / (d + 1)
    A = nx.to_numpy_array(T.exponential(16, directed=False))
    np.testing.assert_allclose(
        T.doubly_stochastic(T.exponential(16, directed=False)), (np.eye(16) + A) / 8, atol=1e-15
    )


def test_doubly_stochastic_rejects_directed() -> None:
    with pytest.raises(ValueError, match="needs an undirected topology"):
        T.doubly_stochastic(T.directed_ring(5))
    with pytest.raises(ValueError, match="needs an undirected topology"):
        T.doubly_stochastic(nx.DiGraph(PUSH_SUM_EDGES))


def test_check_column_stochastic_messages() -> None:
    W = np.array(T.column_stochastic(T.directed_ring(5)))
    T.check_column_stochastic(W)
    W[3, 3] -= 0.1
    with pytest.raises(ValueError, match=r"column 3 sums to 0\.9, not 1"):
        T.check_column_stochastic(W)
    assert not T.is_column_stochastic(W)
    W[0, 3] = -0.2
    with pytest.raises(ValueError, match=r"negative entry at \[0, 3\]"):
        T.check_column_stochastic(W)
    with pytest.raises(ValueError, match="square"):
        T.check_column_stochastic(np.ones((2, 3)) / 2)
    with pytest.raises(ValueError, match="non-finite"):
        T.check_column_stochastic(np.full((2, 2), np.nan))


def test_check_doubly_stochastic_messages() -> None:
    W = T.column_stochastic(nx.DiGraph(PUSH_SUM_EDGES))
    T.check_column_stochastic(W)
    with pytest.raises(ValueError, match=r"not doubly stochastic: row 0 sums to 1\.333"):
        T.check_doubly_stochastic(W)
    T.check_doubly_stochastic(T.doubly_stochastic(T.ring(7)))
    assert T.is_doubly_stochastic(T.doubly_stochastic(T.ring(7)))
    assert T.is_column_stochastic(np.eye(3) + 1e-11)
    assert not T.is_column_stochastic(np.eye(3) + 1e-9)


# ---------------------------------------------------------------- registry


def test_registry_builds_every_topology() -> None:
    assert T.TOPOLOGIES == (
        "ring",
        "directed_ring",
        "exponential",
        "complete",
        "star",
        "random_out",
        "one_peer_exponential",
    )
    for name in T.TOPOLOGIES:
        s = T.build_schedule(name, 8, out_degree=3)
        assert isinstance(s, T.Schedule)
        assert s.n == 8 and sorted(s.at(2).nodes) == list(range(8))
        assert T.is_column_stochastic(T.column_stochastic(s.at(2)))


def test_registry_options() -> None:
    assert edge_set(T.build_schedule("ring", 6).at(0)) == edge_set(T.ring(6))
    assert T.build_schedule("exponential", 16).at(0).is_directed()
    undirected = T.build_schedule("exponential", 16, directed=False).at(0)
    assert not undirected.is_directed() and undirected.degree(0) == 7
    assert T.build_schedule("exponential", 27, base=3).at(0).out_degree(0) == 3
    s = T.build_schedule("random_out", 30, out_degree=4, seed=5)
    assert s.period is None and s.at(0).out_degree(7) == 4
    assert edge_set(s.at(2)) == edge_set(T.random_out(30, 4, seed=5).at(2))
    assert edge_set(s.at(2)) != edge_set(T.build_schedule("random_out", 30, out_degree=4).at(2))
    assert T.build_schedule("one_peer_exponential", 16).period == 4


def test_registry_errors() -> None:
    with pytest.raises(ValueError, match="unknown topology 'torus'.*ring, directed_ring"):
        T.build_schedule("torus", 8)
    with pytest.raises(ValueError, match="^out_degree must"):
        T.build_schedule("random_out", 8, out_degree=8)
    with pytest.raises(ValueError, match="^out_degree must"):
        T.build_schedule("random_out", 8, out_degree=0)
