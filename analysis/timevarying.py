"""Mixing over time-varying schedules: products of round matrices, per-round rate, mixing time.

Round t uses W(t) = mixing(schedule.at(t)); the product of rounds t0..t1-1 is
``W(t1-1) ... W(t0)``. Dense, for n <= DENSE_MAX.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import networkx as nx
import numpy as np

from analysis.connectivity import ScheduleLike, is_strongly_connected, rounds_of, union_graph
from analysis.matrices import as_matrix
from topologies.mixing import column_stochastic, doubly_stochastic

ROUNDING = 1e-12  # one round shrinking the product's sum-zero part this much: exact averaging

MIXINGS: dict[str, Callable[[nx.Graph], np.ndarray]] = {
    "column_stochastic": column_stochastic,
    "doubly_stochastic": doubly_stochastic,
}


def round_matrix(graph: nx.Graph, mixing: str | None = None) -> np.ndarray:
    """W of one round: the natural matrix of `graph` (mixing=None: MH if undirected, push rule if
    directed) or the named one ("column_stochastic" | "doubly_stochastic")."""
    if mixing is None:
        return np.asarray(as_matrix(graph, dense_max=graph.number_of_nodes()))
    if mixing not in MIXINGS:
        raise ValueError(f"mixing must be one of {', '.join(MIXINGS)} or None, got {mixing!r}")
    return MIXINGS[mixing](graph)


def product(schedule: ScheduleLike, t0: int, t1: int, mixing: str | None = None) -> np.ndarray:
    """W(t1-1) @ ... @ W(t0), [n, n] (identity when t0 == t1)."""
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

    rounds defaults to the period. 1 when the union of the rounds is not strongly connected
    (slem's convention: no consensus); 0 for exact averaging (the product is pi 1^T). For a
    static W it equals slem(W); for circulant schedules ``||Pi - J||_2 ** (1 / period)``
    (one-peer exponential, n = 12: 0.6762). Accurate for any number of rounds: the
    product is never formed (its slem, 0.5^400 say, is far below its rounding error); see
    `_log_slem_of_product`.
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
    connected union, or None within max_rounds.

    For doubly-stochastic rounds this is ``||W(t:0) - J||_2``; for
    column-stochastic ones it measures how far the columns of the product still differ, which
    says nothing while some node has not heard from another (0 -> 1 <-> 2: the columns agree,
    node 0 keeps its own value). None at once for a periodic schedule whose union over a
    period is not strongly connected.
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
