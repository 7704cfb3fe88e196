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

Everything is arrays: a flow's resources are a row of resource indices, and one recomputation
of the rates is a progressive filling that stops in one pass every resource whose level is the
lowest around it. An event re-solves only the flows at or above the lowest level it can move
(the levels below fill as before) and a flow keeps its bits since its last change of rate, so an
event costs what it changes. `tests/test_flows.py` checks the completion times against SimGrid's
(bench/simgrid_flows.py) and against re-solving every flow at every event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

RELATIVE_TOL = 1e-9  # a flow with less than this fraction of its bits left has finished


class Sharing:
    """Resources shared by flows, prepared once for many `rates` calls: each flow's route as a
    row of resource indices, padded with a resource of unlimited capacity.

    Parameters
    ----------
    incidence : [F, R] sparse, nonzero where flow f crosses resource r.
    capacity : float64 [R], bit/s (inf: no limit).
    """

    def __init__(self, incidence: sp.csr_array, capacity: np.ndarray) -> None:
        capacity = np.asarray(capacity, dtype=np.float64)
        A = sp.csr_array(incidence, copy=True)
        A.eliminate_zeros()
        finite = np.isfinite(capacity)
        flows, resources = A.shape
        lengths = np.diff(A.indptr)
        width = max(int(lengths.max(initial=0)), 1)
        self.routes = np.full((flows, width), resources)  # the pad: resource R, unlimited
        within = np.arange(width) < lengths[:, None]
        self.routes[within] = A.indices
        self.routes[~np.append(finite, False)[self.routes]] = resources  # inf: no limit
        self.crosses = (self.routes < resources).any(axis=1)
        self.capacity = np.append(np.where(finite, capacity, 0.0), 0.0)

    def rates(self, active: np.ndarray | None = None) -> np.ndarray:
        """Max-min fair rates of the active flows (progressive filling).

        Every active flow's rate rises together (the water level) until a resource is full; the
        flows crossing a full resource keep the level they reached, the others rise on. A flow
        that crosses no resource of finite capacity gets an infinite rate. Every resource that is
        full at a level no higher than that of any resource it shares a rising flow with stops
        its flows in the same pass: levels only rise as other flows stop (a flow stops at most
        at its resource's level), so nothing stops its flows before.

        Parameters
        ----------
        active : bool [F] (default: all); inactive flows get rate 0 and take nothing.

        Returns
        -------
        float64 [F], bit/s.
        """
        flows = len(self.routes)
        active = np.ones(flows, dtype=bool) if active is None else np.asarray(active, dtype=bool)
        rate = np.zeros(flows)
        chosen = np.flatnonzero(active)
        rate[chosen] = self.rates_of(chosen)
        return rate

    def rates_of(self, flows: np.ndarray, capacity: np.ndarray | None = None) -> np.ndarray:
        """`rates` of the given flows alone (the others take nothing).

        Parameters
        ----------
        flows : int [m], distinct flow indices.
        capacity : float64 [R + 1], what each resource has for them (default: all of it; the
            last entry, the pad, 0).

        Returns
        -------
        float64 [m], bit/s.
        """
        width = self.routes.shape[1]
        pad = len(self.capacity) - 1
        rate = np.where(self.crosses[flows], 0.0, np.inf)
        rising = np.flatnonzero(self.crosses[flows])  # positions in `flows`
        left = (self.capacity if capacity is None else capacity).copy()
        while len(rising):
            routes = self.routes[flows[rising]]  # [m, width]
            sharing = np.bincount(routes.ravel(), minlength=pad + 1).astype(np.float64)
            sharing[pad] = 0
            level = np.full(pad + 1, np.inf)
            np.divide(left, sharing, out=level, where=sharing > 0)
            on_route = level[routes].min(axis=1)  # [m]: the lowest level a flow crosses
            around = np.full(pad + 1, np.inf)  # the lowest level around each resource
            np.minimum.at(around, routes.ravel(), np.repeat(on_route, width))
            full = (sharing > 0) & (level <= around * (1 + 1e-12))
            stopped = full[routes].any(axis=1)
            rate[rising[stopped]] = on_route[stopped]
            left -= np.bincount(routes[stopped].ravel(),
                                weights=np.repeat(on_route[stopped], width),
                                minlength=pad + 1)
            np.maximum(left, 0.0, out=left)
            rising = rising[~stopped]
        return rate


def max_min_rates(incidence: sp.csr_array, capacity: np.ndarray,
                  active: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates of the active flows (`Sharing.rates`, for one call).

    Parameters
    ----------
    incidence : [F, R] sparse, nonzero where flow f crosses resource r.
    capacity : float64 [R], bit/s (inf: no limit).
    active : bool [F] (default: all).

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
    return Sharing(incidence, capacity).rates(active)


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


def finish_times(transfers: Transfers) -> np.ndarray:
    """When each transfer has arrived, in the fluid max-min model (module docstring).

    Events are the times a transfer becomes active (start + latency) or ends; between two
    events the rates are constant. Transfers that become active or end at the same time (to
    RELATIVE_TOL of their size) are taken together. Each flow keeps its bits left as of the
    last change of its rate, so an event touches only the flows whose rate it changes, and an
    event re-solves only the flows at or above the lowest level it can move (`_lowest_moved`):
    progressive filling freezes the levels below it exactly as before.

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
    sharing = Sharing(transfers.incidence, transfers.capacity)
    flows = len(sharing.routes)
    ready = np.asarray(transfers.start, dtype=np.float64) + transfers.latency
    bits = np.asarray(transfers.bits, dtype=np.float64)
    left = bits.copy()  # bits left as of `stamp`
    stamp = ready.copy()
    rate = np.zeros(flows)
    end = np.full(flows, np.inf)  # when each active flow ends at its present rate
    finish = np.full(flows, np.nan)
    active = np.zeros(flows, dtype=bool)
    usage = np.zeros(len(sharing.capacity))  # what the active flows take of each resource
    order = np.argsort(ready, kind="stable")
    ready_sorted = ready[order]
    cursor = 0
    while cursor < flows or active.any():
        next_end = end[active].min() if active.any() else np.inf
        now = min(next_end, ready_sorted[cursor] if cursor < flows else np.inf)
        slack = RELATIVE_TOL * bits / np.where(rate > 0, rate, np.inf)
        ended = np.flatnonzero(active & (end - now <= slack))
        joined = order[cursor:int(np.searchsorted(ready_sorted, now, side="right"))]
        cursor += len(joined)
        finish[ended], active[ended], end[ended] = now, False, np.inf
        _take(sharing, usage, ended, -rate[ended])
        empty = joined[bits[joined] <= 0]
        finish[empty] = now
        joined = joined[bits[joined] > 0]
        active[joined] = True
        lowest = _lowest_moved(sharing, active, rate[ended], joined)
        rate[ended] = 0.0
        moving = active & (rate >= lowest * (1 - 1e-12))
        moving[joined] = True  # rate 0 until solved
        moved = np.flatnonzero(moving)
        if not len(moved):
            continue
        _take(sharing, usage, moved, -rate[moved])  # re-solve them on what the others leave
        new = sharing.rates_of(moved, np.maximum(sharing.capacity - usage, 0.0))
        left[moved] -= rate[moved] * (now - stamp[moved])
        np.maximum(left, 0.0, out=left)
        stamp[moved], rate[moved] = now, new
        _take(sharing, usage, moved, new)
        unlimited = moved[np.isinf(new)]
        finish[unlimited], active[unlimited], rate[unlimited] = now, False, 0.0
        going = moved[np.isfinite(new)]
        end[going] = now + left[going] / np.where(new[np.isfinite(new)] > 0,
                                                  new[np.isfinite(new)], np.nan)
        end[unlimited] = np.inf
    return finish


def _take(sharing: Sharing, usage: np.ndarray, flows: np.ndarray, rates: np.ndarray) -> None:
    """usage[r] += rates of the given flows on each resource r they cross (finite rates only)."""
    finite = np.isfinite(rates) & (rates != 0)
    if finite.any():
        width = sharing.routes.shape[1]
        usage += np.bincount(sharing.routes[flows[finite]].ravel(),
                             weights=np.repeat(rates[finite], width), minlength=len(usage))
        usage[-1] = 0.0


def _lowest_moved(sharing: Sharing, active: np.ndarray, ended_rates: np.ndarray,
                  joined: np.ndarray) -> float:
    """The lowest level an event can change: the flows below it keep their rates.

    Removing a flow of rate r changes only resources that filled at r or above (a flow stops at
    the lowest level of its resources), so every level below r fills as before. A joining flow
    gets at least the fair share min_r capacity_r / (active flows on r) of its resources, and
    the resources it crosses fill at that level or above, so every level below fills as before.

    Parameters
    ----------
    sharing : the resources.
    active : bool [F], the flows active after the event (the joined ones included).
    ended_rates : float64 [m], the rates the ending flows had.
    joined : int [k], the flows that joined.

    Returns
    -------
    float, bit/s (inf when nothing moves).
    """
    lowest = ended_rates[np.isfinite(ended_rates)].min(initial=np.inf)
    if len(joined):
        on = np.bincount(sharing.routes[active].ravel(), minlength=len(sharing.capacity))
        share = np.divide(sharing.capacity, on, out=np.full(len(on), np.inf), where=on > 0)
        share[-1] = np.inf  # the pad limits nothing
        lowest = min(lowest, share[sharing.routes[joined]].min())
    return float(lowest)
