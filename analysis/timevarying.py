"""Mixing over time-varying schedules: products of round matrices, per-round rate, mixing time,
exact averaging.

Round t uses W(t) = mixing(schedule.at(t)); the product of rounds t0..t1-1 is
``W(t1-1) ... W(t0)``. Dense, for n <= DENSE_MAX.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import scipy.sparse as sp

from analysis import matrices
from analysis.connectivity import ScheduleLike, is_strongly_connected, rounds_of, union_graph
from analysis.matrices import Matrix, as_matrix, check_column_stochastic
from topologies.mixing import column_stochastic, doubly_stochastic

ROUNDING = 1e-12  # one round shrinking the product's sum-zero part this much: exact averaging

MIXINGS: dict[str, Callable[[nx.Graph], np.ndarray]] = {
    "column_stochastic": column_stochastic,
    "doubly_stochastic": doubly_stochastic,
}


def round_matrix(graph: nx.Graph, mixing: str | None = None) -> np.ndarray:
    """W of one round.

    Parameters
    ----------
    graph : the round's graph.
    mixing : None: the natural matrix (MH if undirected, push rule if directed); or
        "column_stochastic" | "doubly_stochastic".

    Returns
    -------
    [n, n] float64 ndarray.

    Raises
    ------
    ValueError
        for an unknown mixing.
    """
    if mixing is None:
        return np.asarray(as_matrix(graph, dense_max=graph.number_of_nodes()))
    if mixing not in MIXINGS:
        raise ValueError(f"mixing must be one of {', '.join(MIXINGS)} or None, got {mixing!r}")
    return MIXINGS[mixing](graph)


def product(schedule: ScheduleLike, t0: int, t1: int, mixing: str | None = None) -> np.ndarray:
    """W(t1-1) @ ... @ W(t0).

    Parameters
    ----------
    schedule : a schedule, graph, matrix or trace.
    t0, t1 : first round and one past the last, 0 <= t0 <= t1.
    mixing : as `round_matrix`.

    Returns
    -------
    [n, n] float64 ndarray (identity when t0 == t1).

    Raises
    ------
    ValueError
        unless 0 <= t0 <= t1.
    """
    if not 0 <= t0 <= t1:
        raise ValueError(f"need 0 <= t0 <= t1, got t0={t0}, t1={t1}")
    sched, _ = rounds_of(schedule)
    P = np.eye(sched.n)
    for t in range(t0, t1):
        P = round_matrix(sched.at(t), mixing) @ P
    return P


def per_round_rate(schedule: ScheduleLike, rounds: int | None = None,
                   mixing: str | None = None) -> float:
    """``slem(W(rounds-1) ... W(0)) ** (1 / rounds)``: the geometric-mean contraction per round.

    For a static W it equals slem(W); for circulant schedules ``||Pi - J||_2 ** (1 / period)``
    (one-peer exponential, n = 12: 0.6762). Accurate for any number of rounds: the product is
    never formed (its slem, 0.5^400 say, is far below its rounding error); see
    `_log_slem_of_product`.

    Parameters
    ----------
    schedule : a schedule, graph, matrix or trace.
    rounds : rounds of the product; defaults to the period (or a trace's length).
    mixing : as `round_matrix`.

    Returns
    -------
    float in [0, 1]: 1 when the union of the rounds is not strongly connected (slem's
    convention: no consensus); 0 for exact averaging (the product is pi 1^T).

    Raises
    ------
    ValueError
        for a schedule without a period when rounds is not given, or rounds not an integer >= 1.
    """
    sched, length = rounds_of(schedule)
    rounds = rounds or sched.period or length
    if rounds is None:
        raise ValueError("the schedule has no period: give the number of rounds")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    if not is_strongly_connected(union_graph(sched, 0, rounds)):
        return 1.0
    matrices = (round_matrix(sched.at(t), mixing) for t in range(rounds))
    return math.exp(_log_slem_of_product(matrices, sched.n) / rounds)


def _log_slem_of_product(matrices: Iterable[np.ndarray], n: int) -> float:
    """ln slem(W(T-1) ... W(0)) of column-stochastic [n, n] matrices W(0), W(1), ... (-inf for
    exact averaging).

    The sum-zero vectors are invariant under every W(t) (1^T W = 1^T), and the eigenvalues of
    the product other than 1 are those of its restriction there: X = W(t) ... W(0) (I - J),
    re-projected onto sum-zero columns each round (rounding would otherwise grow along 1) and
    rescaled to unit Frobenius norm, the logs of the scales summed. A round that shrinks X
    below ROUNDING relative has made the product exact averaging.
    """
    X = np.eye(n) - 1.0 / n
    size, log_scale = float(np.linalg.norm(X)), 0.0
    for W in matrices:
        X = W @ X
        X -= X.mean(axis=0)
        scale = float(np.linalg.norm(X))
        if scale <= ROUNDING * size:
            return -math.inf
        log_scale += math.log(scale)
        X, size = X / scale, 1.0
    radius = float(np.abs(np.linalg.eigvals(X)).max())
    return log_scale + math.log(radius) if radius > 0.0 else -math.inf


def schedule_mixing_time(schedule: ScheduleLike, eps: float = 1e-3, max_rounds: int = 10_000,
                         mixing: str | None = None) -> int | None:
    """First t with ``||W(t-1) ... W(0) (I - J)||_2 <= eps`` whose rounds 0..t-1 have a strongly
    connected union.

    For doubly-stochastic rounds this is ``||W(t:0) - J||_2``; for column-stochastic ones it
    measures how far the columns of the product still differ, which says nothing while some node
    has not heard from another (0 -> 1 <-> 2: the columns agree, node 0 keeps its own value).

    Parameters
    ----------
    schedule : a schedule, graph, matrix or trace.
    eps : tolerance, in (0, 1).
    max_rounds : largest t checked.
    mixing : as `round_matrix`.

    Returns
    -------
    int, or None within max_rounds; None at once for a periodic schedule whose union over a
    period is not strongly connected.

    Raises
    ------
    ValueError
        unless eps is in (0, 1).
    """
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    sched, length = rounds_of(schedule)
    if sched.period and not is_strongly_connected(union_graph(sched, 0, sched.period)):
        return None
    n = sched.n
    P = np.eye(n) - 1.0 / n
    limit = max_rounds if length is None else min(max_rounds, length)
    for t in range(limit):
        P = round_matrix(sched.at(t), mixing) @ P
        if _columns_agree(P, eps) and is_strongly_connected(union_graph(sched, 0, t + 1)):
            return t + 1
    return None


def _columns_agree(P: np.ndarray, eps: float) -> bool:
    """||P||_2 <= eps for P [n, n] (Frobenius first: it bounds the 2-norm from above)."""
    frob = np.linalg.norm(P, "fro")
    return bool(frob <= eps or (frob <= eps * np.sqrt(P.shape[0]) and np.linalg.norm(P, 2) <= eps))


@dataclass
class MatrixRounds:
    """The dense round matrices of a topology, from `round_matrices`: ``at(t)`` is W(t) [n, n].

    period: 1 for a matrix or a graph, the schedule's period, or None (an aperiodic schedule, a
    trace); length: the rounds a trace holds, else None.
    """

    n: int
    period: int | None
    length: int | None
    matrix: Callable[[int], np.ndarray]
    cache: dict[int, np.ndarray] = field(default_factory=dict)

    def at(self, t: int) -> np.ndarray:
        """W(t), [n, n] float64 (kept per phase of a periodic topology)."""
        if self.period is None:
            return self.matrix(t)
        phase = t % self.period
        if phase not in self.cache:
            self.cache[phase] = self.matrix(phase)
        return self.cache[phase]


def round_matrices(topology: ScheduleLike | Matrix, mixing: str | None = None) -> MatrixRounds:
    """The rounds of a matrix, graph, schedule or trace as dense column-stochastic matrices.

    A matrix (dense or sparse) is static and used as given, like a matrix in a trace; a graph or
    a schedule's round goes through `round_matrix` (`mixing`).

    Parameters
    ----------
    topology : a matrix, graph, schedule, or trace (list or tuple of graphs or matrices).
    mixing : as `round_matrix`; None for a matrix.

    Returns
    -------
    MatrixRounds, ``at(t)`` is W(t) [n, n].

    Raises
    ------
    ValueError
        for more than DENSE_MAX nodes, for `mixing` with a matrix, an empty trace, and for a
        given matrix that is not column-stochastic (non-negative, columns summing to 1 within
        1e-9).
    """
    if _is_matrix(topology):
        if mixing is not None:
            raise ValueError("mixing applies to graphs; a matrix is used as given")
        W = _dense_stochastic(topology, "W")
        return MatrixRounds(W.shape[0], 1, None, lambda t: W)
    if isinstance(topology, (list, tuple)):
        if not topology:
            raise ValueError("a trace needs at least one graph or matrix")
        items = [_dense_stochastic(x, f"round {k}") if _is_matrix(x) else round_matrix(x, mixing)
                 for k, x in enumerate(topology)]
        sizes = {W.shape[0] for W in items}
        if len(sizes) > 1:
            raise ValueError(f"the rounds of a trace must have one size, got {sorted(sizes)}")

        def item(t: int) -> np.ndarray:
            if not 0 <= t < len(items):
                raise ValueError(f"the trace has {len(items)} rounds; round {t} is outside it")
            return items[t]

        return MatrixRounds(items[0].shape[0], None, len(items), item)
    sched, _ = rounds_of(topology)
    _check_dense(sched.n)
    return MatrixRounds(sched.n, sched.period, None, lambda t: round_matrix(sched.at(t), mixing))


def _is_matrix(obj: object) -> bool:
    return sp.issparse(obj) or (isinstance(obj, np.ndarray) and obj.ndim == 2)


def _check_dense(n: int) -> None:
    if n > matrices.DENSE_MAX:
        raise ValueError(f"this metric is dense (n x n matrices): n = {n} is above "
                         f"DENSE_MAX = {matrices.DENSE_MAX}")


def _dense_stochastic(W: Matrix, what: str) -> np.ndarray:
    """W as a dense float64 [n, n] array, checked column-stochastic."""
    W = as_matrix(W)
    _check_dense(W.shape[0])
    W = np.asarray(W.toarray() if sp.issparse(W) else W)
    check_column_stochastic(W, what)
    return W


def exact_averaging_rounds(schedule: ScheduleLike | Matrix, max_rounds: int | None = None,
                           tol: float = 1e-10, *, mixing: str | None = None) -> int | None:
    """First t >= 0 after which rounds 0..t-1 have averaged exactly, or None.

    Exact averaging: the product ``P = W(t-1) ... W(0)`` sends every x(0) to its average at
    every node. For doubly-stochastic rounds that is ``P = J = 11^T / n``; for column-stochastic
    ones (Push-Sum) it is ``P = v 1^T`` with v > 0, every column equal, so that
    ``z_i = x_i / w_i`` is the average at every node while the numerators and weights are
    ``v_i sum(x)`` and ``n v_i`` (v = 1/n only when P is doubly stochastic).

    Parameters
    ----------
    schedule : matrix, graph (static), schedule or trace (see `round_matrices`).
    max_rounds : rounds to examine. Default: until the answer is certain for a static or
        periodic schedule (at most (n - 1) periods, see Notes), the length of a trace;
        required for an aperiodic schedule (ValueError without it).
    tol : a round that shrinks the product's deviation ``||P (I - J)||_F`` by this factor or
        more makes it exact; singular values below tol times the largest count as zero.
    mixing : the round matrix of a graph (see `round_matrix`).

    Returns
    -------
    int or None : 0 for n = 1; 1 for the complete graph; log2(n) for the one-peer exponential
        graph with n a power of 2; None if the rounds never average exactly (a ring) or not
        within max_rounds.

    Notes
    -----
    The deviation D(t) = P (I - J) is propagated round by round, rescaled to unit norm (as
    `per_round_rate` does), so that a product that shrinks fast but never exactly (a small
    slem) is not mistaken for exact averaging. For a static or periodic schedule,
    ``D(kp) = B^k`` with ``B = Phi (I - J)`` (Phi the product of one period p: ``J Phi = J``),
    so exact averaging happens iff B is nilpotent, by (n - 1) periods at the latest; the rank
    of B^k then falls every period, and a period that leaves it unchanged proves it never
    will: None.
    """
    if max_rounds is not None and (isinstance(max_rounds, bool) or not isinstance(max_rounds, int)
                                   or max_rounds < 0):
        raise ValueError(f"max_rounds must be an integer >= 0 or None, got {max_rounds!r}")
    if not 0 < tol < 1:
        raise ValueError(f"tol must be in (0, 1), got {tol}")
    rounds = round_matrices(schedule, mixing)
    n, period = rounds.n, rounds.period
    limits = [x for x in (max_rounds, rounds.length) if x is not None]
    limit = min(limits) if limits else None
    if limit is None and period is None:
        raise ValueError("the schedule has no period: give max_rounds")
    if n == 1:
        return 0
    D = (np.eye(n) - 1.0 / n) / math.sqrt(n - 1.0)
    rank, t = n - 1, 0
    while limit is None or t < limit:
        D = rounds.at(t) @ D
        t += 1
        D -= D.mean(axis=0)
        size = float(np.linalg.norm(D))
        if size <= tol:
            return _first_positive(rounds, t, limit)
        D /= size
        if period is not None and t % period == 0:
            singular = np.linalg.svd(D, compute_uv=False)
            now = int((singular > tol * singular[0]).sum())
            if now >= rank:
                return None
            rank = now
    return None


def _first_positive(rounds: MatrixRounds, t: int, limit: int | None) -> int | None:
    """First t' >= t whose product W(t'-1) ... W(0) (with equal columns v from round t on) has
    v > 0: a node whose v_i is 0 holds no Push-Sum weight. Only a round matrix with a zero on
    its diagonal can leave one (otherwise P[i, i] > 0). None past `limit`, or after n more
    periods."""
    P = np.eye(rounds.n)
    for s in range(t):
        P = rounds.at(s) @ P
    stop = limit if limit is not None else t + rounds.n * (rounds.period or 1)
    while P.min() <= 0.0:
        if t >= stop:
            return None
        P = rounds.at(t) @ P
        t += 1
    return t
