"""Finite-time and n-independent topologies: Base-(k+1) graphs, EquiStatic / EquiDyn, EL-Oracle."""

from __future__ import annotations

import math
from collections import Counter

import networkx as nx
import numpy as np
import pytest

import topologies as T
from topologies import equitopo


def period_product(S, build=T.doubly_stochastic) -> np.ndarray:
    """W_{m-1} ... W_1 W_0 over one period of S."""
    P = np.eye(S.n)
    for t in range(S.period):
        P = build(S.at(t)) @ P
    return P


def weighted_edges(G: nx.Graph) -> dict[tuple[int, int], float]:
    return {(min(i, j), max(i, j)): w for i, j, w in G.edges(data="weight")}


# ---------------------------------------------------------------- Base-(k+1) graphs


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_base_graph_averages_exactly_in_one_period(k: int) -> None:
    for n in range(1, 65):
        S = T.base_graph(n, k)
        assert S.period <= 2 * math.log(n, k + 1) + 2 + 1e-9, (n, k, S.period)
        P = np.eye(n)
        for t in range(S.period):
            G = S.at(t)
            assert not G.is_directed()
            assert max((d for _, d in G.degree()), default=0) <= k, (n, k, t)
            W = T.doubly_stochastic(G)
            assert np.array_equal(W, W.T) and T.is_doubly_stochastic(W, atol=1e-12)
            assert (W >= 0).all()
            P = W @ P
        np.testing.assert_allclose(P, np.full((n, n), 1 / n), rtol=0, atol=1e-12)


def test_base_graph_rounds_by_hand() -> None:
    # n = 3 = 2 + 1 in base 2: {0, 1} average, node 2 pours into node 1 with weight 2/3
    # (= 2 / 3 nodes), then {0, 1} average again: x -> (m, m, c) -> (m, (m+2c)/3, (2m+c)/3).
    S = T.base_graph(3, 1)
    assert [weighted_edges(S.at(t)) for t in range(S.period)] == [
        {(0, 1): 0.5}, {(1, 2): 2 / 3}, {(0, 1): 0.5}]
    # n = 6, k = 1: the simple graph needs 5 rounds, the product form 3 + 1 = 4 (two groups
    # {0, 1, 2}, {3, 4, 5} of 3 as above, then the pairs {j, j + 3}).
    S = T.base_graph(6, 1)
    assert T.simple_base_graph(6, 1).period == 5 and S.period == 4
    assert weighted_edges(S.at(1)) == {(1, 2): 2 / 3, (4, 5): 2 / 3}
    assert weighted_edges(S.at(3)) == {(0, 3): 0.5, (1, 4): 0.5, (2, 5): 0.5}


def test_simple_base_graph_exact_and_no_longer_than_base() -> None:
    for k in (1, 2, 3):
        for n in (5, 7, 11, 13, 23, 37, 50):
            S = T.simple_base_graph(n, k)
            np.testing.assert_allclose(period_product(S), 1 / n, rtol=0, atol=1e-12)
            assert T.base_graph(n, k).period <= S.period


def test_hyper_hypercube_digits_and_powers_of_k_plus_one() -> None:
    # 12 = 2 * 2 * 3 (k = 2): pairs i, i + 1; pairs i, i + 2; triangles {i, i + 4, i + 8}
    S = T.hyper_hypercube(12, 2)
    assert S.period == 3
    assert weighted_edges(S.at(0)) == {(i, i + 1): 0.5 for i in range(0, 12, 2)}
    assert set(weighted_edges(S.at(1))) == {(i, i + 2) for i in (0, 1, 4, 5, 8, 9)}
    assert weighted_edges(S.at(2)) == {
        e: 1 / 3 for i in range(4) for e in [(i, i + 4), (i, i + 8), (i + 4, i + 8)]}
    for k in (1, 2, 3):
        for p in (1, 2, 3):
            n = (k + 1) ** p
            assert T.hyper_hypercube(n, k).period == p
            assert T.base_graph(n, k).period == p  # the simple case: a power of k + 1
            np.testing.assert_allclose(period_product(T.base_graph(n, k)), 1 / n, atol=1e-12)


def test_one_peer_exponential_exact_only_for_powers_of_two() -> None:
    for n in (2, 4, 8, 16, 32, 64):
        P = period_product(T.one_peer_exponential(n), T.column_stochastic)
        np.testing.assert_allclose(P, 1 / n, rtol=0, atol=1e-12)
    for n in (6, 12, 25):
        P = period_product(T.one_peer_exponential(n), T.column_stochastic)
        assert np.abs(P - 1 / n).max() > 0.01


@pytest.mark.parametrize(("call", "name"), [
    (lambda: T.base_graph(0, 1), "n"), (lambda: T.base_graph(8, 0), "k"),
    (lambda: T.hyper_hypercube(10, 1), "n"), (lambda: T.simple_base_graph(4.5, 1), "n"),
    (lambda: T.equi_static(1), "n"), (lambda: T.equi_static(8, m=0), "m"),
    (lambda: T.equi_dyn(8, eta=0.0), "eta"), (lambda: T.equi_dyn(8, eta=1.5), "eta"),
    (lambda: T.epidemic_oracle(5, 5), "s"), (lambda: T.random_regular_digraph(5, 0), "d"),
])
def test_bad_arguments_name_the_parameter(call, name: str) -> None:
    with pytest.raises(T.ParameterError) as err:
        call()
    assert err.value.name == name


# ---------------------------------------------------------------- EquiStatic


def test_equi_static_directed_is_the_mean_of_basis_matrices() -> None:
    n, m = 12, 5
    for seed in range(4):
        G = T.equi_static(n, m, seed=seed)
        W = T.column_stochastic(G)
        np.testing.assert_allclose(W, T.row_stochastic(G), rtol=0, atol=1e-15)
        assert T.is_doubly_stochastic(W, atol=1e-12)
        np.testing.assert_allclose(np.diag(W), 1 / n, rtol=0, atol=1e-15)
        # circulant: W[(i + u) % n, i] depends on u only, and is c_u (n-1)/(n m), sum c_u = m
        column = W[:, 0]
        for i in range(n):
            np.testing.assert_allclose(W[:, i], np.roll(column, i), rtol=0, atol=1e-15)
        counts = column[1:] * n * m / (n - 1)
        np.testing.assert_allclose(counts, np.round(counts), atol=1e-12)
        assert round(counts.sum()) == m and max(d for _, d in G.out_degree()) <= m


def test_equi_static_undirected_is_the_symmetric_part() -> None:
    for n, m in [(8, 9), (9, 4), (16, 12)]:  # n even: u = n/2 is its own reverse
        for seed in range(3):
            D = T.column_stochastic(T.equi_static(n, m, directed=True, seed=seed))
            U = T.equi_static(n, m, directed=False, seed=seed)
            assert not U.is_directed() and max(d for _, d in U.degree()) <= 2 * m
            np.testing.assert_allclose(T.doubly_stochastic(U), (D + D.T) / 2, rtol=0,
                                       atol=1e-15)


def test_equi_static_rate_does_not_grow_with_n() -> None:
    # ||W - J||_2 with m = floor(5 ln n) offsets: about 0.4-0.45 for n = 16..4096 (a ring
    # tends to 1); the symmetric part's norm is at most the directed one's
    for n in (16, 64, 256):
        assert equitopo.default_m(n) == int(5 * math.log(n))
        for seed in range(3):
            for directed in (True, False):
                G = T.equi_static(n, seed=seed, directed=directed)
                W = T.column_stochastic(G) if directed else T.doubly_stochastic(G)
                assert np.linalg.norm(W - 1 / n, 2) < 0.65, (n, seed, directed)


# ---------------------------------------------------------------- EquiDyn


def offset_of(G: nx.DiGraph) -> int:
    (u,) = {(j - i) % G.number_of_nodes() for i, j in G.edges}
    return u


def expected_rate(n: int, eta: float) -> float:
    """E ||W x - xbar||^2 / ||x - xbar||^2 of OD-EquiDyn with u uniform in 1..n-1."""
    return 1 - 2 * eta + 2 * eta**2 * (n - 1) / n


@pytest.mark.parametrize("eta", [0.5, 0.3, 1.0])
def test_equi_dyn_directed_rounds_and_exact_expected_rate(eta: float) -> None:
    n = 12
    S = T.equi_dyn(n, eta=eta, seed=3)
    x = np.random.default_rng(0).standard_normal(n)
    x -= x.mean()
    ratio = {}
    for t in range(200):
        G = S.at(t)
        u = offset_of(G)
        assert {d for _, d in G.out_degree()} == {d for _, d in G.in_degree()} == {1}
        A = np.eye(n) / n + (n - 1) / n * np.roll(np.eye(n), u, axis=0)  # i -> i + u
        W = T.column_stochastic(G)
        np.testing.assert_allclose(W, (1 - eta) * np.eye(n) + eta * A, rtol=0, atol=1e-15)
        ratio[u] = np.sum((W @ x) ** 2) / np.sum(x**2)
    assert sorted(ratio) == list(range(1, n))  # every offset drawn in 200 rounds
    assert np.mean(list(ratio.values())) == pytest.approx(expected_rate(n, eta), abs=1e-12)


def test_equi_dyn_measured_rate_is_flat_in_n() -> None:
    # E ratio = (n-1)/(2n) < 1/2 at eta = 1/2 (a ring's is 1 - O(1/n^2)); OU-EquiDyn's matching
    # averages pairs: measured 0.53-0.55 for these n
    for n in (16, 64, 256):
        for directed, low, high in ((True, expected_rate(n, 0.5) - 0.03,
                                     expected_rate(n, 0.5) + 0.03), (False, 0.45, 0.6)):
            S = T.equi_dyn(n, directed=directed, seed=n)
            rng = np.random.default_rng(1)
            ratios = []
            for t in range(300):
                x = rng.standard_normal(n)
                x -= x.mean()
                W = T.column_stochastic(S.at(t)) if directed else T.doubly_stochastic(S.at(t))
                ratios.append(np.sum((W @ x) ** 2) / np.sum(x**2))
            assert low < np.mean(ratios) < high, (n, directed, np.mean(ratios))


def test_equi_dyn_undirected_is_a_matching_and_seeded() -> None:
    n = 15
    S = T.equi_dyn(n, directed=False, eta=0.5, seed=7)
    for t in range(20):
        G = S.at(t)
        assert max(d for _, d in G.degree()) == 1
        assert {w for _, _, w in G.edges(data="weight")} == {0.5 * (n - 1) / n}
        W = T.doubly_stochastic(G)
        assert np.array_equal(W, W.T) and T.is_doubly_stochastic(W, atol=1e-12)
        assert weighted_edges(G) == weighted_edges(T.equi_dyn(n, False, 0.5, seed=7).at(t))
    assert len({frozenset(weighted_edges(S.at(t))) for t in range(20)}) > 10


def test_equi_dyn_with_m_draws_from_equi_static_offsets() -> None:
    n, m, seed = 32, 4, 11
    static = {(j - i) % n for i, j in T.equi_static(n, m, seed=seed).edges}
    S = T.equi_dyn(n, m=m, seed=seed)
    assert S.offsets is not None and set(S.offsets) == static
    assert {offset_of(S.at(t)) for t in range(100)} == static


# ---------------------------------------------------------------- Epidemic Learning


def test_epidemic_oracle_is_s_regular_every_round() -> None:
    for n, s in [(2, 1), (3, 1), (5, 2), (10, 3), (10, 8), (33, 7)]:
        S = T.epidemic_oracle(n, s, seed=1)
        for t in range(3):
            G = S.at(t)
            assert G.number_of_nodes() == n and nx.number_of_selfloops(G) == 0
            assert {d for _, d in G.out_degree()} == {d for _, d in G.in_degree()} == {s}
            W = T.row_stochastic(G)
            assert T.is_doubly_stochastic(W, atol=1e-12)  # 1 / (s + 1) both ways
            assert set(G.edges) == set(T.epidemic_oracle(n, s, seed=1).at(t).edges)


def test_epidemic_oracle_spreads_over_all_pairs_and_local_does_not_fix_in_degree() -> None:
    n, s, rounds = 8, 2, 300
    S = T.epidemic_oracle(n, s, seed=0)
    pairs = Counter(e for t in range(rounds) for e in S.at(t).edges)
    assert len(pairs) == n * (n - 1)
    freq = np.array(list(pairs.values())) / rounds
    assert np.abs(freq - s / (n - 1)).max() < 0.1  # each of the 56 pairs: 2/7 per round
    local = T.random_out(n, s, seed=0)  # EL-Local
    in_degrees = {d for t in range(20) for _, d in local.at(t).in_degree()}
    assert len(in_degrees) > 1


# ---------------------------------------------------------------- through the engine


def test_engine_gossip_on_a_base_graph_reaches_the_exact_average() -> None:
    """DFedAvg rounds on base_graph(6) as a topology object: after one period every node holds
    the average of the nodes' parameters (lr 1e-300: the local steps change nothing in float64,
    so the rounds are pure gossip); on a ring the same rounds leave the nodes apart."""
    import torch

    from p2pfl.engine import build
    from p2pfl.objects import resolve
    from tests.conftest import play, small_config

    cfg = small_config(algorithm__lr=1e-300, rounds=8)
    for topology, exact in ((T.base_graph(6, 1), True), (T.ring(6), False)):
        resolved, parts = resolve(cfg, None, False, topology)
        ctx, algorithm = build(resolved, None, parts)
        generator = torch.Generator().manual_seed(0)
        for value in ctx.population.params.values():
            value.copy_(torch.randn(value.shape, generator=generator, dtype=value.dtype))
        mean = {k: v.mean(0, keepdim=True).clone() for k, v in ctx.population.params.items()}
        for t in range(4):  # one period of base_graph(6, 1)
            play(algorithm, ctx, t, ctx.schedule.at(t))
        gap = max(float((v - mean[k]).abs().max()) for k, v in ctx.population.params.items())
        assert (gap < 1e-12) == exact, (topology, gap)
