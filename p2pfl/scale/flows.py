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

Everything is arrays: a flow's resources are a row of a sparse incidence matrix [flows,
resources], and one recomputation of the rates is a progressive filling of O(levels * nnz).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

RELATIVE_TOL = 1e-9  # a flow with less than this fraction of its bits left has finished


def max_min_rates(incidence: sp.csr_array, capacity: np.ndarray,
                  active: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates of the active flows (progressive filling).

    Every active flow's rate rises together (the water level) until a resource is full; the
    flows crossing a full resource keep the level they reached, the others rise on. A flow that
    crosses no resource of finite capacity gets an infinite rate.

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
    flows = incidence.shape[0]
    active = np.ones(flows, dtype=bool) if active is None else np.asarray(active, dtype=bool)
    A = sp.csr_array(incidence != 0, dtype=np.float64)
    finite = np.isfinite(capacity)
    A = A @ sp.diags_array(finite.astype(np.float64))  # unlimited resources constrain nothing
    AT = sp.csr_array(A.T)
    rate = np.zeros(flows)
    crosses = A @ np.ones(len(capacity)) > 0
    rate[active & ~crosses] = np.inf
    rising = active & crosses
    left = np.where(finite, capacity, 0.0).astype(np.float64)
    while rising.any():
        sharing = AT @ rising.astype(np.float64)  # rising flows on each resource
        level = np.full(len(capacity), np.inf)
        np.divide(left, sharing, out=level, where=sharing > 0)
        lowest = level.min()
        full = level <= lowest * (1 + 1e-12) + 1e-300
        stopped = rising & (A @ full.astype(np.float64) > 0)
        rate[stopped] = lowest
        left = np.maximum(left - AT @ np.where(stopped, lowest, 0.0), 0.0)
        rising &= ~stopped
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


def finish_times(transfers: Transfers) -> np.ndarray:
    """When each transfer has arrived, in the fluid max-min model (module docstring).

    Events are the times a transfer becomes active (start + latency) or ends; between two
    events the rates are constant. Transfers that become active or end at the same time (to
    RELATIVE_TOL of their size) are taken together.

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
    ready = np.asarray(transfers.start, dtype=np.float64) + transfers.latency
    left = np.asarray(transfers.bits, dtype=np.float64).copy()
    finish = np.full(len(ready), np.nan)
    active = np.zeros(len(ready), dtype=bool)
    order = np.argsort(ready, kind="stable")
    cursor = 0
    now = ready[order[0]] if len(ready) else 0.0
    while cursor < len(order) or active.any():
        while cursor < len(order) and ready[order[cursor]] <= now:
            f = order[cursor]
            active[f] = True
            cursor += 1
        ended = active & (left <= RELATIVE_TOL * transfers.bits)
        finish[ended], active[ended] = now, False
        if not active.any():
            if cursor < len(order):
                now = ready[order[cursor]]
            continue
        rate = max_min_rates(transfers.incidence, transfers.capacity, active)
        unlimited = active & np.isinf(rate)
        finish[unlimited], active[unlimited], left[unlimited] = now, False, 0.0
        if not active.any():
            continue
        until_end = (left[active] / rate[active]).min()
        until_start = ready[order[cursor]] - now if cursor < len(order) else np.inf
        step = min(until_end, until_start)
        left[active] = np.maximum(left[active] - rate[active] * step, 0.0)
        now = now + step
        if step == until_end:  # the flows within tolerance of their end end together
            left[active & (left <= RELATIVE_TOL * transfers.bits + rate * step * 1e-12)] = 0.0
    return finish
