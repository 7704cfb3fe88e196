"""Metrics beyond the spectral gap: effective number of neighbours, neighbourhood heterogeneity,
exact averaging, and their place in `summary` / `p2pfl analyze`."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

import analysis as A
import topologies as T
from p2pfl.cli import main

RTOL = 1e-11


def series_covariance(matrices: list[np.ndarray], gamma: float, t: int) -> np.ndarray:
    """``sum_{k >= 0} gamma^k P_k P_k^T``, ``P_k = W(t-1) ... W(t-1-k)`` over the periodic
    `matrices`, summed until gamma^k < 1e-18: the covariance of x(t) for
    ``x <- W(s) (sqrt(gamma) x + e(s))`` unrolled."""
    p, n = len(matrices), matrices[0].shape[0]
    C, P, k = np.zeros((n, n)), np.eye(n), 0
    while gamma**k >= 1e-18:
        P = P @ matrices[(t - 1 - k) % p]
        C += gamma**k * P @ P.T
        k += 1
    return C


def from_variances(variances: np.ndarray, gamma: float) -> tuple[float, float, np.ndarray]:
    """(mean, worst, all) n_eff from per-node variances."""
    return (1 / ((1 - gamma) * variances.mean()), 1 / ((1 - gamma) * variances.max()),
            1 / ((1 - gamma) * variances))


def permutations_mix(n: int) -> np.ndarray:
    """0.5 shift-by-1 + 0.3 a fixed permutation + 0.2 I: doubly stochastic, not normal."""
    perm = np.eye(n)[:, np.random.default_rng(1).permutation(n)]
    return 0.5 * np.roll(np.eye(n), 1, axis=0) + 0.3 * perm + 0.2 * np.eye(n)


# ---------------------------------------------------------------- effective number of neighbours
@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.9, 0.99])
def test_effective_neighbors_limits(gamma: float) -> None:
    n = 7
    assert A.effective_neighbors(np.full((n, n), 1 / n), gamma) == pytest.approx(n, rel=RTOL)
    assert A.effective_neighbors(np.full((n, n), 1 / n), gamma, mode="worst") == pytest.approx(
        n, rel=RTOL)
    np.testing.assert_allclose(A.effective_neighbors(T.complete(n), gamma, mode="all"),
                               np.full(n, n), rtol=RTOL)
    with pytest.warns(A.NoConsensusWarning, match=r"\(7 groups that never mix\)"):
        assert A.effective_neighbors(np.eye(n), gamma) == pytest.approx(1.0, rel=RTOL)
    assert A.effective_neighbors(np.eye(1), gamma) == pytest.approx(1.0, rel=RTOL)  # connected


@pytest.mark.parametrize("W", [T.doubly_stochastic(nx.lollipop_graph(5, 4)),  # symmetric
                               permutations_mix(9)],  # non-normal: the Lyapunov solver
                         ids=["symmetric", "nonsymmetric"])
def test_effective_neighbors_static_against_series(W: np.ndarray) -> None:
    gamma = 0.8
    C = series_covariance([W], gamma, 0)
    mean, worst, every = from_variances(np.diag(C), gamma)
    assert A.effective_neighbors(W, gamma) == pytest.approx(mean, rel=RTOL)
    assert A.effective_neighbors(W, gamma, mode="worst") == pytest.approx(worst, rel=RTOL)
    np.testing.assert_allclose(A.effective_neighbors(W, gamma, mode="all"), every, rtol=RTOL)
    assert 1 < worst < mean < W.shape[0]


def test_effective_neighbors_periodic_at_each_phase() -> None:
    rounds = [T.doubly_stochastic(T.ring(6)), T.doubly_stochastic(T.star(6)),
              permutations_mix(6)]
    schedule = T.as_schedule([T.ring(6), T.star(6), permutations_mix(6)])  # period 3
    gamma, values = 0.7, []
    for t in range(4):
        expected = from_variances(np.diag(series_covariance(rounds, gamma, t)), gamma)[0]
        values.append(A.effective_neighbors(schedule, gamma, t))
        assert values[-1] == pytest.approx(expected, rel=RTOL)
    assert values[3] == values[0] and len({round(v, 6) for v in values[:3]}) == 3  # the phase


def test_effective_neighbors_one_peer_exponential_closed_form() -> None:
    # rounds average over 2, 4, 8 nodes, then all 16 (every product from then on is J):
    # C_ii = 1/2 + gamma/4 + gamma^2/8 + gamma^3 / (16 (1 - gamma)), at every phase
    s = T.one_peer_exponential(16)
    for gamma in (0.5, 0.9):
        c = 1 / 2 + gamma / 4 + gamma**2 / 8 + gamma**3 / (16 * (1 - gamma))
        for t in range(4):
            assert A.effective_neighbors(s, gamma, t) == pytest.approx(1 / ((1 - gamma) * c),
                                                                       rel=RTOL)
    assert A.effective_neighbors(s, 0.9) == pytest.approx(7.801072647489, rel=1e-12)


def test_effective_neighbors_pushsum_reads_the_debiased_models() -> None:
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    # W = pi 1^T: Push-Sum averages exactly in one round, whatever pi
    np.testing.assert_allclose(A.effective_neighbors(np.outer(pi, np.ones(4)), 0.9, mode="all"),
                               np.full(4, 4.0), rtol=RTOL)
    W = T.column_stochastic(nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3), (3, 0)]))
    weights = np.linalg.matrix_power(W, 400) @ np.ones(4)  # Push-Sum's weights, run to the limit
    np.testing.assert_allclose(weights, 4 * np.array([4, 4, 3, 2]) / 13, rtol=1e-12)
    variances = np.diag(series_covariance([W], 0.6, 0)) / weights**2
    assert A.effective_neighbors(W, 0.6) == pytest.approx(from_variances(variances, 0.6)[0],
                                                          rel=RTOL)


def test_effective_neighbors_refuses_what_has_no_steady_state() -> None:
    with pytest.raises(ValueError, match="aperiodic schedule or a trace"):
        A.effective_neighbors(T.random_out(8, 2, seed=0), 0.9)
    with pytest.raises(ValueError, match="strongly connected"):  # Push-Sum, no Perron vector
        A.effective_neighbors(nx.DiGraph([(0, 1), (1, 2), (2, 1)]), 0.9)
    for gamma in (1.0, -0.1, True):
        with pytest.raises(ValueError, match=r"gamma must be a number in \[0, 1\)"):
            A.effective_neighbors(T.ring(5), gamma)
    with pytest.raises(ValueError, match="mode must be one of mean, worst, all"):
        A.effective_neighbors(T.ring(5), 0.9, mode="max")
    with pytest.raises(ValueError, match="column 1 sums to 1.5"):
        A.effective_neighbors(np.array([[1.0, 0.5], [0.0, 1.0]]), 0.9)
    with pytest.raises(ValueError, match="mixing applies to graphs"):
        A.effective_neighbors(np.eye(3), 0.9, mixing="doubly_stochastic")


# ---------------------------------------------------------------- neighbourhood heterogeneity
def test_neighborhood_heterogeneity_limits() -> None:
    Pi = np.random.default_rng(0).dirichlet(np.full(4, 0.3), size=10)  # [10 nodes, 4 classes]
    assert A.neighborhood_heterogeneity(T.complete(10), Pi) == pytest.approx(0.0, abs=1e-15)
    assert A.neighborhood_heterogeneity(np.eye(10), Pi) == pytest.approx(
        np.var(Pi, axis=0).sum(), rel=1e-13)
    ring = A.neighborhood_heterogeneity(T.ring(10), Pi)
    assert 0 < ring < np.var(Pi, axis=0).sum()


def test_neighborhood_heterogeneity_by_hand() -> None:
    W = np.array([[1 / 2, 1 / 2, 0], [1 / 2, 1 / 4, 1 / 4], [0, 1 / 4, 3 / 4]])
    Pi = np.array([[1, 0], [0, 1], [1 / 2, 1 / 2]])
    # mixtures [1/2, 1/2], [5/8, 3/8], [3/8, 5/8] around [1/2, 1/2]: (0 + 2/64 + 2/64) / 3
    assert A.neighborhood_heterogeneity(W, Pi) == pytest.approx(1 / 48, rel=1e-14)
    # Push-Sum: pi = (2/5, 3/5), weights (4/5, 6/5); mixtures [5/8, 5/12] and [5/12, 5/9]
    W = np.array([[1 / 2, 1 / 3], [1 / 2, 2 / 3]])
    assert A.neighborhood_heterogeneity(W, np.eye(2)) == pytest.approx(169 / 10368, rel=1e-13)
    pi = np.array([0.2, 0.3, 0.5])  # W = pi 1^T: the de-biased models are the exact average
    assert A.neighborhood_heterogeneity(np.outer(pi, np.ones(3)), Pi) == pytest.approx(
        0.0, abs=1e-15)


def test_neighborhood_heterogeneity_bad_input() -> None:
    with pytest.raises(ValueError, match="row 1 sums to 2"):
        A.neighborhood_heterogeneity(T.ring(3), np.array([[1, 0], [1, 1], [0, 1]]))
    with pytest.raises(ValueError, match="n = 3 rows, got shape"):
        A.neighborhood_heterogeneity(T.ring(3), np.eye(4))
    with pytest.raises(ValueError, match="non-negative"):
        A.neighborhood_heterogeneity(T.ring(3), np.array([[2, -1], [0, 1], [0, 1]]))
    with pytest.raises(ValueError, match="not column-stochastic"):
        A.neighborhood_heterogeneity(2 * np.eye(3), np.eye(3))


# ---------------------------------------------------------------- exact averaging
def de_bruijn(n: int) -> np.ndarray:
    """Node i sends half to 2i and half to 2i + 1 (mod n): W^log2(n) = J, W^t != J before."""
    W = np.zeros((n, n))
    for i in range(n):
        W[2 * i % n, i] += 0.5
        W[(2 * i + 1) % n, i] += 0.5
    return W


def test_exact_averaging_rounds() -> None:
    assert A.exact_averaging_rounds(T.complete(8)) == 1
    assert A.exact_averaging_rounds(T.one_peer_exponential(16)) == 4
    assert A.exact_averaging_rounds(T.one_peer_exponential(16), max_rounds=3) is None
    assert A.exact_averaging_rounds(T.one_peer_exponential(12)) is None
    assert A.exact_averaging_rounds(T.ring(12)) is None
    assert A.exact_averaging_rounds(T.complete(1)) == 0 and A.exact_averaging_rounds(np.eye(1)) == 0
    assert A.exact_averaging_rounds(de_bruijn(8)) == 3  # static, non-normal: W^2 != J = W^3
    fast = 0.999 * np.full((6, 6), 1 / 6) + 0.001 * np.eye(6)  # 1e-12 after 4 rounds, never 0
    assert A.exact_averaging_rounds(fast) is None  # static: its rank never falls
    assert A.exact_averaging_rounds([fast] * 8) is None  # a trace: no round kills the deviation
    s = T.one_peer_exponential(8)
    trace = [T.column_stochastic(s.at(t)) for t in range(3)]
    assert A.exact_averaging_rounds(trace) == 3 and A.exact_averaging_rounds(trace[:2]) is None


def test_exact_averaging_rounds_pushsum() -> None:
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    assert A.exact_averaging_rounds(np.outer(pi, np.ones(4))) == 1  # equal columns, v = pi > 0
    # everything to node 0: equal columns, but the other nodes hold no weight, ever
    assert A.exact_averaging_rounds(np.outer(np.eye(4)[0], np.ones(4))) is None


def test_exact_averaging_rounds_needs_a_bound_without_a_period() -> None:
    with pytest.raises(ValueError, match="no period: give max_rounds"):
        A.exact_averaging_rounds(T.random_out(8, 2, seed=0))
    assert A.exact_averaging_rounds(T.random_out(8, 2, seed=0), max_rounds=30) is None
    with pytest.raises(ValueError, match="max_rounds must be an integer >= 0"):
        A.exact_averaging_rounds(T.ring(4), max_rounds=-1)


# ---------------------------------------------------------------- summary and `p2pfl analyze`
def test_summary_names_per_round_and_per_period() -> None:
    s = A.summary(T.one_peer_exponential(16))
    assert s["per_round_rate"] == 0.0 and s["spectral_gap_per_round"] == s["spectral_gap"] == 1.0
    assert s["slem_per_period"] == 0.0 and s["spectral_gap_per_period"] == 1.0
    assert s["exact_averaging_rounds"] == 4 and s["effective_neighbors_gamma"] == 0.9
    assert s["effective_neighbors"] == pytest.approx(7.801072647489, rel=1e-12)
    s = A.summary(T.one_peer_exponential(12))  # per period: the slem of the product, 0.6762^4
    assert s["slem_per_period"] == pytest.approx(s["per_round_rate"] ** 4, rel=1e-12)
    assert s["exact_averaging_rounds"] is None
    s = A.summary(T.complete(16), gamma=0.5)
    assert s["exact_averaging_rounds"] == 1 and s["slem_per_period"] is None
    assert s["effective_neighbors"] == pytest.approx(16, rel=RTOL)
    s = A.summary(T.random_out(12, 2, seed=0), horizon=10)
    assert s["effective_neighbors"] is None and s["spectral_gap_per_period"] is None
    s = A.summary(nx.DiGraph([(0, 1), (1, 2), (2, 1)]))
    assert s["effective_neighbors"] is None and s["exact_averaging_rounds"] is None
    with pytest.raises(ValueError, match="gamma"):
        A.summary(T.ring(4), gamma=1.5)


def test_analyze_cli_gamma(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "one_peer_exponential", "--n", "16", "--gamma", "0.5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    c = 1 / 2 + 0.5 / 4 + 0.5**2 / 8 + 0.5**3 / (16 * 0.5)
    assert result["effective_neighbors"] == pytest.approx(1 / (0.5 * c), rel=RTOL)
    assert result["effective_neighbors_gamma"] == 0.5 and result["exact_averaging_rounds"] == 4
    assert main(["analyze", "ring", "--gamma", "1"]) == 2
    assert capsys.readouterr().err == "p2pfl: error: --gamma: must be in [0, 1), got 1.0\n"
