"""What a node's neighbourhood gives it, beyond the spectral gap: the effective number of
neighbours (Vogels et al. 2022) and the neighbourhood heterogeneity (Le Bars et al. 2023).

Matrices follow the column convention (W[j, i]: share of i's mass sent to j; one round is
``x <- W x``, so row j of ``W X`` is what node j holds after it). For a column-stochastic W that
is not doubly stochastic both metrics read the walk as Push-Sum's: node j's model is
``z_j = x_j / w_j``, with the weights w = n pi at their steady state (pi the Perron vector);
for a doubly-stochastic W, w = 1 and they are the papers' definitions.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

import topologies as T
from analysis.connectivity import ScheduleLike
from analysis.matrices import Matrix, MatrixLike, as_matrix, check_column_stochastic, is_symmetric
from analysis.spectral import perron_vector
from analysis.timevarying import MatrixRounds, round_matrices

MODES = ("mean", "worst", "all")
ROW_SUM_ATOL = 1e-12  # rows summing to 1 this closely: doubly stochastic, Push-Sum weights 1
LYAPUNOV_RTOL = 1e-17  # a doubling step adding less than this share of the trace ends the sum
LYAPUNOV_STEPS = 64  # 2^64 terms: gamma^(2^64) is 0 for every float gamma < 1


class NoConsensusWarning(RuntimeWarning):
    """A metric read on a topology whose nodes never reach consensus (not strongly connected):
    the number is the groups' own, not the network's."""


def walk_covariance(topology: ScheduleLike | Matrix, gamma: float, t: int = 0, *,
                    mixing: str | None = None) -> np.ndarray:
    """Steady-state covariance of the random walk ``x <- W(s) (sqrt(gamma) x + e(s))``, read at
    the start of round t.

    The walk: one scalar per node, e(s) i.i.d. standard normal [n], gamma in [0, 1) the decay
    of the past. Its covariance at the start of round t (after round t - 1) is
    ``C(t) = sum_{k >= 0} gamma^k P_k P_k^T`` with ``P_k = W(t-1) ... W(t-1-k)``.

    Parameters
    ----------
    topology : a matrix or graph (static), or a schedule with a period (round matrices as in
        `analysis.timevarying.round_matrices`); ValueError for an aperiodic schedule or a trace.
    gamma : float in [0, 1).
    t : the round at whose start C is read; only its phase ``t mod period`` matters (none for a
        static topology).
    mixing : the round matrix of a graph (None: its natural matrix).

    Returns
    -------
    C : [n, n] float64, symmetric positive semi-definite.

    Notes
    -----
    Static symmetric ``W = Q diag(l) Q^T``: ``C = Q diag(l^2 / (1 - gamma l^2)) Q^T``. Otherwise
    C is the solution of the lifted discrete Lyapunov equation
    ``C = gamma^p Phi C Phi^T + N``, ``N = sum_{m < p} gamma^m P_m P_m^T`` (the noise one period
    adds; p = 1, static: ``C = gamma W C W^T + W W^T``), summed by doubling (`_lyapunov`).
    """
    return _steady_state(topology, gamma, t, mixing)[0]


def _steady_state(topology: ScheduleLike | Matrix, gamma: float, t: int,
                  mixing: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(C, Phi) of `walk_covariance`: Phi [n, n] = W(t-1) ... W(t-p), the product of the p
    rounds of one period ending at t."""
    check_gamma(gamma)
    if isinstance(t, bool) or not isinstance(t, int) or t < 0:
        raise ValueError(f"t must be an integer >= 0, got {t!r}")
    rounds = round_matrices(topology, mixing)
    if rounds.period is None:
        raise ValueError("the effective number of neighbours needs a static or periodic "
                         "topology: an aperiodic schedule or a trace has no steady state")
    if rounds.period == 1:
        W = rounds.at(0)
        if is_symmetric(W, atol=0.0):
            values, Q = np.linalg.eigh(W)
            return (Q * (values**2 / (1.0 - gamma * values**2))) @ Q.T, W
        return _lyapunov(W, gamma, 1, W @ W.T), W
    Phi, noise = _lift(rounds, gamma, rounds.period, t % rounds.period)
    return _lyapunov(Phi, gamma, rounds.period, noise), Phi


def _lift(rounds: MatrixRounds, gamma: float, period: int,
          phase: int) -> tuple[np.ndarray, np.ndarray]:
    """(Phi, N) of the period ending at `phase`: ``P_m = W(phase-1) ... W(phase-1-m)``,
    ``Phi = P_{p-1}``, ``N = sum_{m < p} gamma^m P_m P_m^T``."""
    P = np.eye(rounds.n)
    noise = np.zeros((rounds.n, rounds.n))
    for m in range(period):
        P = P @ rounds.at((phase - 1 - m) % period)
        noise += gamma**m * (P @ P.T)
    return P, noise


def _lyapunov(Phi: np.ndarray, gamma: float, period: int, noise: np.ndarray) -> np.ndarray:
    """C with ``C = a C a^T + noise``, ``a = sqrt(gamma^period) Phi``, by doubling (Smith's
    method): ``X <- X + A X A^T, A <- A^2`` sums the series ``sum_k a^k noise a^kT`` 2^j terms
    at a time, until a step adds less than LYAPUNOV_RTOL of the trace (every term is positive
    semi-definite). A dozen products for gamma = 0.9; several times faster than
    scipy.linalg.solve_discrete_lyapunov above a few hundred nodes, and as accurate."""
    A = math.sqrt(gamma**period) * Phi
    C = noise.copy()
    for _ in range(LYAPUNOV_STEPS):
        added = A @ C @ A.T
        C += added
        if np.trace(added) <= LYAPUNOV_RTOL * np.trace(C):
            break
        A = A @ A
    return 0.5 * (C + C.T)


def check_gamma(gamma: float) -> None:
    """Check the decay of the effective number of neighbours.

    Parameters
    ----------
    gamma : the decay.

    Raises
    ------
    ValueError
        unless gamma is a number in [0, 1).
    """
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not 0 <= gamma < 1:
        raise ValueError(f"gamma must be a number in [0, 1), got {gamma!r}")


def _pushsum_weights(Phi: Matrix) -> np.ndarray:
    """Steady-state Push-Sum weights [n] of a column-stochastic Phi: 1 if its rows sum to 1,
    else n pi (ValueError, from perron_vector, if Phi is not strongly connected)."""
    n = Phi.shape[0]
    rows = np.asarray(Phi.sum(axis=1)).ravel()
    if np.allclose(rows, 1.0, rtol=0.0, atol=ROW_SUM_ATOL):
        return np.ones(n)
    return n * perron_vector(Phi)


def effective_neighbors(topology: ScheduleLike | Matrix, gamma: float, t: int = 0,
                        mode: str = "mean", *, mixing: str | None = None) -> float | np.ndarray:
    """Effective number of neighbours n_eff(gamma) of Vogels et al. (2022).

    How many nodes' noise a node averages over, in the random walk
    ``x <- W(s) (sqrt(gamma) x + e(s))`` (see `walk_covariance`): with C its steady-state
    covariance, ``n_eff = 1 / ((1 - gamma) mean_i C_ii)``. Alone (W = I) a node keeps
    ``C_ii = 1 / (1 - gamma)``: n_eff = 1; the complete graph (W = J) gives n; gamma -> 0 counts
    only the last round (``1 / mean_i sum_k W[i, k]^2``), gamma -> 1 tends to n for any
    topology whose products tend to J. A larger gamma (a smaller learning rate) looks further back.

    Parameters
    ----------
    topology : a matrix or graph (static), or a schedule with a period; a Push-Sum (column-
        stochastic, not doubly stochastic) matrix needs a strongly connected graph.
    gamma : float in [0, 1).
    t : phase of a periodic schedule: C is read at the start of round t (after round t - 1);
        t = 0 reads it after a whole period. The value depends on the phase unless the rounds
        are alike (a circulant schedule such as the one-peer exponential graph).
    mode : "mean" (the paper's n_eff: the mean variance), "worst" (the largest variance,
        max_i C_ii) or "all" (each node's ``1 / ((1 - gamma) C_ii)``, [n]).
    mixing : the round matrix of a graph (None: its natural matrix).

    Returns
    -------
    float, or an [n] float64 array for mode "all"; in [1, n] for a doubly-stochastic W.

    Warns
    -----
    NoConsensusWarning
        when the topology (the product of one period) is not strongly connected: n_eff is
        still the walk's (W = I gives 1, two disjoint cliques of m nodes tend to m as gamma
        -> 1), but it counts neighbours within groups that never mix, and no model is the
        network's average.

    Notes
    -----
    A column-stochastic W that is not doubly stochastic keeps the walk's numerators x where
    its Perron vector pi puts them; Push-Sum's models are ``z_i = x_i / w_i`` with weights
    ``w = n pi_t`` (pi_t: the Perron vector of the period's product ending at t), so
    ``C_ii / w_i^2`` replaces C_ii. This is not in the paper (whose matrices are doubly
    stochastic); it gives n for ``W = pi 1^T`` (Push-Sum averages exactly in one round).
    Aperiodic schedules are refused: their covariance depends on the realised rounds.

    References
    ----------
    T. Vogels, H. Hendrikx, M. Jaggi, "Beyond spectral gap: the role of the topology in
    decentralized learning", NeurIPS 2022.

    Examples
    --------
    >>> import analysis as A, topologies as T
    >>> round(A.effective_neighbors(T.ring(32), 0.9), 4)
    6.6321
    >>> round(A.effective_neighbors(T.one_peer_exponential(32), 0.9), 4)  # at every phase
    9.2864
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    C, Phi = _steady_state(topology, gamma, t, mixing)
    variance = np.diag(C) / _pushsum_weights(Phi) ** 2
    groups, _ = connected_components(sp.csr_array(np.asarray(Phi) != 0), directed=True,
                                     connection="strong")
    if groups > 1:
        warnings.warn(f"effective_neighbors: the topology is not strongly connected ({groups} "
                      "groups that never mix): n_eff counts the neighbours within a group, and "
                      "the nodes never reach consensus", NoConsensusWarning, stacklevel=2)
    if mode == "all":
        return 1.0 / ((1.0 - gamma) * variance)
    spread = variance.mean() if mode == "mean" else variance.max()
    return float(1.0 / ((1.0 - gamma) * spread))


def neighborhood_heterogeneity(W: MatrixLike, proportions: np.ndarray) -> float:
    """Neighbourhood heterogeneity tau(W) of Le Bars et al. (2023).

    ``tau(W) = ||W Pi - J Pi||_F^2 / n``: how far the class mixture each node holds after one
    round (row j of ``W Pi``, ``x_j <- sum_i W[j, i] x_i``) is from the global one (every row of
    ``J Pi`` is the mean of the rows of Pi). 0 for W = J; for W = I, the variance of the
    proportions around their mean summed over the classes. It bounds the bias that
    heterogeneous data adds to decentralized SGD (it replaces the spectral gap times the
    gradient dissimilarity in their rate).

    Parameters
    ----------
    W : matrix (dense or sparse) or graph (its natural matrix), column-stochastic.
    proportions : [n, K] class proportions Pi, non-negative, each row summing to 1 (from label
        counts C: ``C / C.sum(axis=1, keepdims=True)``).

    Returns
    -------
    float >= 0; for a doubly-stochastic W the same number as ``T.neighborhood_heterogeneity``,
    which computes it (and checks W and the proportions as it does).

    Notes
    -----
    For a column-stochastic W that is not doubly stochastic (Push-Sum: gradient steps on the
    numerators x, model z = x / w) node j's mixture is ``sum_i W[j, i] Pi_i / w_j`` with the
    steady-state weights w = n pi; W = pi 1^T then gives 0. This extension is not in the paper;
    ``T.neighborhood_heterogeneity`` refuses such a W without the weights.

    References
    ----------
    B. Le Bars, A. Bellet, M. Tommasi, E. Lavoie, A.-M. Kermarrec, "Refined convergence and
    topology learning for decentralized SGD with heterogeneous data", AISTATS 2023.
    """
    W = as_matrix(W)
    n = W.shape[0]
    check_column_stochastic(W)  # before its Perron vector
    Pi = np.asarray(proportions, dtype=float)
    if Pi.ndim != 2 or Pi.shape[0] != n:
        raise ValueError(f"proportions must be an [n, K] array with n = {n} rows, got shape "
                         f"{Pi.shape}")
    return T.neighborhood_heterogeneity(W, Pi, weights=_pushsum_weights(W))

