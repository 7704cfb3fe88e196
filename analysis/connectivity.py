"""Connectivity of graphs and of time-varying schedules.

``G`` may be a graph or a matrix (edge i -> j when ``W[j, i] > 0``). A ``schedule`` may be a
topologies Schedule (``at(t)``, ``period``), a single graph (static), or a finite list of graphs
or matrices (a trace: round t uses item t).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, shortest_path

import topologies as T
from analysis import matrices
from analysis.matrices import MatrixLike, adjacency, as_graph
from topologies.from_objects import as_schedule
from topologies.schedules import Schedule

ScheduleLike = Schedule | nx.Graph | Sequence[MatrixLike]
BFS_BLOCK = 1000  # sources per batched BFS in diameter() of a large graph


def is_strongly_connected(G: MatrixLike) -> bool:
    """Strong connectivity for a DiGraph or matrix, plain connectivity for an nx.Graph.

    Parameters
    ----------
    G : nx.Graph, nx.DiGraph, or [n, n] matrix (W[j, i] > 0 is the edge i -> j).

    Returns
    -------
    bool.
    """
    if isinstance(G, nx.Graph):
        return T.is_strongly_connected(G)
    return connected_components(adjacency(G), directed=True, connection="strong")[0] == 1


def number_of_components(G: MatrixLike) -> int:
    """Strongly connected components of a DiGraph or matrix; connected components of a Graph.

    Parameters
    ----------
    G : nx.Graph, nx.DiGraph, or [n, n] matrix.

    Returns
    -------
    int.
    """
    if isinstance(G, nx.Graph) and not G.is_directed():
        return nx.number_connected_components(G)
    return int(connected_components(adjacency(G), directed=True, connection="strong")[0])


def why_not_strongly_connected(G: MatrixLike) -> str | None:
    """Why G is not strongly connected (connected, for an nx.Graph), in words. O(n + m).

    Parameters
    ----------
    G : nx.Graph, nx.DiGraph, or [n, n] matrix.

    Returns
    -------
    str, "not strongly connected: k strongly connected components", or None if it is.
    """
    k = number_of_components(G)
    if k == 1:
        return None
    return f"not {_kind(G)}: {k} {_kind(G)} components"


def _kind(G: MatrixLike) -> str:
    """'connected' for an undirected nx.Graph, 'strongly connected' otherwise."""
    return "connected" if isinstance(G, nx.Graph) and not G.is_directed() else "strongly connected"


def _eccentricity_max(A: sp.csr_array) -> float:
    n, best = A.shape[0], 0.0
    for lo in range(0, n, BFS_BLOCK):
        D = shortest_path(A, method="D", unweighted=True, directed=True,
                          indices=np.arange(lo, min(n, lo + BFS_BLOCK)))
        best = max(best, float(D.max()))
    return best


def diameter(G: MatrixLike) -> int:
    """Largest shortest-path distance d(u, v), along edge directions in a DiGraph or matrix.

    Above DENSE_MAX nodes the exact value comes from batched BFS (scipy.sparse.csgraph), O(n m).

    Parameters
    ----------
    G : nx.Graph, nx.DiGraph, or [n, n] matrix.

    Returns
    -------
    int, in hops.

    Raises
    ------
    ValueError
        if the graph is not (strongly) connected: its diameter is infinite.
    """
    if not is_strongly_connected(G):
        raise ValueError(f"the graph is not {_kind(G)}, so its diameter is infinite")
    graph_n = G.number_of_nodes() if isinstance(G, nx.Graph) else G.shape[0]
    if graph_n > matrices.DENSE_MAX or not isinstance(G, nx.Graph):
        return int(_eccentricity_max(adjacency(G)))
    return nx.diameter(G)


def largest_component_diameter(G: MatrixLike) -> int:
    """Diameter of the largest (strongly) connected component: the finite part of an infinite
    diameter.

    Parameters
    ----------
    G : nx.Graph, nx.DiGraph, or [n, n] matrix.

    Returns
    -------
    int, in hops.
    """
    graph = as_graph(G)
    parts = (nx.strongly_connected_components(graph) if graph.is_directed()
             else nx.connected_components(graph))
    return diameter(graph.subgraph(max(parts, key=len)).copy())


class _Trace:
    """A finite list of graphs or matrices as a schedule: round t is item t."""

    def __init__(self, items: Sequence[MatrixLike]) -> None:
        if not items:
            raise ValueError("a trace needs at least one graph or matrix")
        self.items = [as_graph(g) for g in items]
        self.n = self.items[0].number_of_nodes()
        self.period: int | None = None
        self.directed = True
        self.needs_losses = False

    def at(self, t: int) -> nx.Graph:
        if not 0 <= t < len(self.items):
            raise ValueError(f"the trace has {len(self.items)} rounds; round {t} is outside it")
        return self.items[t]


def rounds_of(schedule: ScheduleLike) -> tuple[Schedule | _Trace, int | None]:
    """A schedule-like object as something with at(t) and n, and the rounds it holds.

    Parameters
    ----------
    schedule : a Schedule (or any object with at(t), n and period), a graph, a matrix, or a
        trace (list or tuple of graphs or matrices, one per round).

    Returns
    -------
    tuple (object with at(t) and n, number of rounds it holds: None when unbounded).
    """
    if isinstance(schedule, (list, tuple)):
        schedule = _Trace(schedule)
    if isinstance(schedule, _Trace):
        return schedule, len(schedule.items)
    if not isinstance(schedule, nx.Graph) and hasattr(schedule, "at") and hasattr(schedule, "n"):
        return schedule, None  # any object with at(t), n and period is a schedule
    return as_schedule(schedule), None


def union_graph(schedule: ScheduleLike, t0: int, t1: int) -> nx.DiGraph:
    """All edges used in rounds t0..t1-1, as one graph (undirected edges go both ways).

    Parameters
    ----------
    schedule : a schedule, graph, matrix or trace (`rounds_of`).
    t0, t1 : first round and one past the last, 0 <= t0 <= t1.

    Returns
    -------
    nx.DiGraph on 0..n-1.
    """
    return T.union_graph(rounds_of(schedule)[0], t0, t1)


@dataclass(frozen=True)
class BConnectivity:
    """Result of `b_connectivity`: window starts checked, the first failing one (or None), and
    the diameter of each window's union (math.inf when not strongly connected)."""

    B: int
    aligned: bool
    starts: tuple[int, ...]
    first_failure: int | None
    union_diameters: tuple[float, ...]

    @property
    def connected(self) -> bool:
        return self.first_failure is None

    @property
    def max_union_diameter(self) -> float:
        """SGP's Delta: the largest union diameter over the windows."""
        return max(self.union_diameters)


def _window_starts(B: int, horizon: int | None, period: int | None, aligned: bool,
                   length: int | None) -> range:
    if horizon is None:
        horizon = length
    if horizon is None:
        if period is None:
            raise ValueError("the schedule has no period: give the horizon (rounds to check)")
        # periodic: every distinct window (aligned starts modulo lcm(period, B); sliding: period)
        horizon = math.lcm(period, B) if aligned else period + B - 1
    if length is not None and horizon > length:
        raise ValueError(f"horizon {horizon} exceeds the {length} rounds of the trace")
    if horizon < B:
        raise ValueError(f"horizon {horizon} is shorter than one window of B = {B} rounds")
    last = horizon - B
    return range(0, last + 1, B) if aligned else range(0, last + 1)


def b_connectivity(schedule: ScheduleLike, B: int, horizon: int | None = None,
                   aligned: bool = True) -> BConnectivity:
    """Check B-bounded strong connectivity over rounds 0..horizon-1.

    aligned=True (default, Nedic-Olshevsky and SGP): the unions over rounds [lB, (l+1)B) must be
    strongly connected for every full window; aligned=False: every B consecutive rounds.

    Parameters
    ----------
    schedule : a schedule, graph, matrix or trace (`rounds_of`).
    B : window length, an integer >= 1.
    horizon : rounds checked. Default: a trace's length; for a periodic schedule every distinct
        window (lcm(period, B) rounds aligned, period + B - 1 sliding); an aperiodic schedule
        needs one.
    aligned : windows at multiples of B (True) or sliding (False).

    Returns
    -------
    BConnectivity: the window starts checked, the first failing one (or None) and the diameter
    of each window's union (math.inf when not strongly connected).

    Raises
    ------
    ValueError
        unless B is an integer >= 1; for an aperiodic schedule without a horizon, a horizon
        beyond a trace's rounds or shorter than one window.
    """
    if isinstance(B, bool) or not isinstance(B, int) or B < 1:
        raise ValueError(f"B must be an integer >= 1, got {B!r}")
    sched, length = rounds_of(schedule)
    starts = _window_starts(B, horizon, sched.period, aligned, length)
    diameters, failure = [], None
    for s in starts:
        union = union_graph(sched, s, s + B)
        if is_strongly_connected(union):
            diameters.append(float(diameter(union)))
        else:
            diameters.append(math.inf)
            failure = s if failure is None else failure
    return BConnectivity(B, aligned, tuple(starts), failure, tuple(diameters))


def is_b_connected(schedule: ScheduleLike, B: int, horizon: int | None = None,
                   aligned: bool = True) -> bool:
    """Whether every window of B rounds within rounds 0..horizon-1 has a strongly connected union.

    Parameters
    ----------
    schedule : a schedule, graph, matrix or trace (`rounds_of`).
    B : window length, an integer >= 1.
    horizon : rounds checked (defaults as in `b_connectivity`).
    aligned : windows at multiples of B (True) or sliding (False).

    Returns
    -------
    bool.
    """
    return b_connectivity(schedule, B, horizon, aligned).connected


def min_b(schedule: ScheduleLike, horizon: int | None = None, aligned: bool = True,
          max_b: int | None = None) -> int | None:
    """Smallest B for which `is_b_connected` holds.

    A finite horizon can under-estimate B of the infinite sequence.

    Parameters
    ----------
    schedule : a schedule, graph, matrix or trace (`rounds_of`).
    horizon : rounds checked (defaults as in `b_connectivity`).
    aligned : windows at multiples of B (True) or sliding (False).
    max_b : largest B tried; default 3 * period for a periodic schedule, else horizon.

    Returns
    -------
    int, or None if none up to max_b.

    Raises
    ------
    ValueError
        for a schedule without a period when no horizon is given.
    """
    sched, length = rounds_of(schedule)
    limit = max_b or (3 * sched.period if sched.period else (horizon or length))
    if limit is None:
        raise ValueError("the schedule has no period: give the horizon (rounds to check)")
    if horizon is not None or length is not None:
        limit = min(limit, horizon or length)
    for b in range(1, limit + 1):
        if is_b_connected(sched, b, horizon or length, aligned):
            return b
    return None
