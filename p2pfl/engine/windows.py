"""Exact windows of an event-driven run: which events can be processed together.

Conservative synchronization (Chandy and Misra 1979; Bryant 1977): an event can influence
another node only through a message, and a message sent at time t reaches its receiver, or on
the flow-level network starts taking bandwidth from other messages, no earlier than t plus the
smallest possible latency. A local phase that begins at t ends no earlier than t plus the
shortest possible phase. With L the smaller of the two (`lookahead_s`), nothing done in the
window [T, T + L) of the earliest pending event T can create or move an event inside it: the
window's events are known when it opens, and events at different nodes inside it cannot
depend on each other.

The window's events are put in their canonical order (time; phase ends before arrivals; a
phase end by node, an arrival by sender, receiver and order of sending) and split into levels
(`levels`): an event's level is one past the last level holding an earlier event at one of its
nodes, so the events of a level touch different nodes and each node sees its events in time
order. Events of one instant and kind that share a node (two messages to one receiver at one
instant, a server's arrivals) stay in one level, as one instant of the one-at-a-time engine
hands them to the algorithm in one call. A level is one batched update: the algorithm's
`phase_end` with every node of the level whose phase ends, then `arrive` with its messages.

The bounds are exact lower bounds, not estimates: the network's lognormal jitter draws its
normal quantile from a uniform clipped to [1e-12, 1 - 1e-12], so no factor is below
exp(jitter * ndtri(1e-12)) (p2pfl/scale/network.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch
from scipy.special import ndtri

from p2pfl.core.population import Params
from p2pfl.scale.network import Clock

JITTER_U_FLOOR = 1e-12  # the uniform the network's jitter clips to (Clock._jitter)
SAFETY = 1e-9  # relative margin for the round-off of the products the bounds compare with


def jitter_floor(jitter: float) -> float:
    """The smallest lognormal factor the network can draw.

    Parameters
    ----------
    jitter : sigma of the network's lognormal jitter.

    Returns
    -------
    float, exp(jitter * ndtri(1e-12)) (1 without jitter).
    """
    return math.exp(jitter * float(ndtri(JITTER_U_FLOOR))) if jitter else 1.0


def message_floor_s(clock: Clock, flow: bool, graph: nx.Graph | None = None) -> float:
    """The shortest time from a message's send to its first effect: its arrival on the ideal
    model, the time its flow starts taking bandwidth (its latency) on the flow model.

    Parameters
    ----------
    clock : the run's network clock.
    flow : the flow-level model.
    graph : a round's graph whose edges carry latency_s or bandwidth_gbps, or None.

    Returns
    -------
    float, seconds.
    """
    net = clock.net
    latency, gbps = [net.latency_s], [net.bandwidth_gbps]
    if graph is not None:
        latency += [float(v) for v in nx.get_edge_attributes(graph, "latency_s").values()]
        gbps += [float(v) for v in nx.get_edge_attributes(graph, "bandwidth_gbps").values()]
    lat, bw = min(latency), max(gbps)
    size = 0.0 if flow else clock.message_bytes * 8 / 1e9
    floors = [lat + size / bw]
    if net.slow_links > 0:
        factor = clock.link_factor
        if net.slow_link_latency_s or net.slow_link_gbps:
            slow_bw = net.slow_link_gbps or bw / factor
            floors.append((net.slow_link_latency_s or lat * factor) + size / slow_bw)
        else:
            floors.append((lat + size / bw) * factor)
    return min(floors) * jitter_floor(net.jitter) * clock.exchanges


def phase_floor_s(clock: Clock, offset: int) -> float:
    """The shortest local phase any node can take (its local steps times its step time, at
    the smallest jitter).

    Parameters
    ----------
    clock : the run's network clock.
    offset : graph node id of population row 0 (the star's server has no phases).

    Returns
    -------
    float, seconds.
    """
    steps = np.broadcast_to(np.asarray(clock.steps), (clock.n,))[offset:]
    seconds = steps * clock.step_s[offset:]
    return float(seconds.min(initial=np.inf)) * jitter_floor(clock.net.jitter)


def lookahead_s(clock: Clock, flow: bool, offset: int) -> float:
    """L: no event inside [T, T + L) can be created or moved by another event (module
    docstring); 0 when a phase or a message can take no time (then a window is one instant).

    Parameters
    ----------
    clock : the run's network clock.
    flow : the flow-level model.
    offset : graph node id of population row 0.

    Returns
    -------
    float, seconds, shrunk by SAFETY.
    """
    return min(message_floor_s(clock, flow), phase_floor_s(clock, offset)) * (1 - SAFETY)


def levels(time: np.ndarray, kind: np.ndarray, first: np.ndarray, second: np.ndarray
           ) -> np.ndarray:
    """The level of each event of a window, in canonical order (module docstring).

    Event e touches node first[e] and, if second[e] >= 0, node second[e]. Its level is one past
    the last level of an earlier event at one of its nodes, or that level itself where that
    event is of the same instant and kind.

    Parameters
    ----------
    time : float64 [E], the events' times, in canonical order.
    kind : int [E], 0 a phase end, 1 an arrival.
    first, second : int64 [E], graph node ids (second: -1, none).

    Returns
    -------
    int64 [E], from 0.

    Examples
    --------
    Arrivals at one instant: 0 -> 1 and 2 -> 1 share their receiver (one level), then a phase
    end of node 1 later, and one of node 3 that shares nothing:

    >>> levels(np.array([1.0, 1.0, 2.0, 2.0]), np.array([1, 1, 0, 0]),
    ...        np.array([1, 1, 1, 3]), np.array([-1, -1, -1, -1])).tolist()
    [0, 0, 1, 0]
    """
    if not (second >= 0).any():  # one node each: its events alone set their levels
        order = np.argsort(first, kind="stable")  # each node's events, in canonical order
        node, t, k = first[order], time[order], kind[order]
        new = np.ones(len(order), dtype=np.int64)  # one past the node's last event's level
        new[1:] = (node[1:] == node[:-1]) & ((t[1:] != t[:-1]) | (k[1:] != k[:-1]))
        starts = np.flatnonzero(np.diff(node, prepend=-1) != 0)  # each node's first event
        new[starts] = 0
        count = np.cumsum(new)
        out = np.empty(len(order), dtype=np.int64)
        out[order] = count - np.repeat(count[starts], np.diff(np.append(starts, len(order))))
        return out
    last: dict[int, tuple[int, float, int]] = {}  # node -> (level, time, kind) of its last event
    out = np.zeros(len(time), dtype=np.int64)
    for e, (t, k, a, b) in enumerate(zip(time.tolist(), kind.tolist(), first.tolist(),
                                         second.tolist(), strict=True)):
        level = 0
        for node in (a, b) if b >= 0 else (a,):
            seen = last.get(node)
            if seen is not None:
                level = max(level, seen[0] if seen[1:] == (t, k) else seen[0] + 1)
        out[e] = level
        last[a] = (level, t, k)
        if b >= 0:
            last[b] = (level, t, k)
    return out


@dataclass(frozen=True)
class ReleaseTable:
    """For each (node, time) of a window's events, the last level holding an event of that
    node at that time (a phase the node begins at that time begins after it), as sorted keys
    node * len(times) + the time's rank among `times`."""

    times: np.ndarray  # float64 [T], the window's distinct event times, sorted
    keys: np.ndarray  # int64 [K], sorted
    levels: np.ndarray  # int64 [K]

    def get(self, ids: np.ndarray, times: np.ndarray, default: int) -> np.ndarray:
        """int64 [m]: the level of each (ids[e], times[e]), or `default` where none."""
        rank = np.searchsorted(self.times, times)
        ok = rank < len(self.times)
        ok[ok] = self.times[rank[ok]] == times[ok]
        at = np.searchsorted(self.keys, ids * len(self.times) + rank)
        ok &= at < len(self.keys)
        ok[ok] = self.keys[at[ok]] == ids[ok] * len(self.times) + rank[ok]
        out = np.full(len(ids), default, dtype=np.int64)
        out[ok] = self.levels[at[ok]]
        return out


def release_levels(level: np.ndarray, time: np.ndarray, first: np.ndarray,
                   second: np.ndarray) -> ReleaseTable:
    """For each (node, time) of a window's events, the last level holding an event of that
    node at that time: a phase the node begins at that time begins after it.

    Parameters
    ----------
    level, time, first, second : [E], as `levels` (its result and arguments).

    Returns
    -------
    ReleaseTable.
    """
    has = second >= 0
    nodes = np.concatenate([first, second[has]])
    at, lv = np.concatenate([time, time[has]]), np.concatenate([level, level[has]])
    times = np.unique(at)
    key = nodes * len(times) + np.searchsorted(times, at)
    order = np.lexsort((lv, key))  # by key, the highest level last
    key, lv = key[order], lv[order]
    last = np.append(key[1:] != key[:-1], True) if len(key) else np.zeros(0, dtype=bool)
    return ReleaseTable(times, key[last], lv[last])


class Window:
    """The window being processed: its levels, and the phases asked for and when they may
    begin.

    Parameters
    ----------
    n : graph nodes.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.level = 0  # the level being processed
        self.last_due = np.full(n, -np.inf)  # each sender's latest arrival in the window
        self._release = release_levels(*(np.zeros(0, dtype=np.int64),) * 4)
        # phases asked for: (rows, models or None, times, the level after which each begins)
        self.pending: list[tuple[np.ndarray, Params | None, np.ndarray, np.ndarray]] = []

    def open(self, level: np.ndarray, time: np.ndarray, first: np.ndarray,
             second: np.ndarray, senders: np.ndarray, due: np.ndarray) -> None:
        """Start a window of events (`levels`) whose messages went from `senders` and arrive
        at `due`.

        Parameters
        ----------
        level, time, first, second : [E], each event's level, time and nodes.
        senders : int64 [M], the senders of the window's messages.
        due : float64 [M], their arrivals.
        """
        self._release = release_levels(level, time, first, second)
        self.last_due = np.full(self.n, -np.inf)
        np.maximum.at(self.last_due, senders, due)
        self.level = 0

    def close(self) -> None:
        """The window's events are done: its messages have all arrived."""
        self._release = release_levels(*(np.zeros(0, dtype=np.int64),) * 4)
        self.level = 0
        self.last_due = np.full(self.n, -np.inf)

    def release(self, ids: np.ndarray, times: np.ndarray) -> np.ndarray:
        """The level after which each node may begin a phase at its time: the last level with
        an event of that node at that time (or the current one).

        Parameters
        ----------
        ids : int64 [m], graph node ids.
        times : float64 [m], seconds.

        Returns
        -------
        int64 [m].
        """
        now = self.level
        return np.maximum(now, self._release.get(np.asarray(ids, dtype=np.int64),
                                                 np.asarray(times, dtype=np.float64), now))

    def ask(self, nodes: np.ndarray, models: Params | None, times: np.ndarray,
            release: np.ndarray) -> None:
        """Ask for phases of `nodes` [m] (rows) at `times` [m], from `models` (or None: their
        rows), each to begin once its `release` level [m] is done.

        Parameters
        ----------
        nodes : int64 [m].
        models : name -> [m, *shape], or None.
        times : float64 [m], seconds.
        release : int64 [m], levels (`release`).
        """
        self.pending.append((nodes, models, times, release))

    def ready(self, level: float) -> list[tuple[np.ndarray, Params | None, np.ndarray]]:
        """Take the phases asked for that may begin once `level` is done, in the order asked
        for; keep the others.

        Parameters
        ----------
        level : the level done (inf: all).

        Returns
        -------
        list of (rows [m], models or None, times [m]).
        """
        out, kept = [], []
        for nodes, models, times, release in self.pending:
            now = release <= level
            if now.all():
                out.append((nodes, models, times))
                continue
            if now.any():
                out.append((nodes[now], _rows(models, now), times[now]))
                kept.append((nodes[~now], _rows(models, ~now), times[~now], release[~now]))
            else:
                kept.append((nodes, models, times, release))
        self.pending = kept
        return out

    def hold(self) -> None:
        """Keep every phase asked for until the window's end: more of its instant is to come
        (messages sent without delay)."""
        top = np.iinfo(np.int64).max
        self.pending = [(n, m, t, np.full(len(n), top)) for n, m, t, _ in self.pending]


def _rows(models: Params | None, keep: np.ndarray) -> Params | None:
    """The rows `keep` (bool [m]) of `models` [m, *shape], or None."""
    if models is None:
        return None
    return {k: v[torch.as_tensor(keep, device=v.device)] for k, v in models.items()}
