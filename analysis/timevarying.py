"""Mixing over time-varying schedules: products of round matrices, per-round rate, mixing time.

Round t uses W(t) = mixing(schedule.at(t)); the product of rounds t0..t1-1 is
``W(t1-1) ... W(t0)`` (topologies.md 0). Dense, for n <= DENSE_MAX.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import numpy as np

from analysis.connectivity import ScheduleLike, rounds_of
from analysis.matrices import as_matrix
from analysis.spectral import slem
from topologies.mixing import column_stochastic, doubly_stochastic

EXACT = 1e-12  # a product this close to rank one is exact averaging (topologies.md 3.9)

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

    rounds defaults to the period; a product within 1e-12 of exact averaging gives 0. For a
    static W it equals slem(W); for circulant schedules ``||Pi - J||_2 ** (1 / period)``
    (topologies.md 3.2: one-peer n = 12 -> 0.6762).
    """
    sched, length = rounds_of(schedule)
    rounds = rounds or sched.period or length
    if rounds is None:
        raise ValueError("the schedule has no period: give the number of rounds")
    return rate_of_product(product(sched, 0, rounds, mixing), rounds)


def rate_of_product(P: np.ndarray, rounds: int) -> float:
    """slem(P) ** (1 / rounds), 0 when P is exact averaging up to 1e-12."""
    rate = slem(P)
    return 0.0 if rate < EXACT else rate ** (1.0 / rounds)


def schedule_mixing_time(schedule: ScheduleLike, eps: float = 1e-3, max_rounds: int = 10_000,
                         mixing: str | None = None) -> int | None:
    """First t with ``||W(t-1) ... W(0) (I - J)||_2 <= eps``, or None within max_rounds.

    For doubly-stochastic rounds this is ``||W(t:0) - J||_2`` (topologies.md 4.6, T_2); for
    column-stochastic ones it measures how far the columns of the product still differ.
    """
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    sched, length = rounds_of(schedule)
    n = sched.n
    P = np.eye(n) - 1.0 / n
    limit = max_rounds if length is None else min(max_rounds, length)
    for t in range(limit):
        P = round_matrix(sched.at(t), mixing) @ P
        frob = np.linalg.norm(P, "fro")
        if frob <= eps or (frob <= eps * np.sqrt(n) and np.linalg.norm(P, 2) <= eps):
            return t + 1
    return None
