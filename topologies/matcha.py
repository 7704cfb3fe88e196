"""MATCHA (Wang, Sahu, Yang, Joshi, Kar, "MATCHA: Speeding Up Decentralized SGD via Matching
Decomposition Sampling", 2019): a base graph split into matchings, each activated at random
every round.

1. The base graph's edges are split into matchings (a proper edge colouring: networkx's greedy
   colouring of the line graph, largest degree first, at most 2 Delta - 1 matchings where the
   authors' Misra-Gries colouring gives at most Delta + 1).
2. Matching j is activated with probability p_j, the p in [0, 1]^M that maximizes the algebraic
   connectivity lambda_2(sum_j p_j L_j) of the expected Laplacian under the budget
   sum_j p_j <= budget M (a concave problem, solved here by projected supergradient ascent where
   the authors call an SDP solver).
3. The round's graph is the union of the active matchings with every edge weight alpha
   (W = I - alpha L), alpha minimizing the spectral norm of E[W^T W] - J / n =
   I - 2 alpha Lbar + alpha^2 (Lbar^2 + 2 Ltilde) - J / n, Lbar = sum p_j L_j,
   Ltilde = sum p_j (1 - p_j) L_j (convex in alpha: a bounded scalar search).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import networkx as nx
import numpy as np
from scipy.optimize import minimize_scalar

from topologies._common import ParameterError
from topologies.random_graphs import Seed
from topologies.schedules import _round_rng, _schedule_seed

ASCENT_STEPS = 2000  # supergradient steps of the activation probabilities


def matchings(graph: nx.Graph) -> list[list[tuple[int, int]]]:
    """The edges of `graph` split into matchings (no two edges of one share a node).

    Parameters
    ----------
    graph : an undirected graph.

    Returns
    -------
    list of matchings, each a sorted list of edges (u, v) with u < v, in sorted order.

    Examples
    --------
    >>> matchings(nx.cycle_graph(4))
    [[(0, 1), (2, 3)], [(0, 3), (1, 2)]]
    """
    colour = nx.greedy_color(nx.line_graph(graph), strategy="largest_first")
    found: dict[int, list[tuple[int, int]]] = {}
    for (u, v), c in colour.items():
        found.setdefault(c, []).append((min(u, v), max(u, v)))
    return sorted(sorted(edges) for edges in found.values())


def _laplacian(n: int, edges: list[tuple[int, int]]) -> np.ndarray:
    """[n, n] Laplacian of the graph of `edges` on nodes 0..n-1."""
    graph = nx.empty_graph(n)
    graph.add_edges_from(edges)
    return nx.laplacian_matrix(graph, nodelist=range(n)).toarray().astype(float)


def _project(q: np.ndarray, total: float) -> np.ndarray:
    """The point of {0 <= p <= 1, sum p <= total} nearest to q (a shift found by bisection)."""
    p = np.clip(q, 0.0, 1.0)
    if p.sum() <= total:
        return p
    low, high = 0.0, float(q.max())
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if np.clip(q - mid, 0.0, 1.0).sum() > total else (low, mid)
    return np.clip(q - high, 0.0, 1.0)


def activation_probabilities(laplacians: list[np.ndarray], budget: float) -> np.ndarray:
    """The p maximizing lambda_2(sum_j p_j L_j) with 0 <= p <= 1 and sum p <= budget M.

    Parameters
    ----------
    laplacians : the matchings' Laplacians, [n, n] each.
    budget : the expected fraction of matchings active a round, in (0, 1].

    Returns
    -------
    float64 [M].
    """
    m = len(laplacians)
    n = laplacians[0].shape[0]
    stack = np.stack(laplacians)
    basis = np.linalg.qr(np.eye(n) - 1.0 / n, mode="reduced")[0][:, : n - 1]  # 1-perp
    reduced = np.einsum("ia,jab,bk->jik", basis.T, stack, basis)
    p = np.full(m, min(1.0, budget))
    best, best_p = -np.inf, p
    for step in range(ASCENT_STEPS):
        values, vectors = np.linalg.eigh(np.tensordot(p, reduced, 1))
        if values[0] > best:
            best, best_p = values[0], p
        v = vectors[:, 0]  # lambda_2's eigenvector, within 1-perp
        gain = np.einsum("i,jik,k->j", v, reduced, v)  # d lambda_2 / d p_j
        p = _project(p + gain / (np.linalg.norm(gain) + 1e-12) / np.sqrt(step + 1),
                     budget * m)
    return best_p


def mixing_weight(laplacians: list[np.ndarray], p: np.ndarray) -> float:
    """The edge weight alpha minimizing || E[W^T W] - J / n || (module docstring).

    Parameters
    ----------
    laplacians : the matchings' Laplacians.
    p : their activation probabilities.

    Returns
    -------
    float.
    """
    n = laplacians[0].shape[0]
    mean = np.tensordot(p, np.stack(laplacians), 1)
    spread = np.tensordot(p * (1 - p), np.stack(laplacians), 1)
    square = mean @ mean + 2 * spread

    def norm(alpha: float) -> float:
        M = np.eye(n) - 2 * alpha * mean + alpha**2 * square - np.full((n, n), 1.0 / n)
        return float(np.abs(np.linalg.eigvalsh(M)).max())

    top = float(np.linalg.eigvalsh(mean).max())
    return float(minimize_scalar(norm, bounds=(0.0, 2.0 / max(top, 1e-12)),
                                 method="bounded", options={"xatol": 1e-10}).x)


@dataclass(frozen=True)
class Matcha:
    """Round t: the matchings activated from (seed, t), every edge of weight alpha."""

    matchings: tuple[tuple[tuple[int, int], ...], ...]
    probabilities: tuple[float, ...]
    alpha: float
    n: int
    seed: int
    period: None = None
    directed: bool = False
    needs_losses: ClassVar[bool] = False

    def at(self, t: int) -> nx.Graph:
        active = _round_rng(self.seed, t).random(len(self.matchings)) < np.array(
            self.probabilities)
        graph = nx.Graph()
        graph.add_nodes_from(range(self.n))
        graph.add_edges_from(((u, v) for j in np.flatnonzero(active)
                              for u, v in self.matchings[j]), weight=self.alpha)
        return graph


def matcha(graph: nx.Graph, budget: float = 0.5, seed: Seed = None) -> Matcha:
    """MATCHA's schedule on a base graph (module docstring).

    Parameters
    ----------
    graph : the base graph, undirected, nodes 0..n-1, connected.
    budget : the expected fraction of matchings active a round, in (0, 1] (the authors'
        `communication_budget`, 0.5 in Marfoq et al.'s comparison).
    seed : int >= 0, a Generator, or None.

    Returns
    -------
    Matcha, aperiodic, undirected; `probabilities` and `alpha` as computed.

    Raises
    ------
    ParameterError
        naming graph (directed, not connected, not on 0..n-1) or budget (outside (0, 1]).

    Examples
    --------
    >>> S = matcha(nx.cycle_graph(6), budget=1.0, seed=0)
    >>> S.probabilities, sorted(S.at(0).edges) == sorted(nx.cycle_graph(6).edges)
    ((1.0, 1.0), True)
    """
    if graph.is_directed() or set(graph.nodes) != set(range(graph.number_of_nodes())):
        raise ParameterError("graph", "must be undirected on nodes 0..n-1")
    if graph.number_of_nodes() < 2:
        raise ParameterError("graph", "needs at least 2 nodes")
    graph = nx.Graph(graph)
    graph.remove_edges_from(list(nx.selfloop_edges(graph)))  # no link: no matching
    if not nx.is_connected(graph):
        raise ParameterError("graph", "must be connected: its matchings could never average")
    if not 0 < budget <= 1:
        raise ParameterError("budget", f"must be in (0, 1], got {budget}")
    n = graph.number_of_nodes()
    found = matchings(graph)
    laplacians = [_laplacian(n, edges) for edges in found]
    p = activation_probabilities(laplacians, budget)
    p = np.where(p > 1 - 1e-9, 1.0, p)
    return Matcha(tuple(tuple(edges) for edges in found), tuple(float(x) for x in p),
                  mixing_weight(laplacians, p), n, _schedule_seed(seed))
