"""How long the messages of an event-driven run take (p2pfl/engine/events.py).

On the ideal model (`network.model = "ideal"`) a message is due after its transfer time alone on
its link. On the flow model (`"flow"`) every message in flight is one or two flows (a pairwise
exchange: one each way) of a `Flows` network (p2pfl/scale/flows.py) that they all share: the
sender's uplink, the receiver's downlink, the underlay. A message is due when its flows have all
ended, which `run` finds as the network's events go on. The flows sent in an exact window join
the network when it closes, in the order (send time, sender, receiver, message sender): they
start taking bandwidth only after the window (p2pfl/engine/windows.py).

Round k's graph may give its edges their own latency_s and bandwidth_gbps; such a graph may
also shorten the lookahead, which `lookahead` takes into account for the rounds the nodes may
use next.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np

from p2pfl.context import RunContext
from p2pfl.engine.windows import SAFETY, message_floor_s
from p2pfl.scale.flows import Flows
from p2pfl.scale.mailbox import Mailbox


class Transport:
    """The graphs, the transfer times and the flow network of an event-driven run.

    Parameters
    ----------
    ctx : the run (its clock is the network's).
    phases : the phase index of every row (graphs no dispatched node needs are dropped).
    """

    def __init__(self, ctx: RunContext, phases: Callable[[], np.ndarray]) -> None:
        self.ctx, self.phases = ctx, phases
        self.network = Flows(ctx.clock.resources(ctx.schedule.at(0))) \
            if ctx.clock.net.model == "flow" else None
        self.next_group = 0  # the flow model's message groups
        self._new: list[tuple[np.ndarray, ...]] = []  # flows sent this window, not yet added
        self._graphs: dict[int, tuple[nx.Graph, float]] = {}
        self._floors: weakref.WeakKeyDictionary[nx.Graph, float] = weakref.WeakKeyDictionary()

    def graph(self, k: int) -> tuple[nx.Graph, float]:
        """Round k's graph and the lookahead its edges allow (inf: no edge values).

        Parameters
        ----------
        k : the round.

        Returns
        -------
        (graph, seconds).
        """
        if k not in self._graphs:
            G = self.ctx.schedule.at(k)
            if G not in self._floors:  # a static schedule's one graph: scanned once
                timed = any(name in data for _, _, data in G.edges(data=True)
                            for name in ("latency_s", "bandwidth_gbps"))
                self._floors[G] = message_floor_s(self.ctx.clock, self.network is not None,
                                                  G) * (1 - SAFETY) if timed else np.inf
            self._graphs[k] = (G, self._floors[G])
            phase = self.phases()
            alive = phase[phase >= 0].min(initial=0)  # no dispatched node needs an older one
            self._graphs = {r: g for r, g in self._graphs.items() if r >= alive or r == k}
        return self._graphs[k]

    def lookahead(self, base: float) -> float:
        """`base`, or less where a graph the nodes may use next gives shorter latencies.

        Parameters
        ----------
        base : the run's lookahead (s).

        Returns
        -------
        float, seconds.
        """
        if base == 0:
            return 0.0
        phase = self.phases()
        started = phase[phase >= 0]  # a node not started yet may use round 0's graph next
        low = 0 if len(started) < len(phase) else int(started.min(initial=0))
        high = int(phase.max(initial=0)) + 1
        return min([base] + [self.graph(k)[1] for k in range(low, high + 1)])

    def _timed(self, k: int) -> nx.Graph | None:
        """Round k's graph where its edges carry latency_s or bandwidth_gbps, else None."""
        G, floor = self.graph(k)
        return G if floor < np.inf else None

    def _transfer(self, k: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Seconds each message src -> dst of round k [M] takes alone on its link."""
        out = np.empty(len(src))
        for r in np.unique(k).tolist():
            at = k == r
            out[at] = self.ctx.clock.transfer(r, src[at], dst[at], self._timed(r))
        return out

    def _routes(self, k: np.ndarray, src: np.ndarray, dst: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`Clock.routes` of messages src -> dst of rounds k [M], in their order."""
        clock = self.ctx.clock
        rounds = np.unique(k).tolist()
        if len(rounds) == 1 or all(self._timed(r) is None for r in rounds):
            return clock.routes(k, src, dst, self._timed(rounds[0]) if rounds else None)
        parts = [(k == r, clock.routes(r, src[k == r], dst[k == r], self._timed(r)))
                 for r in rounds]
        width = max(part[2].shape[1] for _, part in parts)
        latency, bits, cap = np.empty(len(k)), np.empty(len(k)), np.empty(len(k))
        routes = np.full((len(k), width), len(clock.resources()), dtype=np.int64)
        for at, (lat, size, route, own) in parts:
            latency[at], bits[at], cap[at] = lat, size, own
            routes[at, :route.shape[1]] = route
        return latency, bits, routes, cap

    def time(self, src: np.ndarray, dst: np.ndarray, k: np.ndarray, sent: np.ndarray,
             both_ways: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """When messages src -> dst [M] of rounds k, sent at `sent`, are due (inf: when their
        flows end, `run`), and their groups (the flow model; else None).

        Parameters
        ----------
        src, dst, k : int64 [M].
        sent : float64 [M], seconds.
        both_ways : a transfer each way, due when both have arrived.

        Returns
        -------
        (float64 [M], int64 [M] or None).
        """
        m = len(src)
        if self.network is None:  # ideal: each message alone on its link
            delay = self._transfer(k, src, dst)
            if both_ways:
                delay = np.maximum(delay, self._transfer(k, dst, src))
            return sent + delay, None
        group = self.next_group + np.arange(m, dtype=np.int64)
        self.next_group += m
        legs = np.stack([src, dst] + ([dst, src] if both_ways else []), axis=1)
        a, b = legs[:, 0::2].ravel(), legs[:, 1::2].ravel()  # a message's legs in a row
        ways = 2 if both_ways else 1
        self._new.append((np.repeat(sent, ways), np.repeat(k, ways), a, b,
                          np.repeat(group, ways), np.repeat(src, ways)))
        return np.full(m, np.inf), group

    def flush(self) -> None:
        """The flows sent since the last flush join the network, in the order (send time,
        sender, receiver, the message's sender): flows of one queue sent at one instant (two
        exchanges between the same nodes) go in the order of the nodes that sent them."""
        if not self._new:
            return
        sent, k, a, b, group, owner = (np.concatenate(x) for x in zip(*self._new, strict=True))
        order = np.lexsort((np.arange(len(a)), owner, b, a, sent))
        sent, k, a, b, group = sent[order], k[order], a[order], b[order], group[order]
        self.network.add(sent, *self._routes(k, a, b), group=group,
                         queue=a * self.ctx.clock.n + b)
        self._new = []

    def run(self, mailbox: Mailbox, until: float, whole: bool = False) -> None:
        """The flow network's events up to `until`, or (not `whole`) up to the next message due
        if earlier: a message whose flows have all ended becomes due when the last one ends.

        Parameters
        ----------
        mailbox : the messages in flight.
        until : seconds.
        whole : run to `until` even past the next message due.
        """
        while self.network is not None:
            stop = until if whole else min(until, mailbox.next_due())
            event = self.network.advance(stop)
            if event is None:
                return
            time, _, groups = event
            mailbox.deliver(groups[~np.isin(groups, self.network.in_flight())], time)

    def state_dict(self) -> dict[str, Any]:
        """The flows in flight (the flow model; else nothing)."""
        if self.network is None:
            return {}
        return {"network": self.network.state_dict(), "next_group": self.next_group}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.network is not None:
            self.network.load_state_dict(state["network"])
            self.next_group = int(state["next_group"])
