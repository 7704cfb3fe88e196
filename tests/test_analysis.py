"""Spectral and connectivity metrics against the golden values of topologies.md, section 3."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T

ATOL = 1e-9  # closed-form spectral quantities, n <= 100


def natural(name: str, n: int) -> tuple[np.ndarray, nx.Graph]:
    """(natural mixing matrix, graph) of the static topologies in the table of section 3.1."""
    if name == "ring":
        G = T.ring(n)
    elif name == "directed_ring":
        G = T.directed_ring(n)
    elif name == "complete":
        G = T.complete(n)
    elif name == "star":
        G = T.star(n)
    elif name == "exponential":
        G = T.exponential(n)
    elif name == "exponential_sym":
        We = T.column_stochastic(T.exponential(n))
        return (We + We.T) / 2, T.exponential(n).to_undirected()
    else:
        G = T.exponential(n, directed=False)
    W = T.column_stochastic(G) if G.is_directed() else T.doubly_stochastic(G)
    return W, G


GOLDEN = [  # (topology, n, SLEM, diameter), closed forms
    ("ring", 8, 0.8047378541, 4),
    ("ring", 16, 0.9492530217, 8),
    ("ring", 100, 0.9986844856, 50),
    ("directed_ring", 8, 0.9238795325, 7),
    ("directed_ring", 16, 0.9807852804, 15),
    ("directed_ring", 100, 0.9995065604, 99),
    ("complete", 8, 0.0, 1),
    ("complete", 16, 0.0, 1),
    ("complete", 100, 0.0, 1),
    ("star", 8, 0.875, 2),
    ("star", 16, 0.9375, 2),
    ("star", 100, 0.99, 2),
    ("exponential", 8, 0.5, 3),
    ("exponential", 16, 0.6, 4),
    ("exponential", 100, 0.75, 5),
    ("exponential_sym", 8, 0.5, 2),
    ("exponential_sym", 16, 0.6, 2),
    ("exponential_sym", 100, 0.75, 3),
    ("exponential_undirected", 8, 1 / 3, 2),
    ("exponential_undirected", 16, 0.5, 2),
    ("exponential_undirected", 100, 0.7333333333, 3),
]


@pytest.mark.parametrize(("name", "n", "expected_slem", "expected_diameter"), GOLDEN)
def test_static_golden_values(
    name: str, n: int, expected_slem: float, expected_diameter: int
) -> None:
    W, G = natural(name, n)
    assert A.slem(W) == pytest.approx(expected_slem, abs=ATOL)
    assert A.spectral_gap(W) == pytest.approx(1 - expected_slem, abs=ATOL)
    assert A.diameter(G) == expected_diameter
    assert A.is_strongly_connected(G)


@pytest.mark.parametrize("n", [8, 16, 100])
def test_closed_forms(n: int) -> None:
    tau = (n - 1).bit_length()
    assert A.slem(T.ring(n)) == pytest.approx(1 / 3 + 2 / 3 * np.cos(2 * np.pi / n), abs=ATOL)
    assert A.slem(T.directed_ring(n)) == pytest.approx(np.cos(np.pi / n), abs=ATOL)
    assert A.slem(T.star(n)) == pytest.approx(1 - 1 / n, abs=ATOL)
    assert A.slem(T.exponential(n)) == pytest.approx((tau - 1) / (tau + 1), abs=ATOL)


@pytest.mark.parametrize(
    ("n", "directed_diameter", "undirected_diameter"),
    [(8, 3, 2), (12, 3, 2), (16, 4, 2), (32, 5, 3), (64, 6, 3), (100, 5, 3), (128, 7, 4)],
)
def test_exponential_diameters(n: int, directed_diameter: int, undirected_diameter: int) -> None:
    assert A.diameter(T.exponential(n)) == directed_diameter
    assert A.diameter(T.exponential(n, directed=False)) == undirected_diameter


def test_exact_spectra() -> None:
    np.testing.assert_allclose(A.eigenvalues(T.star(8)), [1] + [0.875] * 6 + [0], atol=ATOL)
    H = nx.convert_node_labels_to_integers(nx.hypercube_graph(4), ordering="sorted")
    expected = [1.0] + [0.6] * 4 + [0.2] * 6 + [-0.2] * 4 + [-0.6]
    ev = A.eigenvalues(T.doubly_stochastic(H))
    assert ev.dtype == np.float64
    np.testing.assert_allclose(np.sort(ev)[::-1], expected, atol=ATOL)
    assert A.slem(T.ring(3)) == pytest.approx(0.0, abs=ATOL)
    assert A.slem(T.ring(4)) == pytest.approx(1 / 3, abs=ATOL)
    assert A.slem(T.ring(5)) == pytest.approx(0.5393446629, abs=ATOL)


def test_eigenvalues_sorted_by_modulus() -> None:
    ev = A.eigenvalues(T.directed_ring(6))
    assert np.iscomplexobj(ev)
    assert ev[0] == pytest.approx(1.0)
    assert np.all(np.diff(np.abs(ev)) <= 1e-12)
    # symmetric: -0.6 has a larger modulus than 0.2 and must come before it
    ev = A.eigenvalues(np.diag([0.2, 1.0, -0.6]))
    np.testing.assert_array_equal(ev, [1.0, -0.6, 0.2])


def test_push_sum_example_spectrum() -> None:
    W = T.column_stochastic(nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3), (3, 0)]))
    assert A.slem(W) == pytest.approx(0.5715213299, abs=ATOL)
    assert A.is_strongly_connected(W)
    assert A.diameter(W) == 3


def test_slem_is_one_when_disconnected() -> None:
    G = nx.disjoint_union(T.ring(4), T.ring(5))
    assert A.slem(G) == pytest.approx(1.0, abs=ATOL)
    assert A.spectral_gap(G) == pytest.approx(0.0, abs=ATOL)
    assert not A.is_strongly_connected(G)
    with pytest.raises(ValueError, match="not connected"):
        A.diameter(G)


SINK = nx.DiGraph([(0, 1), (1, 2), (2, 1)])  # one sink component {1, 2}: eigenvalue 1 is simple


def test_no_consensus_without_strong_connectivity() -> None:
    W = T.column_stochastic(SINK)  # columns: node 0 keeps 1/2, sends 1/2 to 1; 1 and 2 swap halves
    ev = np.sort(np.abs(np.linalg.eigvals(W)))[::-1]
    np.testing.assert_allclose(ev, [1.0, 0.5, 0.0], atol=1e-12)  # a gap of 1/2 on paper ...
    for G in (SINK, W, nx.disjoint_union(T.ring(3), T.ring(4))):
        assert A.slem(G) == 1.0 and A.spectral_gap(G) == 0.0  # ... but z_0 never moves
        assert A.mixing_time(G) is None
        assert A.per_round_rate(G) == 1.0
    assert A.why_not_strongly_connected(SINK) == (
        "not strongly connected: 2 strongly connected components")
    assert A.why_not_strongly_connected(nx.disjoint_union(T.ring(3), T.ring(4))) == (
        "not connected: 2 connected components")
    assert A.why_not_strongly_connected(T.ring(5)) is None
    assert A.schedule_mixing_time(SINK) is None  # the columns agree, node 0 is never reached
    with pytest.raises(ValueError, match="W is not strongly connected: 2 strongly connected"):
        A.perron_vector(W)


def test_periodic_graph_is_strongly_connected_but_never_mixes() -> None:
    P = np.roll(np.eye(5), 1, axis=0)  # i -> i + 1 with no self-weight: eigenvalue 1 is simple
    assert A.is_strongly_connected(P) and A.why_not_strongly_connected(P) is None
    assert A.slem(P) == pytest.approx(1.0, abs=1e-12)
    assert A.mixing_time(P) is None
    np.testing.assert_allclose(A.perron_vector(P), np.full(5, 0.2), atol=1e-12)


def test_directed_connectivity() -> None:
    path = nx.DiGraph([(0, 1), (1, 2)])
    assert A.is_strongly_connected(path.to_undirected())
    assert not A.is_strongly_connected(path)
    with pytest.raises(ValueError, match="not strongly connected"):
        A.diameter(path)
    # a matrix stands for its graph: W[j, i] > 0 is the edge i -> j
    W = T.column_stochastic(T.directed_ring(5))
    assert A.diameter(W) == 4
    assert not A.is_strongly_connected(np.tril(W))  # drops the edge 4 -> 0


def test_union_graph_one_peer_is_static_exponential() -> None:
    s = T.one_peer_exponential(16)
    for t0 in range(4):
        U = A.union_graph(s, t0, t0 + 4)
        assert U.is_directed()
        assert set(U.edges) == set(T.exponential(16).edges)
        assert A.diameter(U) == 4
    assert set(A.union_graph(s, 0, 3).edges) < set(T.exponential(16).edges)
    assert not A.is_strongly_connected(A.union_graph(s, 1, 4))  # offsets 2, 4, 8 only


def test_union_graph_edges_and_arguments() -> None:
    U = A.union_graph(T.ring(5), 0, 1)
    assert set(U.edges) == {(i, (i + 1) % 5) for i in range(5)} | {
        ((i + 1) % 5, i) for i in range(5)
    }
    empty = A.union_graph(T.random_out(10, 2, seed=0), 3, 3)
    assert empty.number_of_nodes() == 10 and empty.number_of_edges() == 0
    s = T.random_out(10, 2, seed=0)
    assert set(A.union_graph(s, 2, 4).edges) == set(s.at(2).edges) | set(s.at(3).edges)
    with pytest.raises(ValueError, match="t0"):
        A.union_graph(s, 4, 2)


# ---------------------------------------------------------------- torus, hypercube (networkx)
def torus(a: int, b: int) -> nx.Graph:
    return nx.convert_node_labels_to_integers(nx.grid_2d_graph(a, b, periodic=True),
                                              ordering="sorted")


def hypercube(d: int) -> nx.Graph:
    return nx.convert_node_labels_to_integers(nx.hypercube_graph(d), ordering="sorted")


@pytest.mark.parametrize(("G", "expected_slem", "expected_diameter"), [
    (torus(4, 4), 0.6, 4),
    (torus(8, 8), (3 + np.sqrt(2)) / 5, 8),
    (torus(10, 10), (7 + np.sqrt(5)) / 10, 10),
    (hypercube(3), 0.5, 3),
    (hypercube(4), 0.6, 4),
    (nx.convert_node_labels_to_integers(nx.grid_2d_graph(10, 10), ordering="sorted"),
     0.9794695784, 18),
])
def test_torus_hypercube_grid_golden(G: nx.Graph, expected_slem: float,
                                     expected_diameter: int) -> None:
    assert A.slem(G) == pytest.approx(expected_slem, abs=ATOL)
    assert A.diameter(G) == expected_diameter


# ---------------------------------------------------------------- Perron, Dobrushin, mixing time
G4 = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3), (3, 0)])  # the worked Push-Sum example


def test_perron_vector_of_worked_example() -> None:
    W = T.column_stochastic(G4)
    pi = A.perron_vector(W)
    np.testing.assert_allclose(pi, np.array([4, 4, 3, 2]) / 13, atol=1e-12)
    np.testing.assert_allclose(W @ pi, pi, atol=1e-12)
    np.testing.assert_allclose(A.perron_vector(T.ring(7)), np.full(7, 1 / 7), atol=1e-12)
    with pytest.raises(ValueError, match="^the Perron vector needs a strongly connected graph; "
                       "W is not strongly connected: 2 strongly connected components$"):
        A.perron_vector(nx.disjoint_union(T.ring(3), T.ring(4)))


def test_ergodicity_coefficient_of_worked_example() -> None:
    W = T.column_stochastic(G4)
    assert A.ergodicity_coefficient(W) == pytest.approx(1.0, abs=1e-12)
    assert A.ergodicity_coefficient(W @ W) == pytest.approx(0.5, abs=1e-12)
    assert A.ergodicity_coefficient(W @ W @ W) == pytest.approx(61 / 216, abs=1e-12)
    assert A.ergodicity_coefficient(np.full((5, 5), 0.2)) == pytest.approx(0.0, abs=1e-12)
    rng = np.random.default_rng(0)
    P, Q = rng.random((6, 6)), rng.random((6, 6))
    P, Q = P / P.sum(0), Q / Q.sum(0)
    assert A.slem(P) <= A.ergodicity_coefficient(P) + 1e-12
    assert A.ergodicity_coefficient(P @ Q) <= (
        A.ergodicity_coefficient(P) * A.ergodicity_coefficient(Q) + 1e-12)


@pytest.mark.parametrize(("G", "expected"), [  # rounds to 1e-3 from node 2, n = 16
    (T.complete(16), 1), (T.star(16), 108), (T.exponential(16), 14), (hypercube(4), 14),
    (torus(4, 4), 14), (nx.convert_node_labels_to_integers(nx.grid_2d_graph(4, 4)), 50),
    (T.ring(16), 133), (T.directed_ring(16), 357),
])
def test_mixing_time_golden(G: nx.Graph, expected: int) -> None:
    assert A.mixing_time(G, 1e-3) == expected


def test_mixing_time_non_normal_and_errors() -> None:
    assert A.mixing_time(T.column_stochastic(G4), 1e-6) == 26  # ln(1e6)/ln(1/slem) = 24.69
    assert A.mixing_time(nx.disjoint_union(T.ring(3), T.ring(4))) is None
    with pytest.raises(ValueError, match="eps"):
        A.mixing_time(T.ring(5), 0.0)


@pytest.mark.parametrize(("G", "expected"), [
    (T.ring(8), 2 - np.sqrt(2)), (T.ring(100), 2 - 2 * np.cos(2 * np.pi / 100)),
    (T.complete(16), 16.0), (T.star(100), 1.0), (hypercube(4), 2.0),
    (torus(10, 10), (3 - np.sqrt(5)) / 2), (T.exponential(16, directed=False), 4.0),
])
def test_algebraic_connectivity_golden(G: nx.Graph, expected: float) -> None:
    assert A.algebraic_connectivity(G) == pytest.approx(expected, abs=ATOL)


def test_algebraic_connectivity_rejects_digraphs() -> None:
    with pytest.raises(ValueError, match="undirected"):
        A.algebraic_connectivity(T.directed_ring(5))
    assert A.algebraic_connectivity(nx.disjoint_union(T.ring(3), T.ring(4))) == pytest.approx(
        0.0, abs=ATOL)


# ---------------------------------------------------------------- B-connectivity
def test_b_connected_although_every_graph_is_disconnected() -> None:
    n = 6
    halves = [nx.DiGraph(), nx.DiGraph()]
    for H in halves:
        H.add_nodes_from(range(n))
    halves[0].add_edges_from((i, i + 1) for i in (0, 2, 4))  # 0->1, 2->3, 4->5
    halves[1].add_edges_from((i, (i + 1) % n) for i in (1, 3, 5))  # 1->2, 3->4, 5->0
    trace = halves * 4  # rounds alternate; the union of any two is the directed 6-ring
    assert not any(A.is_strongly_connected(H) for H in halves)
    assert not A.is_b_connected(trace, 1)
    assert A.is_b_connected(trace, 2)
    assert A.is_b_connected(trace, 2, aligned=False)
    report = A.b_connectivity(trace, 2)
    assert report.starts == (0, 2, 4, 6) and report.max_union_diameter == 5
    assert A.min_b(trace) == 2
    # round 2 drops the wrap-around edge: the aligned window [2, 4) fails, [0, 2) does not
    broken = list(trace)
    broken[3] = nx.DiGraph(halves[1].edges - {(5, 0)})
    broken[3].add_nodes_from(range(n))
    report = A.b_connectivity(broken, 2)
    assert not report.connected and report.first_failure == 2
    assert report.union_diameters[0] == 5 and report.union_diameters[1] == np.inf


@pytest.mark.parametrize(("n", "B", "delta"), [(16, 4, 4), (12, 4, None), (100, 7, 5)])
def test_min_b_one_peer_golden(n: int, B: int, delta: int | None) -> None:
    s = T.one_peer_exponential(n)
    assert A.min_b(s) == B
    assert not A.is_b_connected(s, B - 1)
    if delta is not None:
        assert A.b_connectivity(s, B).max_union_diameter == delta


class Shifts:
    """Round t: i -> i + offsets[t mod len] (SGP's schedule of one peer per round)."""

    def __init__(self, n: int, offsets: list[int]) -> None:
        self.n, self.offsets, self.period, self.directed = n, offsets, len(offsets), True

    def at(self, t: int) -> nx.DiGraph:
        G = nx.DiGraph()
        G.add_nodes_from(range(self.n))
        o = self.offsets[t % self.period]
        G.add_edges_from((i, (i + o) % self.n) for i in range(self.n))
        return G


def test_min_b_sgp_phone_book_and_finite_trace_pitfall() -> None:
    assert A.min_b(Shifts(16, [1, 15, 2, 14, 4, 12, 8])) == 6
    s = T.one_peer_exponential(100)
    trace = [s.at(t) for t in range(28)]
    assert A.is_b_connected(trace, 6)  # looks 6-connected over 28 rounds ...
    assert not A.is_b_connected(s, 6)  # ... but the window starting at round 36 is not
    with pytest.raises(ValueError, match="horizon"):
        A.is_b_connected(T.random_out(8, 1, seed=0), 2)


@pytest.mark.parametrize(("n", "rate"), [(12, 0.6762442799), (100, 0.7897666947), (16, 0.0)])
def test_per_round_rate_one_peer_golden(n: int, rate: float) -> None:
    assert A.per_round_rate(T.one_peer_exponential(n)) == pytest.approx(rate, abs=ATOL)
    assert A.per_round_rate(Shifts(16, [1, 15, 2, 14, 4, 12, 8])) == 0.0


def test_per_round_rate_over_long_horizons() -> None:
    # a product's slem falls below rounding (0.676^400 = 1e-68): the rate per round must not
    assert A.per_round_rate(T.one_peer_exponential(12), 400) == pytest.approx(0.6762442799,
                                                                              abs=ATOL)
    assert A.per_round_rate(T.exponential(16), 100) == pytest.approx(0.6, abs=ATOL)
    assert A.per_round_rate(G4, 300) == pytest.approx(0.5715213299, abs=ATOL)  # non-normal
    assert A.per_round_rate(T.one_peer_exponential(16), 40) == 0.0  # exact averaging stays 0
    s = T.random_out(16, 2, seed=0)
    base = A.per_round_rate(s, 30)
    assert 0.4 < base < 0.6
    for rounds in (40, 100, 400):
        assert A.per_round_rate(s, rounds) == pytest.approx(base, abs=0.02)
    with pytest.raises(ValueError, match="rounds must be an integer >= 1"):
        A.per_round_rate(s, -3)


def test_schedule_mixing_time() -> None:
    assert A.schedule_mixing_time(T.one_peer_exponential(16)) == 4
    assert A.schedule_mixing_time(T.ring(16)) == A.mixing_time(T.ring(16)) == 133
    assert A.per_round_rate(T.ring(16)) == pytest.approx(A.slem(T.ring(16)), abs=ATOL)


# ---------------------------------------------------------------- sparse inputs and solvers
@pytest.fixture
def sparse_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route every matrix with more than 10 rows to the sparse solvers."""
    from analysis import matrices
    monkeypatch.setattr(matrices, "DENSE_MAX", 10)


@pytest.mark.parametrize("G", [
    nx.random_regular_graph(4, 120, seed=1), T.ring(60), T.star(60), torus(8, 8),
    T.exponential(100), T.random_out_graph(120, 8, seed=0),
])
def test_sparse_solvers_match_dense(G: nx.Graph, sparse_only: None) -> None:
    from analysis import matrices
    dense = T.column_stochastic(G) if G.is_directed() else T.doubly_stochastic(G)
    S = A.sparse_mixing(G)
    np.testing.assert_allclose(S.toarray(), dense, atol=1e-15)
    assert matrices.as_matrix(G).format == "csr"
    matrices.DENSE_MAX = 10**6
    expected_slem, expected_pi, expected_d = A.slem(dense), A.perron_vector(dense), A.diameter(G)
    matrices.DENSE_MAX = 10
    assert A.slem(S) == pytest.approx(expected_slem, rel=1e-6)
    assert A.slem(G) == pytest.approx(expected_slem, rel=1e-6)
    np.testing.assert_allclose(A.perron_vector(S), expected_pi, atol=1e-8)
    assert A.diameter(G) == A.diameter(S) == expected_d
    assert A.is_strongly_connected(S)


def random_push_matrix(n: int, seed: int) -> np.ndarray:
    """Column-stochastic [n, n]: a directed ring plus random weighted edges, random self-weights
    (strongly connected, non-normal, eigenvalues in a disk rather than on a circle)."""
    rng = np.random.default_rng(seed)
    M = (rng.random((n, n)) < 4 / n) * rng.random((n, n)) + np.roll(np.eye(n), 1, axis=0)
    np.fill_diagonal(M, rng.random(n))
    return M / M.sum(axis=0)


@pytest.mark.parametrize("W", [
    random_push_matrix(150, 0), random_push_matrix(200, 1),
    T.column_stochastic(T.random_out_graph(200, 12, seed=3)),
    T.column_stochastic(T.directed_ring(60)), T.column_stochastic(T.exponential(100)),
])
def test_sparse_directed_slem_and_perron_match_dense_eigenvalues(W: np.ndarray,
                                                                 sparse_only: None) -> None:
    import scipy.linalg
    import scipy.sparse as sp
    ev = np.linalg.eigvals(W)
    expected = np.abs(np.delete(ev, np.argmin(np.abs(ev - 1.0)))).max()
    pi = scipy.linalg.null_space(W - np.eye(len(W)))[:, 0]
    S = sp.csr_array(W)
    assert A.slem(S) == pytest.approx(expected, abs=1e-10)
    assert A.spectral_gap(S) == pytest.approx(1 - expected, abs=1e-10)
    np.testing.assert_allclose(A.perron_vector(S), pi / pi.sum(), rtol=0, atol=1e-12)


def test_sparse_not_strongly_connected_is_answered_by_the_graph(sparse_only: None) -> None:
    import scipy.sparse as sp
    M = random_push_matrix(120, 2)
    M[5] = 0.0  # nobody sends to node 5 any more (columns renormalised): 2 components
    W = sp.csr_array(M / M.sum(axis=0))
    assert A.slem(W) == 1.0 and A.mixing_time(W) is None
    with pytest.raises(ValueError, match="2 strongly connected components"):
        A.perron_vector(W)


def test_sparse_ergodicity_and_eigenvalues(sparse_only: None) -> None:
    S = A.sparse_mixing(T.ring(50))
    assert A.ergodicity_coefficient(S) == 1.0  # nodes 0 and 25 share no recipient
    ev = A.eigenvalues(S, k=3)
    np.testing.assert_allclose(ev, [1.0, 1 / 3 + 2 / 3 * np.cos(2 * np.pi / 50)] * 1 + [
        1 / 3 + 2 / 3 * np.cos(2 * np.pi / 50)], atol=1e-9)
    assert A.ergodicity_coefficient(A.sparse_mixing(T.complete(20))) == pytest.approx(0.0,
                                                                                     abs=1e-12)


def test_diameter_of_disconnected_parts() -> None:
    G = nx.disjoint_union(T.ring(10), T.ring(4))
    assert A.largest_component_diameter(G) == 5
    assert A.number_of_components(G) == 2
    assert A.number_of_components(nx.DiGraph([(0, 1), (1, 2)])) == 3


# ---------------------------------------------------------------- summary
def test_summary_static_and_time_varying() -> None:
    s = A.summary(T.ring(16))
    assert s["kind"] == "static" and s["diameter"] == 8 and s["min_B"] == 1
    assert s["slem"] == pytest.approx(0.9492530217, abs=ATOL)
    assert s["lambda2"] == pytest.approx(0.9492530217, abs=ATOL)
    assert s["mixing_time"] == 133
    assert s["algebraic_connectivity"] == pytest.approx(0.152240934977, abs=ATOL)
    s = A.summary(T.build_schedule("one_peer_exponential", 16))
    assert s["kind"] == "time-varying" and s["period"] == 4 and s["min_B"] == 4
    assert s["diameter"] == 4 and s["spectral_gap"] == 1.0 and s["mixing_time"] == 4
    s = A.summary(T.star(8), mixing="column_stochastic")  # push rule: not MH on a star
    assert s["matrix"] == "push-sum (uniform)"
    assert s["slem"] == pytest.approx(A.slem(T.column_stochastic(T.star(8))), abs=ATOL)
    assert s["n_min_perron"] < 1
    s = A.summary(nx.disjoint_union(T.ring(5), T.ring(3)))
    assert s["diameter"] == np.inf and s["largest_component_diameter"] == 2
    assert s["mixing_time"] is None and s["spectral_gap"] == pytest.approx(0, abs=ATOL)
    assert s["no_consensus"] == "not connected: 2 connected components"
    assert A.summary(T.ring(5))["no_consensus"] is None
    s = A.summary(T.column_stochastic(G4))
    assert s["matrix"] == "given" and s["diameter"] == 3 and s["edges"] == 5
    assert s["n_min_perron"] == pytest.approx(4 * 2 / 13, abs=1e-12)
    s = A.summary(T.random_out(12, 2, seed=0), horizon=10)
    assert s["horizon"] == 10 and 0 < s["spectral_gap"] <= 1


def test_summary_names_why_there_is_no_consensus() -> None:
    s = A.summary(SINK)
    assert s["no_consensus"] == "not strongly connected: 2 strongly connected components"
    assert s["slem"] == 1.0 and s["spectral_gap"] == 0.0 and s["mixing_time"] is None
    s = A.summary(T.column_stochastic(SINK))  # a matrix stands for its graph
    assert s["no_consensus"] == "not strongly connected: 2 strongly connected components"
    half = nx.DiGraph([(0, 1), (2, 3)])
    s = A.summary([half, half, half])  # a trace whose rounds never join the two pairs
    assert s["no_consensus"] == ("the union of rounds 0..2 is not strongly connected: "
                                 "4 strongly connected components")
    assert s["per_round_rate"] == 1.0 and s["spectral_gap"] == 0.0
