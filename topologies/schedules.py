"""Time-varying topologies: a schedule gives the communication graph of every round t."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import networkx as nx
import numpy as np

from topologies.builders import (
    _check_int,
    _check_nodes,
    _check_out_degree,
    _circulant,
    _random_out_digraph,
)


@runtime_checkable
class Schedule(Protocol):
    """The graph of round t is ``at(t)``; ``period`` is None when the sequence is aperiodic."""

    n: int
    period: int | None
    directed: bool

    def at(self, t: int) -> nx.Graph | nx.DiGraph: ...


@dataclass(frozen=True)
class StaticSchedule:
    """The same graph every round."""

    graph: nx.Graph
    n: int
    directed: bool
    period: int = 1

    def at(self, t: int) -> nx.Graph | nx.DiGraph:
        return self.graph


@dataclass(frozen=True)
class OnePeerExponential:
    """Round t: every node i keeps half and sends to (i + 2**(t mod period)) mod n."""

    n: int
    period: int
    directed: bool = True

    def at(self, t: int) -> nx.DiGraph:
        return _circulant(self.n, [2 ** (t % self.period)], directed=True)


@dataclass(frozen=True)
class RandomOut:
    """Round t: every node sends to k fresh distinct random others, drawn from (seed, t) only."""

    n: int
    k: int
    seed: int
    period: None = None
    directed: bool = True

    def at(self, t: int) -> nx.DiGraph:
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, _check_int(t, "t", 0)]))
        return _random_out_digraph(self.n, self.k, rng)


def static(G: nx.Graph) -> StaticSchedule:
    """A schedule of period 1 whose ``at(t)`` returns G itself (nodes 0..n-1, no self-loops)."""
    return StaticSchedule(G, _check_nodes(G), G.is_directed())


def one_peer_exponential(n: int) -> OnePeerExponential:
    """One-peer exponential graph (Ying et al. 2021): period tau = ceil(log2 n), directed.

    For n a power of two, the mixing matrices of any tau consecutive rounds multiply to J.
    """
    n = _check_int(n, "n", 2)
    return OnePeerExponential(n, period=(n - 1).bit_length())


def random_out(n: int, k: int, seed: int) -> RandomOut:
    """Column-random topology (DFedSGPSM): fresh random k-out digraph each round; aperiodic."""
    n = _check_int(n, "n", 2)
    return RandomOut(n, _check_out_degree(k, n, "k"), _check_int(seed, "seed", 0))


def as_schedule(obj: Schedule | nx.Graph) -> Schedule:
    """`obj` itself if it is a Schedule; a static schedule if it is a networkx graph."""
    if isinstance(obj, nx.Graph):
        return static(obj)
    if isinstance(obj, Schedule):
        return obj
    raise TypeError(f"expected a networkx graph or a Schedule, got {type(obj).__name__}")
