"""EquiTopo: topologies with a consensus rate independent of n.

Song, Li, Jin, Shi, Yan, Yin and Yuan, "Communication-Efficient Topologies for Decentralized
Learning with O(1) Consensus Rate", NeurIPS 2022. Built from the basis matrices
A_u = (1/n) I + ((n-1)/n) P_u, u in 1..n-1, where P_u moves node i's value to node i + u
(mod n): node i keeps 1/n of its mass and sends (n-1)/n to i + u.

* ``equi_static(n, m, directed)``: D-EquiStatic, W = (1/m) sum_{l=1..m} A_{u_l} with m offsets
  u_l drawn uniformly with replacement; U-EquiStatic, (1/2m) sum_l (A_{u_l} + A_{u_l}^T).
* ``equi_dyn(n, directed, eta, m)``: one-peer rounds W_t = (1 - eta) I + eta A_u (OD-EquiDyn),
  or the matching that pairs i with i + u (OU-EquiDyn), u drawn afresh every round.

Mixing weights are the edge attribute ``weight``. Directed W is doubly stochastic but not
symmetric: ``column_stochastic(G)`` recovers it (so does ``row_stochastic(G)``: every node
receives what it sends). Undirected W is symmetric: ``doubly_stochastic(G)`` recovers it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import networkx as nx
import numpy as np

from topologies._common import ParameterError, check_int
from topologies.random_graphs import Seed
from topologies.registry import register
from topologies.schedules import _round_rng, _schedule_seed


def default_m(n: int) -> int:
    """m = floor(5 ln n) (at least 1), EquiStatic's default number of offsets.

    The Theta(ln n) number of offsets with which the authors' code shows EquiStatic's consensus rate
    not changing with n.

    Parameters
    ----------
    n : number of nodes.

    Returns
    -------
    int, m >= 1.
    """
    return max(1, int(5 * math.log(n)))


def _check_eta(eta: float) -> float:
    try:
        value = float(eta)
    except (TypeError, ValueError):
        raise ParameterError("eta", f"must be a number in (0, 1], got {eta!r}") from None
    if isinstance(eta, bool) or not 0.0 < value <= 1.0:
        raise ParameterError("eta", f"must be a number in (0, 1], got {eta!r}")
    return value


def _offsets(n: int, m: int, seed: Seed) -> np.ndarray:
    """m offsets drawn uniformly from 1..n-1 with replacement, int64 [m]."""
    return np.random.default_rng(seed).integers(1, n, size=m)


def _circulant_weights(n: int, offsets: np.ndarray, share: float,
                       directed: bool) -> nx.Graph:
    """Edges i -> i + u (mod n) carrying `share` per occurrence of u in `offsets`; undirected,
    half of it each way on {i, i + u} (the two halves of A_u + A_u^T)."""
    counts = np.bincount(offsets, minlength=n)
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(n))
    if directed:
        G.add_weighted_edges_from((i, (i + u) % n, counts[u] * share)
                                  for u in np.flatnonzero(counts).tolist() for i in range(n))
        return G
    pairs: dict[tuple[int, int], float] = {}
    for u in np.flatnonzero(counts).tolist():
        for i in range(n):
            key = (min(i, (i + u) % n), max(i, (i + u) % n))
            pairs[key] = pairs.get(key, 0.0) + counts[u] * share / 2
    G.add_weighted_edges_from((i, j, w) for (i, j), w in pairs.items())
    return G


@register
def equi_static(n: int, m: int | None = None, directed: bool = True,
                seed: Seed = None) -> nx.Graph | nx.DiGraph:
    """D-EquiStatic / U-EquiStatic (Song et al. 2022): a static weighted circulant graph.

    Parameters
    ----------
    n : number of nodes, at least 2.
    m : number of offsets drawn (the paper's M), at least 1; default ``default_m(n)`` =
        floor(5 ln n). Each node sends to at most m others (directed) or has at most 2 m
        neighbours (undirected). With M >= 8 ln(2n/p) / (3 eps^2) the paper shows
        ||W - J|| <= eps with probability at least 1 - p.
    directed : D-EquiStatic (nx.DiGraph) or U-EquiStatic (symmetric nx.Graph).
    seed : int, numpy Generator or None; ``equi_dyn(n, m=m, seed=s)`` samples the same offsets.

    Returns
    -------
    Weighted graph: directed, edge i -> i + u with weight c_u (n-1) / (n m), c_u the number of
    times u was drawn; undirected, the symmetric part. Every node keeps 1/n. Random: a draw
    whose offsets all share a factor with n is not connected (``is_strongly_connected``).

    Examples
    --------
    >>> from topologies.mixing import column_stochastic
    >>> G = equi_static(8, m=3, seed=0)
    >>> W = column_stochastic(G)
    >>> float(W[0, 0]), bool(np.allclose(W.sum(axis=1), 1))
    (0.125, True)
    """
    n = check_int(n, "n", 2)
    m = default_m(n) if m is None else check_int(m, "m", 1)
    return _circulant_weights(n, _offsets(n, m, seed), (n - 1) / (n * m), bool(directed))


@dataclass(frozen=True)
class EquiDyn:
    """Round t: one offset u drawn from (seed, t); each node sends eta (n-1)/n to i + u
    (directed), or the pairs of a matching along offset u exchange it (undirected)."""

    n: int
    directed: bool
    eta: float
    seed: int
    offsets: tuple[int, ...] | None  # None: u uniform in 1..n-1 (the paper's M = n - 1)
    period: None = None
    needs_losses: ClassVar[bool] = False

    def at(self, t: int) -> nx.Graph | nx.DiGraph:
        rng = _round_rng(self.seed, t)
        n = self.n
        u = int(rng.integers(1, n) if self.offsets is None
                else self.offsets[rng.integers(len(self.offsets))])
        weight = self.eta * (n - 1) / n
        G = nx.DiGraph() if self.directed else nx.Graph()
        G.add_nodes_from(range(n))
        if self.directed:
            G.add_weighted_edges_from((i, (i + u) % n, weight) for i in range(n))
            return G
        start = int(rng.integers(n))
        busy = np.zeros(n, dtype=bool)
        for i in ((np.arange(n) + start) % n).tolist():  # greedy, index order from random start
            j = (i + u) % n
            if not busy[i] and not busy[j]:
                busy[i] = busy[j] = True
                G.add_edge(i, j, weight=weight)
        return G


@register
def equi_dyn(n: int, directed: bool = True, eta: float = 0.5, m: int | None = None,
             seed: Seed = None) -> EquiDyn:
    """OD-EquiDyn / OU-EquiDyn (Song et al. 2022): one peer per node and round.

    Parameters
    ----------
    n : number of nodes, at least 2.
    directed : OD-EquiDyn (every node sends to i + u) or OU-EquiDyn (a matching: scanning
        i = s, s+1, ... (mod n) from a random s, i and i + u are paired while both are free).
    eta : weight in (0, 1]: W_t = (1 - eta) I + eta A_u; the edge weight is eta (n-1)/n. The
        authors' experiments use 0.5 (consensus study) and 0.53 (training, n = 17).
    m : None: u uniform in 1..n-1 (the paper's M = n - 1). An int: u drawn from the m offsets
        of ``equi_static(n, m, seed=seed)``.
    seed : int >= 0, or a numpy Generator or None (fresh entropy) that draws an int seed once.

    Returns
    -------
    EquiDyn, aperiodic; ``at(t)`` depends on (seed, t) only. With m = None and directed, for
    every x: E ||W_t x - xbar||^2 = (1 - 2 eta + 2 eta^2 (n-1)/n) ||x - xbar||^2, which is
    (n-1) / (2n) < 1/2 at eta = 1/2 whatever n (E over u; it uses E[P_u] = (n J - I)/(n - 1)).

    Examples
    --------
    >>> S = equi_dyn(10, seed=0)
    >>> sorted({d for _, d in S.at(3).out_degree()}), S.at(3).number_of_edges()
    ([1], 10)
    """
    n = check_int(n, "n", 2)
    eta = _check_eta(eta)
    seed = _schedule_seed(seed)
    offsets = None
    if m is not None:
        offsets = tuple(int(u) for u in _offsets(n, check_int(m, "m", 1), seed))
    return EquiDyn(n, bool(directed), eta, seed, offsets)
