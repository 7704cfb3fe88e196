"""Spectral and connectivity metrics against the golden values of topologies.md, section 3."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T

ATOL = 1e-9  # topologies.md 3.9: closed-form spectral quantities, n <= 100


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


GOLDEN = [  # (topology, n, SLEM, diameter), topologies.md 3.1
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
