"""Spectral and connectivity metrics of mixing matrices, graphs and schedules.

Functions taking ``W`` accept a square matrix or a graph; a graph stands for its natural mixing
matrix (Metropolis-Hastings if undirected, uniform push rule if directed). Functions taking ``G``
accept a graph or a matrix; a matrix stands for its graph, edge i -> j when ``W[j, i] > 0``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from topologies.mixing import column_stochastic, doubly_stochastic
from topologies.schedules import Schedule, as_schedule


def _as_matrix(W: np.ndarray | nx.Graph) -> np.ndarray:
    if isinstance(W, nx.Graph):
        return column_stochastic(W) if W.is_directed() else doubly_stochastic(W)
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be a square matrix, got shape {W.shape}")
    return W


def _as_graph(G: nx.Graph | np.ndarray) -> nx.Graph:
    if isinstance(G, nx.Graph):
        return G
    W = _as_matrix(G)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(W.shape[0]))
    graph.add_edges_from((i, j) for i, j in np.argwhere(W.T > 0).tolist() if i != j)
    return graph


def eigenvalues(W: np.ndarray | nx.Graph) -> np.ndarray:
    """Eigenvalues of W sorted by modulus, largest first (ties: larger real part first).

    Real (float64) for a symmetric W, complex otherwise.
    """
    W = _as_matrix(W)
    ev = np.linalg.eigvalsh(W) if np.array_equal(W, W.T) else np.linalg.eigvals(W)
    return ev[np.lexsort((-ev.imag, -ev.real, -np.abs(ev)))]


def slem(W: np.ndarray | nx.Graph) -> float:
    """Second-largest eigenvalue modulus: the largest modulus once the eigenvalue nearest 1 is
    removed. Equals 1 when eigenvalue 1 is not simple (graph not strongly connected)."""
    ev = eigenvalues(W)
    if ev.size <= 1:
        return 0.0
    return float(np.abs(np.delete(ev, np.argmin(np.abs(ev - 1.0)))).max())


def spectral_gap(W: np.ndarray | nx.Graph) -> float:
    """1 - slem(W)."""
    return 1.0 - slem(W)


def is_strongly_connected(G: nx.Graph | np.ndarray) -> bool:
    """Strong connectivity for a DiGraph (or matrix), plain connectivity for an nx.Graph."""
    G = _as_graph(G)
    return nx.is_strongly_connected(G) if G.is_directed() else nx.is_connected(G)


def diameter(G: nx.Graph | np.ndarray) -> int:
    """Largest shortest-path distance (along edge directions in a DiGraph).

    Raises ValueError if the graph is not (strongly) connected: its diameter is infinite.
    """
    G = _as_graph(G)
    if not is_strongly_connected(G):
        kind = "strongly connected" if G.is_directed() else "connected"
        raise ValueError(f"the graph is not {kind}, so its diameter is infinite")
    return nx.diameter(G)


def union_graph(schedule: Schedule | nx.Graph, t0: int, t1: int) -> nx.DiGraph:
    """DiGraph on 0..n-1 of all edges used in rounds t0..t1-1 (undirected edges go both ways)."""
    if not 0 <= t0 <= t1:
        raise ValueError(f"need 0 <= t0 <= t1, got t0={t0}, t1={t1}")
    schedule = as_schedule(schedule)
    union = nx.DiGraph()
    union.add_nodes_from(range(schedule.n))
    for t in range(t0, t1):
        union.add_edges_from(nx.DiGraph(schedule.at(t)).edges)
    return union
