"""Time-varying topologies: a schedule gives the communication graph of every round t.

``at(t)`` depends only on the schedule's arguments, its seed and t (never on which rounds were
asked for before), so a resumed run sees the same graphs. Schedules whose graphs depend on the
nodes' training losses have ``needs_losses = True`` and take ``at(t, losses)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, runtime_checkable

import networkx as nx
import numpy as np

from topologies._common import ParameterError, check_int, check_nodes, check_out_degree
from topologies.builders import _circulant
from topologies.random_graphs import (
    Seed,
    check_regular,
    out_digraph,
    random_regular,
    random_regular_digraph,
)
from topologies.registry import register
from topologies.selection import Selector, check_targets, get_selector


@runtime_checkable
class Schedule(Protocol):
    """The graph of round t is ``at(t)``; ``period`` is None when the sequence is aperiodic.

    ``needs_losses``: the graphs depend on the nodes' latest training losses; then ``at(t,
    losses)`` takes a float array [n] (None in round 0).
    """

    n: int
    period: int | None
    directed: bool
    needs_losses: bool

    def at(self, t: int) -> nx.Graph | nx.DiGraph: ...


def _round_rng(seed: int, t: int) -> np.random.Generator:
    """The Generator of round t of a schedule seeded with `seed`: a function of (seed, t) only."""
    return np.random.default_rng(np.random.SeedSequence([seed, check_int(t, "t", 0)]))


def _schedule_seed(seed: Seed) -> int:
    """A non-negative int seed; a Generator (or None: fresh entropy) draws one."""
    if seed is None or isinstance(seed, np.random.Generator):
        return int(np.random.default_rng(seed).integers(2**63))
    return check_int(seed, "seed", 0)


@dataclass(frozen=True)
class StaticSchedule:
    """The same graph every round."""

    graph: nx.Graph
    n: int
    directed: bool
    period: int = 1
    needs_losses: ClassVar[bool] = False

    def at(self, t: int) -> nx.Graph | nx.DiGraph:
        return self.graph


@dataclass(frozen=True)
class Cycle:
    """Round t uses ``graphs[t mod len(graphs)]``."""

    graphs: tuple[nx.Graph, ...]
    n: int
    directed: bool
    period: int
    needs_losses: ClassVar[bool] = False

    def at(self, t: int) -> nx.Graph | nx.DiGraph:
        return self.graphs[check_int(t, "t", 0) % self.period]


@dataclass(frozen=True)
class OnePeerExponential:
    """Round t: every node i keeps half and sends to (i + 2**(t mod period)) mod n."""

    n: int
    period: int
    directed: bool = True
    needs_losses: ClassVar[bool] = False

    def at(self, t: int) -> nx.DiGraph:
        return _circulant(self.n, [2 ** (check_int(t, "t", 0) % self.period)], directed=True)


@dataclass(frozen=True)
class RandomOut:
    """Round t: every node sends to k fresh distinct others chosen by `select` from (seed, t)
    and, for loss-based selection, the losses."""

    n: int
    k: int
    seed: int
    select: Selector = field(compare=False)
    needs_losses: bool = False
    period: None = None
    directed: bool = True

    def at(self, t: int, losses: np.ndarray | None = None) -> nx.DiGraph:
        targets = self.select(losses, self.n, self.k, _round_rng(self.seed, t))
        return out_digraph(check_targets(targets, self.n, self.k))


@dataclass(frozen=True)
class RandomRegularSchedule:
    """Round t: a fresh uniformly random d-regular graph drawn from (seed, t)."""

    n: int
    d: int
    seed: int
    period: None = None
    directed: bool = False
    needs_losses: ClassVar[bool] = False

    def at(self, t: int) -> nx.Graph:
        return random_regular(self.n, self.d, seed=_round_rng(self.seed, t))


@dataclass(frozen=True)
class EpidemicOracle:
    """Round t: a fresh random s-regular digraph drawn from (seed, t)."""

    n: int
    s: int
    seed: int
    period: None = None
    directed: bool = True
    needs_losses: ClassVar[bool] = False

    def at(self, t: int) -> nx.DiGraph:
        return random_regular_digraph(self.n, self.s, seed=_round_rng(self.seed, t))


def static(G: nx.Graph) -> StaticSchedule:
    """A schedule of period 1 whose ``at(t)`` returns G itself.

    Parameters
    ----------
    G : nx.Graph or nx.DiGraph, nodes 0..n-1, no self-loops.

    Returns
    -------
    StaticSchedule.

    Raises
    ------
    ValueError
        unless G's nodes are 0..n-1 without self-loops (``check_nodes``).

    Examples
    --------
    >>> static(nx.cycle_graph(4)).at(7).number_of_edges()
    4
    """
    return StaticSchedule(G, check_nodes(G), G.is_directed())


def cycle(graphs: Sequence[nx.Graph]) -> Cycle:
    """Periodic schedule: round t uses ``graphs[t mod len(graphs)]``.

    Parameters
    ----------
    graphs : one or more graphs on the same nodes 0..n-1.

    Returns
    -------
    Cycle with period len(graphs); directed if any graph is.

    Examples
    --------
    >>> s = cycle([nx.path_graph(3), nx.complete_graph(3)])
    >>> s.period, s.at(3).number_of_edges()
    (2, 3)
    """
    graphs = tuple(graphs)
    if not graphs:
        raise ParameterError("graphs", "must hold at least one graph")
    sizes = {check_nodes(G) for G in graphs}
    if len(sizes) > 1:
        raise ParameterError("graphs", f"must all have the same nodes, got sizes {sorted(sizes)}")
    return Cycle(graphs, sizes.pop(), any(G.is_directed() for G in graphs), len(graphs))


@register
def one_peer_exponential(n: int) -> OnePeerExponential:
    """One-peer exponential graph (Ying et al. 2021): round t, i -> i + 2**(t mod tau).

    Parameters
    ----------
    n : number of nodes, at least 2; the period is tau = ceil(log2 n).

    Returns
    -------
    OnePeerExponential (directed). For n a power of two the mixing matrices of any tau
    consecutive rounds multiply to J = 11^T / n exactly.

    Examples
    --------
    >>> sorted(one_peer_exponential(8).at(1).successors(0))
    [2]
    """
    n = check_int(n, "n", 2)
    return OnePeerExponential(n, period=(n - 1).bit_length())


@register(renamed={"out_degree": "k"})
def random_out(n: int, k: int = 10, seed: Seed = None, selection: str | Selector = "random",
               temperature: float = 1.0) -> RandomOut:
    """Fresh k out-neighbours per node every round (DFedSGPSM's column-random topology, k = 10;
    with selection="random" the EL-Local topology of Epidemic Learning, de Vos et al. 2023).

    Parameters
    ----------
    n : number of nodes, at least 2.
    k : out-neighbours per node and round, 1 <= k <= n - 1.
    seed : int >= 0, or a numpy Generator or None (fresh entropy) that draws an int seed once.
    selection : "random" (uniform), "loss_based" (DFedSGPSM-S: probability proportional to
        |f_i - f_j|), "loss_softmax" (proportional to exp(|f_i - f_j| / temperature)), or a
        selector callable ``(losses, candidates, k, rng) -> [n, k]`` (``topologies.selection``).
    temperature : of "loss_softmax".

    Returns
    -------
    RandomOut, aperiodic; ``needs_losses`` unless selection is "random", and then
    ``at(t, losses)`` with losses a float array [n] (None: uniform).

    Examples
    --------
    >>> s = random_out(20, 3, seed=1)
    >>> sorted({d for _, d in s.at(5).out_degree()}), s.needs_losses
    ([3], False)
    """
    n = check_int(n, "n", 2)
    k = check_out_degree(k, n, "k")
    select = get_selector(selection, temperature)
    return RandomOut(n, k, _schedule_seed(seed), select, needs_losses=selection != "random")


@register(renamed={"degree": "d"})
def random_regular_schedule(n: int, d: int = 4, seed: Seed = None) -> RandomRegularSchedule:
    """A fresh random d-regular undirected graph every round (decentralizepy-style resampling).

    Parameters
    ----------
    n : number of nodes.
    d : degree, 0 <= d < n, n * d even.
    seed : int >= 0, or a numpy Generator or None (fresh entropy) that draws an int seed once.

    Returns
    -------
    RandomRegularSchedule, aperiodic, undirected.

    Examples
    --------
    >>> sorted({deg for _, deg in random_regular_schedule(10, 4, seed=0).at(3).degree()})
    [4]
    """
    n, d = check_regular(n, d)
    return RandomRegularSchedule(n, d, _schedule_seed(seed))


@register
def epidemic_oracle(n: int, s: int, seed: Seed = None) -> EpidemicOracle:
    """EL-Oracle of Epidemic Learning (de Vos et al., NeurIPS 2023): every round each node
    sends to s others and receives from s others, a fresh random s-regular digraph.

    EL-Local, where each node picks its s targets on its own (in-degrees random), is
    ``random_out(n, s, seed)``. In both, a node averages its model with those it receives:
    ``row_stochastic(S.at(t))``, weight 1 / (d_in + 1) (here 1 / (s + 1), and the matrix is
    doubly stochastic). The authors' simulator draws an undirected s-regular graph per round
    instead, a symmetric special case: ``random_regular_schedule(n, s, seed)``.

    Parameters
    ----------
    n : number of nodes, at least 2.
    s : in- and out-degree of every node and round, 1 <= s <= n - 1.
    seed : int >= 0, or a numpy Generator or None (fresh entropy) that draws an int seed once.

    Returns
    -------
    EpidemicOracle, aperiodic, directed; round t is ``random_regular_digraph(n, s)`` seeded by
    (seed, t).

    Examples
    --------
    >>> G = epidemic_oracle(12, 3, seed=0).at(4)
    >>> sorted({d for _, d in G.in_degree()} | {d for _, d in G.out_degree()})
    [3]
    """
    n = check_int(n, "n", 2)
    s = check_out_degree(s, n, "s")
    return EpidemicOracle(n, s, _schedule_seed(seed))
