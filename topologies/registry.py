"""Topologies by name, for the config system: ``build_schedule("ring", 16)``."""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx

from topologies.builders import (
    _check_int,
    _check_out_degree,
    complete,
    directed_ring,
    exponential,
    ring,
    star,
)
from topologies.schedules import Schedule, one_peer_exponential, random_out, static

TOPOLOGIES: tuple[str, ...] = (
    "ring",
    "directed_ring",
    "exponential",
    "complete",
    "star",
    "random_out",
    "one_peer_exponential",
)

_STATIC: dict[str, Callable[[int], nx.Graph]] = {
    "ring": ring,
    "directed_ring": directed_ring,
    "complete": complete,
    "star": star,
}


def build_schedule(
    name: str,
    n: int,
    *,
    out_degree: int = 10,
    directed: bool = True,
    base: int = 2,
    seed: int = 0,
) -> Schedule:
    """The schedule of topology `name` (one of TOPOLOGIES) on n nodes.

    Parameters
    ----------
    name : topology name.
    n : number of nodes.
    out_degree : k of "random_out" (1 <= out_degree <= n - 1), a fresh k-out digraph each round.
    directed, base : options of "exponential".
    seed : seed of "random_out"; round t draws from (seed, t).

    Returns
    -------
    Schedule; static (period 1) except for "random_out" and "one_peer_exponential".
    """
    if name in _STATIC:
        return static(_STATIC[name](n))
    if name == "exponential":
        return static(exponential(n, base=base, directed=directed))
    if name == "random_out":
        n = _check_int(n, "n", 2)
        return random_out(n, _check_out_degree(out_degree, n, "out_degree"), seed)
    if name == "one_peer_exponential":
        return one_peer_exponential(n)
    raise ValueError(f"unknown topology {name!r}; choose one of {', '.join(TOPOLOGIES)}")
