"""Rounds that use the union of B consecutive graphs of a schedule (`union_window`, the
`topology.window` option).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np

from topologies._common import check_int
from topologies.from_objects import as_schedule
from topologies.schedules import Schedule


@dataclass(frozen=True)
class UnionWindow:
    """Round t: the union of the inner schedule's graphs of rounds tB .. tB + B - 1."""

    schedule: Schedule
    B: int
    n: int
    directed: bool
    period: int | None
    needs_losses: bool

    def at(self, t: int, losses: np.ndarray | None = None) -> nx.Graph | nx.DiGraph:
        t = check_int(t, "t", 0)
        union = nx.DiGraph() if self.directed else nx.Graph()
        union.add_nodes_from(range(self.n))
        for s in range(t * self.B, (t + 1) * self.B):
            G = self.schedule.at(s, losses) if self.needs_losses else self.schedule.at(s)
            union.add_edges_from(G.edges)
            if self.directed and not G.is_directed():
                union.add_edges_from((j, i) for i, j in G.edges)
        return union


def union_window(schedule: Schedule | nx.Graph, B: int) -> UnionWindow:
    """Round t of the result is the union of rounds tB .. tB + B - 1 of `schedule`.

    Aligned windows as in B-strong connectivity (docs/topologies.md): `schedule` is
    B-strongly connected iff every graph of ``union_window(schedule, B)`` is strongly connected.
    Edge attributes are dropped.

    Parameters
    ----------
    schedule : a Schedule or a networkx graph.
    B : window length, at least 1.

    Returns
    -------
    UnionWindow; period lcm(period, B) / B when the schedule is periodic.

    Examples
    --------
    >>> from topologies.schedules import one_peer_exponential
    >>> sorted(union_window(one_peer_exponential(8), 3).at(0).successors(0))
    [1, 2, 4]
    """
    inner = as_schedule(schedule)
    B = check_int(B, "B", 1)
    period = None if inner.period is None else math.lcm(inner.period, B) // B
    return UnionWindow(inner, B, inner.n, inner.directed, period, inner.needs_losses)
