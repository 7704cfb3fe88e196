"""Flow-level network: transfers that share the links they cross by max-min fairness.

A transfer (a flow) of `bits` bits crosses a set of resources (a sender's uplink, a receiver's
downlink, the links of an underlay path, a link of its own), each of a capacity in bit/s. It
starts at `start`, waits `latency` seconds (the first byte's travel), and is then active: the
active flows share every resource by max-min fairness (no flow can get more without taking from
one that has no more), and the rates are recomputed whenever a flow becomes active or ends. This
is the fluid model that SimGrid's flow-level network implements (Velho, Schnorr, Casanova,
Legrand, "On the validity of flow-level TCP network models for grid and cloud simulations", ACM
TOMACS 2013), here without its TCP corrections (no latency or bandwidth factors, no window
bound): no slow start, no packet loss, no congestion-control dynamics.

Everything is arrays: a flow's resources are a row of resource indices (plus, optionally, a
capacity of its own: a private link), and one recomputation of the rates is a progressive
filling that stops in one pass every resource whose level is the lowest around it. An event
re-solves only the flows at or above the lowest level it can move (the levels below fill as
before) and a flow keeps its bits since its last change of rate, so an event costs what it
changes. `Flows` holds the flows in progress and advances them event by event, so that an
event-driven run can add flows as it goes (and checkpoint them); `finish_times` runs a fixed set
to the end. `tests/test_flows.py` checks the completion times against SimGrid's
(bench/simgrid_flows.py) and against re-solving every flow at every event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

RELATIVE_TOL = 1e-9  # a flow with less than this fraction of its bits left has finished


def padded_routes(incidence: sp.csr_array, capacity: np.ndarray) -> np.ndarray:
    """Each flow's resources as a row of indices, padded with R (a resource without limit);
    resources of infinite capacity are left out.

    Parameters
    ----------
    incidence : [F, R] sparse, nonzero where flow f crosses resource r.
    capacity : float64 [R], bit/s (inf: no limit).

    Returns
    -------
    int64 [F, width].
    """
    A = sp.csr_array(incidence, copy=True)
    A.eliminate_zeros()
    flows, resources = A.shape
    lengths = np.diff(A.indptr)
    width = max(int(lengths.max(initial=0)), 1)
    routes = np.full((flows, width), resources, dtype=np.int64)
    routes[np.arange(width) < lengths[:, None]] = A.indices
    routes[~np.append(np.isfinite(capacity), False)[routes]] = resources
    return routes


def fill(routes: np.ndarray, cap: np.ndarray, left: np.ndarray) -> np.ndarray:
    """Max-min fair rates of flows by progressive filling.

    Every flow's rate rises together (the water level) until a resource is full; the flows
    crossing a full resource keep the level they reached, the others rise on. A flow's own
    capacity is a resource that only it crosses. Every resource that is full at a level no
    higher than that of any resource it shares a rising flow with stops its flows in the same
    pass: levels only rise as other flows stop (a flow stops at most at its resource's level),
    so nothing stops its flows before. A flow that crosses nothing of finite capacity gets an
    infinite rate.

    Parameters
    ----------
    routes : int64 [m, width], each flow's resources (the last index of `left`: the pad).
    cap : float64 [m], each flow's own capacity, bit/s (inf: none).
    left : float64 [R + 1], what each resource has for these flows (the pad's entry ignored).

    Returns
    -------
    float64 [m], bit/s.
    """
    width = routes.shape[1]
    pad = len(left) - 1
    crosses = (routes < pad).any(axis=1) | np.isfinite(cap)
    rate = np.where(crosses, 0.0, np.inf)
    rising = np.flatnonzero(crosses)
    left = left.copy()
    while len(rising):
        route = routes[rising]  # [m, width]
        sharing = np.bincount(route.ravel(), minlength=pad + 1).astype(np.float64)
        sharing[pad] = 0
        level = np.full(pad + 1, np.inf)
        np.divide(left, sharing, out=level, where=sharing > 0)
        on_route = np.minimum(level[route].min(axis=1), cap[rising])  # the lowest it crosses
        around = np.full(pad + 1, np.inf)  # the lowest level around each resource
        np.minimum.at(around, route.ravel(), np.repeat(on_route, width))
        full = (sharing > 0) & (level <= around * (1 + 1e-12))
        stopped = full[route].any(axis=1) | (cap[rising] <= on_route * (1 + 1e-12))
        rate[rising[stopped]] = on_route[stopped]
        left -= np.bincount(route[stopped].ravel(), weights=np.repeat(on_route[stopped], width),
                            minlength=pad + 1)
        np.maximum(left, 0.0, out=left)
        rising = rising[~stopped]
    return rate


def max_min_rates(incidence: sp.csr_array, capacity: np.ndarray,
                  active: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates of the active flows (`fill`).

    Parameters
    ----------
    incidence : [F, R] sparse, nonzero where flow f crosses resource r.
    capacity : float64 [R], bit/s (inf: no limit).
    active : bool [F] (default: all); inactive flows get rate 0 and take nothing.

    Returns
    -------
    float64 [F], bit/s.

    Examples
    --------
    Two flows share resource 0 (10 bit/s); the second also crosses resource 1 (2 bit/s):

    >>> A = sp.csr_array(np.array([[1, 0], [1, 1]]))
    >>> max_min_rates(A, np.array([10.0, 2.0])).tolist()
    [8.0, 2.0]
    """
    capacity = np.asarray(capacity, dtype=np.float64)
    routes = padded_routes(incidence, capacity)
    flows = len(routes)
    active = np.ones(flows, dtype=bool) if active is None else np.asarray(active, dtype=bool)
    rate = np.zeros(flows)
    rate[active] = fill(routes[active], np.full(int(active.sum()), np.inf),
                        np.append(np.where(np.isfinite(capacity), capacity, 0.0), 0.0))
    return rate


@dataclass(frozen=True)
class Transfers:
    """Flows to simulate: F transfers over R resources.

    Attributes
    ----------
    start : float64 [F], when each transfer is sent (s).
    latency : float64 [F], seconds before it starts taking bandwidth (its first byte's travel).
    bits : float64 [F], its size.
    incidence : [F, R] sparse, the resources each crosses.
    capacity : float64 [R], bit/s.
    """

    start: np.ndarray
    latency: np.ndarray
    bits: np.ndarray
    incidence: sp.csr_array
    capacity: np.ndarray


_STATE = {"id": np.int64, "group": np.int64, "ready": np.float64, "bits": np.float64,
          "left": np.float64, "stamp": np.float64, "rate": np.float64, "end": np.float64,
          "active": bool, "cap": np.float64, "queue": np.int64, "held": bool, "live": bool}


class Flows:
    """Flows in progress on shared resources, advanced event by event (module docstring).

    A flow is added with its send time, latency, size, resources and own capacity, a group (an
    id its caller chooses: a message made of several flows) and a queue: flows of one queue (the
    messages of one connection, one sender to one receiver) go one after the other, a flow
    becoming active when the one before it in its queue has ended (or at its own send time plus
    latency, if later). `advance` runs the events up to a time and stops at the first at which
    flows finish. A finished flow stays in the arrays, inert, until they are compacted
    (when finished ones are the majority), so an event costs what is in progress. The whole
    state is arrays (`state_dict`).

    Parameters
    ----------
    capacity : float64 [R], the shared resources' capacities, bit/s (inf: no limit).
    """

    def __init__(self, capacity: np.ndarray) -> None:
        capacity = np.asarray(capacity, dtype=np.float64)
        self.finite = np.append(np.isfinite(capacity), False)
        self.capacity = np.append(np.where(np.isfinite(capacity), capacity, 0.0), 0.0)
        self.pad = len(capacity)
        self.usage = np.zeros(self.pad + 1)  # what the active flows take of each resource
        self.on = np.zeros(self.pad + 1, dtype=np.int64)  # active flows crossing each resource
        self.routes = np.zeros((0, 1), dtype=np.int64)
        for name, kind in _STATE.items():
            setattr(self, name, np.zeros(0, dtype=kind))
        self.next_id = 0

    def __len__(self) -> int:
        """Flows in progress (added, not finished)."""
        return int(self.live.sum())

    def in_flight(self) -> np.ndarray:
        """int64 [len(self)], the groups of the flows in progress, in order of adding."""
        return self.group[self.live]

    def add(self, sent: np.ndarray, latency: np.ndarray, bits: np.ndarray, routes: np.ndarray,
            cap: np.ndarray | None = None, group: np.ndarray | None = None,
            queue: np.ndarray | None = None) -> np.ndarray:
        """Put flows in progress: each becomes active at sent + latency.

        Parameters
        ----------
        sent, latency, bits : float64 [m], seconds, seconds, bits.
        routes : int64 [m, w], resource indices, padded with R.
        cap : float64 [m], each flow's own capacity, bit/s (default: none).
        group : int64 [m] (default: the flows' ids).
        queue : int64 [m], each flow's queue (default: -1, none: it starts at send + latency).

        Returns
        -------
        int64 [m], the flows' ids (in order of adding, from 0).
        """
        m = len(sent)
        ids = self.next_id + np.arange(m, dtype=np.int64)
        self.next_id += m
        routes = np.asarray(routes, dtype=np.int64).reshape(m, np.shape(routes)[-1])
        routes = np.where(self.finite[routes], routes, self.pad)
        width = max(self.routes.shape[1], routes.shape[1])
        self.routes = np.concatenate([_widen(self.routes, width, self.pad),
                                      _widen(routes, width, self.pad)])
        ready = np.asarray(sent, dtype=np.float64) + latency
        queue = np.full(m, -1, dtype=np.int64) if queue is None else np.asarray(queue, np.int64)
        first = np.zeros(m, dtype=bool)  # the first of its queue in this batch
        first[np.unique(queue, return_index=True)[1]] = True
        held = (queue >= 0) & (~first | np.isin(queue, self.queue[self.queue >= 0]))
        new = {"id": ids, "group": ids if group is None else group, "ready": ready,
               "bits": bits, "left": bits, "stamp": ready, "rate": np.zeros(m),
               "end": np.full(m, np.inf), "active": np.zeros(m, dtype=bool),
               "cap": np.full(m, np.inf) if cap is None else cap, "queue": queue,
               "held": held, "live": np.ones(m, dtype=bool)}
        for name, kind in _STATE.items():
            setattr(self, name, np.concatenate([getattr(self, name),
                                                np.asarray(new[name], dtype=kind)]))
        return ids

    def next_event(self) -> float:
        """When the next flow becomes active or ends (inf when none is in progress)."""
        return min(self.end[self.active].min(initial=np.inf),
                   self.ready[~self.active & ~self.held].min(initial=np.inf))

    def advance(self, until: float = np.inf) -> tuple[float, np.ndarray, np.ndarray] | None:
        """Run the events up to `until`, stopping after the first at which flows finish.

        Parameters
        ----------
        until : seconds.

        Returns
        -------
        (time, ids [k], groups [k]) of the flows that finished then, or None when none
        finishes by `until`.
        """
        while True:
            now = self.next_event()
            if now > until or now == np.inf:
                return None
            done = self._event(now)
            if len(done):
                ids, groups = self.id[done], self.group[done]
                self._remove(done, now)
                return now, ids, groups

    def finish(self, groups: np.ndarray, now: float) -> None:
        """End the flows of `groups` now, whatever they have left (a message taken as arrived):
        the others share what they leave from now on.

        Parameters
        ----------
        groups : int64 [k], groups of flows in progress.
        now : seconds, no earlier than the last event (`advance` up to it first).
        """
        chosen = np.flatnonzero(self.live & np.isin(self.group, groups))
        self.end[chosen[self.active[chosen]]] = now
        self.ready[chosen[~self.active[chosen]]] = np.inf  # not yet active: never joins
        done = self._event(now)
        self._remove(np.union1d(done, chosen), now)

    def copy(self) -> Flows:
        """An independent copy (its arrays copied)."""
        other = Flows(np.zeros(0))
        other.__dict__ = {k: v.copy() if isinstance(v, np.ndarray) else v
                          for k, v in self.__dict__.items()}
        return other

    def _remove(self, done: np.ndarray, now: float) -> None:
        """Make the finished flows inert (compacting the arrays when they are the majority);
        the next flow of each of their queues may start now."""
        queues = self.queue[done]
        self._count(done[self.active[done]], -1)
        self.live[done], self.active[done], self.held[done] = False, False, False
        self.ready[done], self.end[done], self.queue[done] = np.inf, np.inf, -1
        if (~self.live).sum() > max(64, len(self.live) // 2):
            keep = self.live
            for name in _STATE:
                setattr(self, name, getattr(self, name)[keep])
            self.routes = self.routes[keep]
        if not self.held.any():
            return
        waiting = np.flatnonzero(self.held & np.isin(self.queue, queues[queues >= 0]))
        if len(waiting):  # the first waiting flow of each queue (flows are in order of adding)
            nxt = waiting[np.unique(self.queue[waiting], return_index=True)[1]]
            self.held[nxt] = False
            self.ready[nxt] = np.maximum(self.ready[nxt], now)
            self.stamp[nxt] = self.ready[nxt]
    def _event(self, now: float) -> np.ndarray:
        """The flows that become active or end at `now`, and the rates they change; the
        indices of the flows that finished (0 bits, unlimited, or done)."""
        active, rate, bits = self.active, self.rate, self.bits
        slack = RELATIVE_TOL * bits / np.where(rate > 0, rate, np.inf)
        ended = np.flatnonzero(active & (self.end - now <= slack))
        joined = np.flatnonzero(~active & ~self.held & (self.ready <= now))
        active[ended], self.end[ended] = False, np.inf
        self._count(ended, -1)
        self._take(ended, -rate[ended])
        empty = joined[bits[joined] <= 0]
        joined = joined[bits[joined] > 0]
        active[joined] = True
        self._count(joined, 1)
        lowest = self._lowest_moved(rate[ended], joined)
        rate[ended] = 0.0
        moving = active & (rate >= lowest * (1 - 1e-12))
        moving[joined] = True  # rate 0 until solved
        moved = np.flatnonzero(moving)
        finished = [ended, empty]
        if len(moved):
            self._take(moved, -rate[moved])  # re-solve them on what the others leave
            new = fill(self.routes[moved], self.cap[moved],
                       np.maximum(self.capacity - self.usage, 0.0))
            self.left[moved] -= rate[moved] * (now - self.stamp[moved])
            np.maximum(self.left, 0.0, out=self.left)
            self.stamp[moved], rate[moved] = now, new
            self._take(moved, new)
            unlimited = moved[np.isinf(new)]
            active[unlimited], rate[unlimited] = False, 0.0
            self._count(unlimited, -1)
            finished.append(unlimited)
            going = moved[np.isfinite(new)]
            self.end[going] = now + self.left[going] / np.where(new[np.isfinite(new)] > 0,
                                                                new[np.isfinite(new)], np.nan)
        return np.sort(np.concatenate(finished))

    def _take(self, flows: np.ndarray, rates: np.ndarray) -> None:
        """usage[r] += the given flows' rates on each resource r they cross (finite only)."""
        finite = np.isfinite(rates) & (rates != 0)
        if finite.any():
            width = self.routes.shape[1]
            self.usage += np.bincount(self.routes[flows[finite]].ravel(),
                                      weights=np.repeat(rates[finite], width),
                                      minlength=len(self.usage))
            self.usage[-1] = 0.0

    def _count(self, flows: np.ndarray, sign: int) -> None:
        """on[r] += sign for each of `flows` crossing resource r (they became active: +1; they
        stopped being active: -1)."""
        if len(flows):
            self.on += sign * np.bincount(self.routes[flows].ravel(), minlength=len(self.on))

    def _lowest_moved(self, ended_rates: np.ndarray, joined: np.ndarray) -> float:
        """The lowest level an event can change: the flows below it keep their rates.

        Removing a flow of rate r changes only resources that filled at r or above (a flow stops
        at the lowest level of its resources), so every level below r fills as before. A joining
        flow gets at least the fair share min_r capacity_r / (active flows on r) of its
        resources (or its own capacity, if lower, taking less), and the resources it crosses
        fill at that level or above, so every level below fills as before.

        Parameters
        ----------
        ended_rates : float64 [m], the rates the ending flows had.
        joined : int [k], the flows that joined.

        Returns
        -------
        float, bit/s (inf when nothing moves).
        """
        lowest = ended_rates[np.isfinite(ended_rates)].min(initial=np.inf)
        if len(joined):
            on = self.on
            share = np.divide(self.capacity, on, out=np.full(len(on), np.inf), where=on > 0)
            share[-1] = np.inf  # the pad limits nothing
            lowest = min(lowest, share[self.routes[joined]].min())
        return float(lowest)

    def state_dict(self) -> dict[str, Any]:
        """The flows in progress, exactly (arrays as tensors)."""
        state = {name: torch.from_numpy(getattr(self, name).copy())
                 for name in (*_STATE, "routes", "usage", "capacity", "finite")}
        return state | {"next_id": self.next_id}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, kind in _STATE.items():
            setattr(self, name, state[name].cpu().numpy().astype(kind))
        self.routes = state["routes"].cpu().numpy().astype(np.int64)
        self.usage = state["usage"].cpu().numpy().astype(np.float64)
        self.capacity = state["capacity"].cpu().numpy().astype(np.float64)
        self.finite = state["finite"].cpu().numpy().astype(bool)
        self.pad = len(self.capacity) - 1
        self.next_id = int(state["next_id"])
        self.on = np.bincount(self.routes[self.active].ravel(), minlength=self.pad + 1)


def _widen(routes: np.ndarray, width: int, pad: int) -> np.ndarray:
    """routes [m, w] padded with `pad` to [m, width]."""
    extra = width - routes.shape[1]
    return np.pad(routes, ((0, 0), (0, extra)), constant_values=pad) if extra else routes


def finish_times(transfers: Transfers) -> np.ndarray:
    """When each transfer has arrived, in the fluid max-min model (module docstring).

    Events are the times a transfer becomes active (start + latency) or ends; between two
    events the rates are constant. Transfers that become active or end at the same time (to
    RELATIVE_TOL of their size) are taken together (`Flows`).

    Parameters
    ----------
    transfers : the flows.

    Returns
    -------
    float64 [F], seconds (start + latency for a transfer of 0 bits or unlimited rate).

    Examples
    --------
    Two 10-bit transfers out of one 10 bit/s uplink, the second sent 0.5 s later: the first
    has 5 bits left when the second joins, both then get 5 bit/s; the first ends at 1.5 s, the
    second has 5 bits left and ends at 2.0 s:

    >>> A = sp.csr_array(np.ones((2, 1)))
    >>> t = Transfers(np.array([0.0, 0.5]), np.zeros(2), np.array([10.0, 10.0]), A,
    ...               np.array([10.0]))
    >>> finish_times(t).tolist()
    [1.5, 2.0]
    """
    capacity = np.asarray(transfers.capacity, dtype=np.float64)
    flows = Flows(capacity)
    flows.add(transfers.start, transfers.latency, transfers.bits,
              padded_routes(transfers.incidence, capacity))
    return drain(flows, len(transfers.start))


def drain(flows: Flows, count: int) -> np.ndarray:
    """Run flows to the end.

    Parameters
    ----------
    flows : flows whose ids are below `count`.
    count : how many ids.

    Returns
    -------
    float64 [count], when each flow finished (s; NaN: not among them).
    """
    finish = np.full(count, np.nan)
    while (event := flows.advance()) is not None:
        time, ids, _ = event
        finish[ids] = time
    return finish
