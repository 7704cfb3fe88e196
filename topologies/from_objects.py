"""A researcher's own schedule: any object (a graph, a sequence of graphs, a mixing matrix, a
callable t -> graph, a Schedule) made a `Schedule` (`as_schedule`, `from_function`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import networkx as nx
import numpy as np
import scipy.sparse as sp

from topologies._common import ParameterError, check_int, check_nodes
from topologies.convert import from_adjacency
from topologies.schedules import Schedule, cycle, static


@dataclass(frozen=True)
class FunctionSchedule:
    """Round t's graph is ``fn(t)``; every graph must have the nodes 0..n-1 of round 0's."""

    fn: Callable[[int], nx.Graph]
    n: int
    directed: bool
    period: int | None = None
    needs_losses: ClassVar[bool] = False

    def at(self, t: int) -> nx.Graph | nx.DiGraph:
        t = check_int(t, "t", 0)
        G = self.fn(t)
        if not isinstance(G, nx.Graph):
            raise ParameterError("topology", f"the function returned {type(G).__name__} for "
                                 f"round {t}, not a networkx graph")
        if check_nodes(G) != self.n:
            raise ParameterError("topology", f"the graph of round {t} has {G.number_of_nodes()} "
                                 f"nodes, round 0's has {self.n}")
        return G


def from_function(fn: Callable[[int], nx.Graph], period: int | None = None) -> FunctionSchedule:
    """Schedule whose round-t graph is ``fn(t)`` (t = 0, 1, ...).

    ``fn`` must be a pure function of t, so that a resumed run sees the same graphs (seed any
    randomness with t).

    Parameters
    ----------
    fn : t -> networkx graph on 0..n-1 (the same n every round).
    period : fn(t + period) is fn(t), or None.

    Returns
    -------
    FunctionSchedule, n and directedness read from fn(0).

    Raises
    ------
    ParameterError
        naming period unless it is None or an integer >= 1; naming topology when fn(0) is not a
        networkx graph.
    """
    if period is not None:
        check_int(period, "period", 1)
    G = fn(0)
    if not isinstance(G, nx.Graph):
        raise ParameterError("topology", f"the function returned {type(G).__name__} for round 0, "
                             "not a networkx graph")
    return FunctionSchedule(fn, check_nodes(G), G.is_directed(), period)


def _mixing_graph(W: object) -> nx.Graph:
    """The weighted graph of a column-convention mixing matrix (W[j, i] = share i sends to j).
    A matrix with a diagonal must have columns summing to 1 (ValueError); with a zero diagonal
    the self weights are implied."""
    M = sp.csr_array(W) if sp.issparse(W) else np.asarray(W, dtype=float)
    G = from_adjacency(M.T, weighted=True)  # checks the shape and the entries first
    diagonal = np.asarray(M.diagonal(), dtype=float)
    if diagonal.any():
        sums = np.asarray(M.sum(axis=0), dtype=float).ravel()
        worst = int(np.argmax(np.abs(sums - 1)))
        if abs(sums[worst] - 1) > 1e-9:
            raise ValueError(f"mixing matrix column {worst} sums to {sums[worst]:.12g} with its "
                             "diagonal; columns must sum to 1 (W[j, i] = share of i's mass sent "
                             "to j), or leave the diagonal 0 to have the self weights implied")
    return G


def _is_matrix(obj: object) -> bool:
    return sp.issparse(obj) or (isinstance(obj, np.ndarray) and obj.ndim == 2)


def as_schedule(obj: object) -> Schedule:
    """A schedule from what a researcher has in hand.

    A Schedule is returned as it is; a networkx graph is static; a mixing matrix (numpy or
    scipy.sparse, [n, n], ``W[j, i]`` = share of i's mass sent to j, diagonal implied) is a
    static graph whose edges carry those weights; a sequence of graphs or matrices is periodic
    (``cycle``); a callable ``t -> graph`` is ``from_function``.

    Parameters
    ----------
    obj : a Schedule, a networkx graph, a mixing matrix, a sequence of graphs or matrices, or a
        callable t -> graph.

    Returns
    -------
    Schedule.

    Raises
    ------
    TypeError
        for anything else, or a sequence holding something other than graphs and matrices.
    ValueError
        for a matrix with a diagonal whose columns do not sum to 1.
    """
    if isinstance(obj, nx.Graph):
        return static(obj)
    if isinstance(obj, Schedule):
        return obj
    if _is_matrix(obj):
        return static(_mixing_graph(obj))
    if isinstance(obj, Sequence) and not isinstance(obj, str):
        items = [_mixing_graph(x) if _is_matrix(x) else x for x in obj]
        bad = next((x for x in items if not isinstance(x, nx.Graph)), None)
        if bad is not None:
            raise TypeError(f"a sequence of topologies must hold networkx graphs or matrices, got "
                            f"{type(bad).__name__}")
        return cycle(items)
    if callable(obj):
        return from_function(obj)
    raise TypeError(f"expected a networkx graph, a sequence of graphs, a mixing matrix, a "
                    f"callable t -> graph or a Schedule, got {type(obj).__name__}")
