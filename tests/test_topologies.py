"""Graph builders, schedules, mixing matrices and the registry (golden values: topologies.md)."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction as Fr

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

import topologies as T


def edge_set(G: nx.Graph) -> set[tuple[int, int]]:
    """Edges of G; an undirected edge as (min, max)."""
    return set(G.edges) if G.is_directed() else {(min(e), max(e)) for e in G.edges}


# ---------------------------------------------------------------- builders


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



# ---------------------------------------------------------------- golden spectra


def slem(W: np.ndarray) -> float:
    ev = np.linalg.eigvals(W)
    return float(np.abs(np.delete(ev, np.argmin(np.abs(ev - 1)))).max())


MH, PUSH = T.doubly_stochastic, T.column_stochastic
SQ2, SQ5 = np.sqrt(2), np.sqrt(5)
GOLDEN_STATIC = [
    (lambda: T.ring(8), MH, (1 + SQ2) / 3, 4),
    (lambda: T.ring(16), MH, 1 / 3 + 2 / 3 * np.cos(np.pi / 8), 8),
    (lambda: T.ring(100), MH, 1 / 3 + 2 / 3 * np.cos(np.pi / 50), 50),
    (lambda: T.directed_ring(8), PUSH, np.cos(np.pi / 8), 7),
    (lambda: T.directed_ring(16), PUSH, np.cos(np.pi / 16), 15),
    (lambda: T.directed_ring(100), PUSH, np.cos(np.pi / 100), 99),
    (lambda: T.complete(8), MH, 0.0, 1),
    (lambda: T.complete(100), MH, 0.0, 1),
    (lambda: T.star(8), MH, 0.875, 2),
    (lambda: T.star(16), MH, 0.9375, 2),
    (lambda: T.star(100), MH, 0.99, 2),
    (lambda: T.hypercube(3), MH, 0.5, 3),
    (lambda: T.hypercube(4), MH, 0.6, 4),
    (lambda: T.torus(4, 4), MH, 0.6, 4),
    (lambda: T.torus(8, 8), MH, (3 + SQ2) / 5, 8),
    (lambda: T.torus(10, 10), MH, (7 + SQ5) / 10, 10),
    (lambda: T.grid(2, 4), MH, 0.8535533906, 4),
    (lambda: T.grid(4, 4), MH, 0.8686406183, 6),
    (lambda: T.grid(8, 8), MH, 0.9677046369, 14),
    (lambda: T.grid(10, 10), MH, 0.9794695784, 18),
    (lambda: T.exponential(8), PUSH, 0.5, 3),
    (lambda: T.exponential(16), PUSH, 0.6, 4),
    (lambda: T.exponential(100), PUSH, 0.75, 5),
    (lambda: T.exponential(8, directed=False), MH, 1 / 3, 2),
    (lambda: T.exponential(16, directed=False), MH, 0.5, 2),
    (lambda: T.exponential(100, directed=False), MH, 0.7333333333, 3),
    (lambda: T.watts_strogatz(16, 4, 0.0), MH, 0.8523945255, 4),
    (lambda: T.watts_strogatz(100, 4, 0.0), MH, 0.9960565719, 25),
    (lambda: T.watts_strogatz(100, 10, 0.0), MH, 0.9803760651, 10),
]


@pytest.mark.parametrize(("build", "mix", "expected", "diam"), GOLDEN_STATIC)
def test_golden_slem_and_diameter(build, mix, expected: float, diam: int) -> None:
    G = build()
    W = mix(G)
    assert abs(slem(W) - expected) < 1e-9
    assert nx.diameter(G) == diam
    # the sparse matrix is the same matrix, built without a dense intermediate
    S = mix(G, sparse=True)
    assert isinstance(S, sp.csr_array)
    assert np.array_equal(S.toarray(), W)


@pytest.mark.parametrize(
    ("G", "spectrum"),
    [
        (T.hypercube(4), [-0.6, -0.2, 0.2, 0.6, 1.0]),
        (T.star(8), [0.0, 0.875, 1.0]),
        (T.complete(8), [0.0, 1.0]),
    ],
)
def test_golden_spectra(G: nx.Graph, spectrum: list[float]) -> None:
    ev = np.linalg.eigvalsh(T.doubly_stochastic(G))
    assert sorted(set(np.round(ev, 10) + 0.0)) == spectrum


@pytest.mark.parametrize(("n", "expected"), [(3, 0.0), (4, 1 / 3), (5, 0.5393446629)])
def test_small_rings(n: int, expected: float) -> None:
    assert abs(slem(T.doubly_stochastic(T.ring(n))) - expected) < 1e-9


def test_ring_and_torus_closed_form_spectra() -> None:
    n = 12
    ev = np.sort(np.linalg.eigvalsh(T.doubly_stochastic(T.ring(n))))
    k = np.arange(n)
    np.testing.assert_allclose(ev, np.sort(1 / 3 + 2 / 3 * np.cos(2 * np.pi * k / n)), atol=1e-12)
    a, b = 3, 5
    ev = np.sort(np.linalg.eigvalsh(T.doubly_stochastic(T.torus(a, b))))
    j, m = np.meshgrid(np.arange(a), np.arange(b))
    closed = (1 + 2 * np.cos(2 * np.pi * j / a) + 2 * np.cos(2 * np.pi * m / b)) / 5
    np.testing.assert_allclose(ev, np.sort(closed.ravel()), atol=1e-12)


@pytest.mark.parametrize(
    ("G", "mu2"),
    [
        (T.ring(16), 0.152240934977),
        (T.grid(4, 4), 0.585786437627),
        (T.grid(10, 10), 0.097886967410),
        (T.torus(10, 10), 0.381966011250),
        (T.hypercube(3), 2.0),
        (T.star(100), 1.0),
        (T.line(10), 2 - 2 * np.cos(np.pi / 10)),
    ],
)
def test_golden_algebraic_connectivity(G: nx.Graph, mu2: float) -> None:
    assert abs(sorted(nx.laplacian_spectrum(G))[1] - mu2) < 1e-9


@pytest.mark.parametrize(
    ("n", "diam"), [(8, 3), (12, 3), (16, 4), (32, 5), (64, 6), (100, 5), (128, 7)]
)
def test_exponential_diameters(n: int, diam: int) -> None:
    assert nx.diameter(T.exponential(n)) == diam


def test_grid_torus_hypercube_line_labels() -> None:
    G = T.grid(3, 4)
    assert edge_set(G) == {(r * 4 + c, r * 4 + c + 1) for r in range(3) for c in range(3)} | {
        (r * 4 + c, (r + 1) * 4 + c) for r in range(2) for c in range(4)
    }
    assert sorted(T.torus(3, 4)[5]) == [1, 4, 6, 9]
    assert {d for _, d in T.torus(5, 3).degree()} == {4}
    H = T.hypercube(4)
    assert edge_set(H) == {(i, i | 1 << k) for i in range(16) for k in range(4) if not i & 1 << k}
    assert edge_set(T.line(5)) == {(0, 1), (1, 2), (2, 3), (3, 4)}
    assert T.line(1).number_of_nodes() == 1
    with pytest.raises(ValueError, match="^rows must"):
        T.torus(2, 5)
    with pytest.raises(ValueError, match="^dim must"):
        T.hypercube(0)


def test_hypercube_of_dimension_one_is_one_edge() -> None:
    H = T.hypercube(1)
    assert sorted(H.nodes) == [0, 1] and edge_set(H) == {(0, 1)}
    assert edge_set(T.build_schedule("hypercube", 2).at(0)) == {(0, 1)}
    for dim in (0, -3, 1.5, True):
        with pytest.raises(T.ParameterError, match="^dim must be an integer >= 1") as err:
            T.hypercube(dim)
        assert "\n" not in str(err.value)


# ---------------------------------------------------------------- random graphs


def test_random_builders_structure_and_seeds() -> None:
    for build in (
        lambda s: T.erdos_renyi(40, 0.2, seed=s),
        lambda s: T.erdos_renyi(40, 0.2, seed=s, directed=True),
        lambda s: T.random_regular(40, 3, seed=s),
        lambda s: T.watts_strogatz(40, 4, 0.3, seed=s),
        lambda s: T.barabasi_albert(40, 2, seed=s),
        lambda s: T.random_out_graph(40, 3, seed=s),
    ):
        G = build(1)
        assert sorted(G) == list(range(40)) and nx.number_of_selfloops(G) == 0
        assert edge_set(G) == edge_set(build(1))
        assert edge_set(G) != edge_set(build(2))
        rng = np.random.default_rng
        assert edge_set(build(rng(5))) == edge_set(build(rng(5)))
    assert {d for _, d in T.random_regular(40, 3, seed=0).degree()} == {3}
    assert T.barabasi_albert(40, 2, seed=0).number_of_edges() == 2 * 38
    assert T.erdos_renyi(6, 0.0, seed=0).number_of_edges() == 0
    assert T.erdos_renyi(6, 1.0, seed=0, directed=True).number_of_edges() == 30
    for s in range(5):  # the connected variant redraws
        assert nx.is_connected(T.watts_strogatz(30, 2, 0.5, seed=s))
    # p = 0 is the circulant ring lattice
    assert edge_set(T.watts_strogatz(10, 4, 0.0)) == edge_set(
        nx.circulant_graph(10, [1, 2])
    )


def test_erdos_renyi_edge_frequency() -> None:
    n, p = 200, 0.1
    m = T.erdos_renyi(n, p, seed=0).number_of_edges()
    pairs = n * (n - 1) / 2
    assert abs(m - pairs * p) < 5 * np.sqrt(pairs * p * (1 - p))


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: T.random_regular(5, 3), "d"),
        (lambda: T.random_regular(5, 5), "d"),
        (lambda: T.watts_strogatz(10, 3, 0.1), "k"),
        (lambda: T.watts_strogatz(10, 4, 1.5), "p"),
        (lambda: T.erdos_renyi(10, -0.1), "p"),
        (lambda: T.barabasi_albert(5, 5), "m"),
        (lambda: T.grid(0, 3), "rows"),
    ],
)
def test_random_builders_reject_bad_arguments(call, argument: str) -> None:
    with pytest.raises(T.ParameterError, match=rf"^{argument} ") as err:
        call()
    assert err.value.name == argument


def test_random_regular_at_scale_with_sparse_metropolis_hastings() -> None:
    n = 100_000
    G = T.random_regular(n, 4, seed=0)
    W = T.doubly_stochastic(G, sparse=True)
    assert W.shape == (n, n) and W.nnz == 5 * n
    assert T.is_doubly_stochastic(W) and abs(W - W.T).max() == 0
    assert np.allclose(W.data, 0.2)


# ---------------------------------------------------------------- user graphs


def test_from_adjacency() -> None:
    A = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    G = T.from_adjacency(A)
    assert G.is_directed() and edge_set(G) == {(0, 1), (1, 2), (2, 0)}
    U = T.from_adjacency(A + A.T + np.eye(3))  # symmetric: undirected, diagonal ignored
    assert not U.is_directed() and nx.number_of_selfloops(U) == 0 and U.number_of_edges() == 3
    assert T.from_adjacency(A + A.T, directed=True).number_of_edges() == 6
    assert edge_set(T.from_adjacency(sp.csr_array(A))) == edge_set(G)
    assert edge_set(T.from_adjacency(A, directed=False)) == {(0, 1), (1, 2), (0, 2)}
    with pytest.raises(ValueError, match="symmetric"):
        T.from_adjacency(A, directed=False, weighted=True)
    with pytest.raises(ValueError, match="square"):
        T.from_adjacency(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"negative entry at \[0, 1\]"):
        T.from_adjacency(-A)


def test_weighted_round_trip_through_the_mixing_matrix() -> None:
    # A mixing matrix W (column convention) is the weighted adjacency matrix W.T.
    W = T.column_stochastic(nx.DiGraph(PUSH_SUM_EDGES))
    G = T.from_adjacency(W.T, weighted=True)
    assert G[2][3]["weight"] == 1 / 3
    np.testing.assert_allclose(T.column_stochastic(G), W, rtol=0, atol=1e-15)
    np.testing.assert_allclose(T.column_stochastic(G, sparse=True).toarray(), W, rtol=0, atol=1e-15)


def test_from_edges() -> None:
    G = T.from_edges([(0, 1), (1, 2), (2, 0)], 4)
    assert G.is_directed() and sorted(G) == [0, 1, 2, 3] and G.number_of_edges() == 3
    U = T.from_edges([(0, 1, 0.5), (1, 2, 0.25)], 3, directed=False)
    assert U[1][0]["weight"] == 0.5
    assert np.array_equal(
        T.column_stochastic(U), [[0.5, 0.5, 0.0], [0.5, 0.25, 0.25], [0.0, 0.25, 0.75]]
    )
    with pytest.raises(ValueError, match="self-loop"):
        T.from_edges([(1, 1)], 3)
    with pytest.raises(ValueError, match="edge endpoint must"):
        T.from_edges([(0, 3)], 3)
    with pytest.raises(ValueError, match="all"):
        T.from_edges([(0, 1), (1, 2, 0.5)], 3)


def test_from_networkx_relabels_any_user_graph() -> None:
    user = nx.Graph()
    user.add_edge("paris", "berlin", weight=0.25)
    user.add_edge("berlin", "rome", weight=0.5)
    user.add_edge("rome", "rome")
    G = T.from_networkx(user)
    assert [G.nodes[i]["label"] for i in range(3)] == ["berlin", "paris", "rome"]
    assert edge_set(G) == {(0, 1), (0, 2)} and G[0][1]["weight"] == 0.25
    assert T.is_column_stochastic(T.column_stochastic(G))
    with pytest.raises(ValueError, match="from_networkx"):
        T.static(user)
    with pytest.raises(ValueError, match="multigraph"):
        T.from_networkx(nx.MultiGraph([(0, 1)]))


# ---------------------------------------------------------------- more schedules


def test_cycle_schedule() -> None:
    graphs = [T.ring(6), T.directed_ring(6), T.complete(6)]
    s = T.cycle(graphs)
    assert (s.n, s.period, s.directed, s.needs_losses) == (6, 3, True, False)
    assert all(s.at(t) is graphs[t % 3] for t in range(9))
    with pytest.raises(ValueError, match="^graphs must all have the same nodes"):
        T.cycle([T.ring(5), T.ring(6)])
    with pytest.raises(ValueError, match="^graphs must hold"):
        T.cycle([])


def test_union_window_of_one_peer_is_the_exponential_graph() -> None:
    u = T.union_window(T.one_peer_exponential(16), 4)
    assert (u.n, u.period, u.directed) == (16, 1, True)
    for t in range(3):
        assert edge_set(u.at(t)) == edge_set(T.exponential(16))
    assert T.union_window(T.one_peer_exponential(12), 3).period == 4  # lcm(4, 3) / 3
    assert T.union_window(T.random_out(10, 2, seed=0), 2).period is None
    und = T.union_window(T.cycle([T.line(3), T.directed_ring(3)]), 2)
    assert edge_set(und.at(0)) == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 0)}


def test_b_connectivity_finite_trace_pitfall() -> None:
    # one-peer n = 100 looks aligned-6-connected over 28 rounds, but the window of
    # rounds 36..41 (offsets 2..64, all even) is not strongly connected; B = 7 always works.
    six = T.union_window(T.one_peer_exponential(100), 6)
    assert all(nx.is_strongly_connected(six.at(window)) for window in range(4))
    assert not nx.is_strongly_connected(six.at(6))
    seven = T.union_window(T.one_peer_exponential(100), 7)
    assert seven.period == 1 and nx.diameter(seven.at(0)) == 5


def test_random_regular_schedule() -> None:
    s = T.random_regular_schedule(20, 3, seed=4)
    assert (s.n, s.period, s.directed, s.needs_losses) == (20, None, False, False)
    assert {d for _, d in s.at(7).degree()} == {3}
    assert edge_set(s.at(7)) == edge_set(T.random_regular_schedule(20, 3, seed=4).at(7))
    assert edge_set(s.at(7)) != edge_set(s.at(8))
    with pytest.raises(ValueError, match="^d "):
        T.random_regular_schedule(5, 3, seed=0)


def test_schedule_seed_accepts_a_generator() -> None:
    a = T.random_out(30, 3, seed=np.random.default_rng(1))
    b = T.random_out(30, 3, seed=np.random.default_rng(1))
    assert edge_set(a.at(2)) == edge_set(b.at(2))


# ---------------------------------------------------------------- more mixing


def test_row_stochastic() -> None:
    G = nx.DiGraph(PUSH_SUM_EDGES)
    R = T.row_stochastic(G)
    # node 0 hears from 2 and 3: thirds; node 3 hears from 2 only: halves
    np.testing.assert_array_equal(R[0], [1 / 3, 0, 1 / 3, 1 / 3])
    np.testing.assert_array_equal(R[3], [0, 0, 0.5, 0.5])
    np.testing.assert_allclose(R.sum(axis=1), 1, atol=1e-15)
    # pulling on G is pushing on the reversed graph, transposed
    np.testing.assert_array_equal(R, T.column_stochastic(G.reverse()).T)
    np.testing.assert_array_equal(T.row_stochastic(G, sparse=True).toarray(), R)


@pytest.mark.parametrize(
    "G",
    [T.random_out_graph(30, 4, seed=1), T.barabasi_albert(30, 2, seed=1), T.star(7)],
)
def test_sparse_matches_dense(G: nx.Graph) -> None:
    for mix in (T.column_stochastic, T.row_stochastic):
        np.testing.assert_array_equal(mix(G, sparse=True).toarray(), mix(G))
    if not G.is_directed():
        for method in T.DOUBLY_STOCHASTIC_METHODS:
            dense = T.doubly_stochastic(G, method)
            np.testing.assert_array_equal(T.doubly_stochastic(G, method, sparse=True).toarray(),
                                          dense)


def test_validators_accept_sparse() -> None:
    W = T.column_stochastic(nx.DiGraph(PUSH_SUM_EDGES), sparse=True)
    assert T.is_column_stochastic(W) and not T.is_doubly_stochastic(W)
    with pytest.raises(ValueError, match=r"not doubly stochastic: row 0 sums to 1\.333"):
        T.check_doubly_stochastic(W)
    bad = W.copy()
    bad[3, 3] = -0.5
    with pytest.raises(ValueError, match=r"negative entry at \[3, 3\]"):
        T.check_column_stochastic(bad)
    with pytest.raises(ValueError, match="square"):
        T.check_column_stochastic(sp.csr_array(np.ones((2, 3))))


# ---------------------------------------------------------------- registry


def _params(name: str) -> tuple[int, dict]:
    """A node count and parameters that give a strongly connected instance of `name`."""
    return {
        "hypercube": (8, {}),
        "torus": (9, {}),
        "erdos_renyi": (8, {"p": 0.9}),
        "random_regular": (8, {"d": 3}),
        "random_regular_schedule": (8, {"d": 3}),
        "watts_strogatz": (8, {"k": 4}),
        "random_out_graph": (8, {"k": 4}),
        "random_out": (8, {"k": 3}),
        "epidemic_oracle": (8, {"s": 3}),
        "d_cliques": (8, {"class_counts": ONE_CLASS_A_NODE, "clique_size": 4}),
        "stl_fw": (8, {"class_counts": ONE_CLASS_A_NODE, "budget": 4}),  # 3: 2 groups
    }.get(name, (8, {}))


ONE_CLASS_A_NODE = np.repeat(np.eye(4, dtype=np.int64) * 5, 2, axis=0)  # 8 nodes, 4 classes


def test_registry_builds_every_topology(tmp_path) -> None:
    assert T.TOPOLOGIES[:3] == ("ring", "directed_ring", "line")
    assert set(T.TOPOLOGIES) >= {"grid", "torus", "hypercube", "erdos_renyi", "random_regular",
                                 "watts_strogatz", "barabasi_albert", "from_adjacency",
                                 "from_edges", "random_out_graph", "random_out",
                                 "one_peer_exponential", "random_regular_schedule"}
    np.save(tmp_path / "a.npy", nx.to_numpy_array(T.ring(8)))
    (tmp_path / "e.txt").write_text("".join(f"{i} {(i + 1) % 8}\n" for i in range(8)))
    files = {"from_adjacency": str(tmp_path / "a.npy"), "from_edges": str(tmp_path / "e.txt")}
    for name in T.TOPOLOGIES:
        n, params = _params(name)
        params = params | ({"path": files[name]} if name in files else {})
        s = T.build_schedule(name, n, **params)
        assert isinstance(s, T.Schedule)
        assert s.n == n and sorted(s.at(2).nodes) == list(range(n))
        assert T.is_column_stochastic(T.column_stochastic(s.at(2)))


def test_registry_options(tmp_path) -> None:
    assert edge_set(T.build_schedule("ring", 6).at(0)) == edge_set(T.ring(6))
    assert T.build_schedule("exponential", 16).at(0).is_directed()
    undirected = T.build_schedule("exponential", 16, directed=False).at(0)
    assert not undirected.is_directed() and undirected.degree(0) == 7
    assert T.build_schedule("exponential", 27, base=3).at(0).out_degree(0) == 3
    s = T.build_schedule("random_out", 30, k=4, seed=5)
    assert s.period is None and s.at(0).out_degree(7) == 4
    assert edge_set(s.at(2)) == edge_set(T.random_out(30, 4, seed=5).at(2))
    assert edge_set(s.at(2)) != edge_set(T.build_schedule("random_out", 30, k=4).at(2))
    assert T.build_schedule("one_peer_exponential", 16).period == 4
    # grid / torus shapes: chosen (largest divisor <= sqrt n), or given
    assert edge_set(T.build_schedule("grid", 12).at(0)) == edge_set(T.grid(3, 4))
    assert edge_set(T.build_schedule("grid", 12, cols=6).at(0)) == edge_set(T.grid(2, 6))
    assert edge_set(T.build_schedule("torus", 20, rows=5).at(0)) == edge_set(T.torus(5, 4))
    assert edge_set(T.build_schedule("hypercube", 16).at(0)) == edge_set(T.hypercube(4))
    G = T.build_schedule("watts_strogatz", 20, k=6, p=0.0).at(0)
    assert edge_set(G) == edge_set(T.watts_strogatz(20, 6, 0.0))
    assert edge_set(T.build_schedule("erdos_renyi", 20, p=0.3, seed=2, directed=False).at(0)) == \
        edge_set(T.erdos_renyi(20, 0.3, seed=2))
    assert edge_set(T.build_schedule("barabasi_albert", 20, m=3, seed=1).at(0)) == \
        edge_set(T.barabasi_albert(20, 3, seed=1))
    # window wraps any schedule
    w = T.build_schedule("one_peer_exponential", 16, window=4)
    assert isinstance(w, T.UnionWindow) and edge_set(w.at(0)) == edge_set(T.exponential(16))
    # selection
    loss = T.build_schedule("random_out", 10, k=2, selection="loss_softmax",
                            temperature=0.5)
    assert loss.needs_losses
    # weighted edge list file
    (tmp_path / "w.csv").write_text("0,1,0.5\n1,0,0.25\n")
    with pytest.raises(ValueError, match="^path "):
        T.build_schedule("from_edges", 2, path=str(tmp_path / "missing.txt"))
    (tmp_path / "w.txt").write_text("0 1 0.5\n1 0 0.25\n")
    W = T.column_stochastic(T.build_schedule("from_edges", 2, path=str(tmp_path / "w.txt")).at(0))
    np.testing.assert_array_equal(W, [[0.5, 0.25], [0.5, 0.75]])


def test_edge_file_must_name_every_node(tmp_path) -> None:
    (tmp_path / "e.txt").write_text("0 1\n1 2\n2 0\n")  # nodes 0..2
    path = str(tmp_path / "e.txt")
    assert T.build_schedule("from_edges", 3, path=path).n == 3
    with pytest.raises(T.ParameterError, match=r"^path e.txt: the edge file names nodes 0\.\.2 "
                       r"\(3 nodes\), the run has 5 nodes$"):
        T.build_schedule("from_edges", 5, path=path)
    with pytest.raises(T.ParameterError, match=r"^path e.txt: edge endpoint .*\[0, 1\], got 2$"):
        T.build_schedule("from_edges", 2, path=path)
    np.save(tmp_path / "none.npy", np.zeros((0, 2)))
    with pytest.raises(T.ParameterError, match="names no node, the run has 3 nodes"):
        T.build_schedule("from_edges", 3, path=str(tmp_path / "none.npy"))


@pytest.mark.parametrize(
    ("name", "n", "params", "field"),
    [
        ("no_such_graph", 8, {}, "name"),
        ("random_out", 8, {"k": 8}, "k"),
        ("random_out", 8, {"k": 0}, "k"),
        ("random_out_graph", 8, {"k": 9}, "k"),
        ("random_regular", 5, {"d": 3}, "d"),
        ("random_regular_schedule", 5, {"d": 3}, "d"),
        ("watts_strogatz", 10, {"k": 3}, "k"),
        ("watts_strogatz", 10, {"p": 2.0}, "p"),
        ("barabasi_albert", 5, {"m": 5}, "m"),
        ("ring", 8, {"p": 0.5}, "p"),
        ("erdos_renyi", 5, {"p": 1.5}, "p"),
        ("grid", 12, {"rows": 5}, "rows"),
        ("grid", 12, {"rows": 3, "cols": 5}, "rows"),
        ("torus", 14, {}, "rows"),
        ("hypercube", 12, {}, "n"),
        ("ring", 8, {"selection": "loss_based"}, "selection"),
        ("random_out", 8, {"k": 3, "selection": "best"}, "selection"),
        ("random_out", 8, {"k": 3, "selection": "loss_softmax", "temperature": 0.0},
         "temperature"),
        ("ring", 8, {"window": 0}, "window"),
        ("from_adjacency", 8, {}, "path"),
    ],
)
def test_registry_errors_name_the_parameter(name: str, n: int, params: dict, field: str) -> None:
    with pytest.raises(T.ParameterError, match=rf"^{field} ") as err:
        T.build_schedule(name, n, **params)
    assert err.value.name == field
