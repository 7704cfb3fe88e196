"""Helpers shared by the topology modules: argument checks (errors name the argument), messages."""

from __future__ import annotations

import difflib
import operator
from collections.abc import Iterable

import networkx as nx
import numpy as np


class ParameterError(ValueError):
    """A bad argument; ``str(err)`` starts with the argument's name, kept in ``err.name``."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name} {message}")
        self.name = name
        self.message = message


def did_you_mean(given: object, allowed: Iterable[str], prefix: str = "") -> str:
    """A "did you mean 'ring'? " hint where `given` is close to a name in `allowed`.

    Parameters
    ----------
    given : the name that was not found (anything; only a str gets a suggestion).
    allowed : the valid names.
    prefix : goes before the match ("algorithm." to suggest a config field by its dotted name).

    Returns
    -------
    str, "did you mean '<prefix><name>'? " (with a trailing space), or "" when nothing is close.
    """
    close = difflib.get_close_matches(given, list(allowed), n=1) if isinstance(given, str) else []
    return f"did you mean {prefix + close[0]!r}? " if close else ""


def check_int(value: int, name: str, low: int, high: int | None = None) -> int:
    """`value` as an int, checked to be an integer in [low, high].

    Parameters
    ----------
    value : the argument (anything with ``__index__``; a bool is refused).
    name : the argument's name, for the error.
    low : smallest allowed value.
    high : largest allowed value, or None for no upper bound.

    Returns
    -------
    int, the value.

    Raises
    ------
    ParameterError
        naming `name`, unless `value` is an integer in [low, high].
    """
    allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
    try:
        number = operator.index(value)
    except TypeError:
        raise ParameterError(name, f"must be an integer {allowed}, got {value!r}") from None
    if isinstance(value, bool) or number < low or (high is not None and number > high):
        raise ParameterError(name, f"must be an integer {allowed}, got {value!r}")
    return number


def check_out_degree(k: int, n: int, name: str) -> int:
    """`k` as an int, checked to be a possible out-degree on n nodes.

    Parameters
    ----------
    k : out-degree.
    n : number of nodes.
    name : the argument's name, for the error.

    Returns
    -------
    int, k.

    Raises
    ------
    ParameterError
        naming `name`, unless k is an integer with 1 <= k <= n - 1.
    """
    k = check_int(k, name, 1)
    if k > n - 1:
        raise ParameterError(name, f"must be between 1 and n - 1 = {n - 1}, got {k}")
    return k


def check_probability(value: float, name: str, *, one: bool = True) -> float:
    """`value` as a float, checked to be a probability.

    Parameters
    ----------
    value : the argument (a number; a bool is refused).
    name : the argument's name, for the error.
    one : whether 1 is allowed ([0, 1]) or not ([0, 1)).

    Returns
    -------
    float, the value.

    Raises
    ------
    ParameterError
        naming `name`, unless 0 <= value <= 1 (< 1 if not `one`).
    """
    interval = "[0, 1]" if one else "[0, 1)"
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise ParameterError(name, f"must be a number in {interval}, got {value!r}") from None
    if isinstance(value, bool) or not (0.0 <= p <= 1.0) or (p == 1.0 and not one):
        raise ParameterError(name, f"must be a number in {interval}, got {value!r}")
    return p


def check_nodes(G: nx.Graph) -> int:
    """Number of nodes of G, checked to be a topology.

    Parameters
    ----------
    G : nx.Graph or nx.DiGraph.

    Returns
    -------
    int, n.

    Raises
    ------
    ValueError
        for a multigraph, unless its nodes are 0..n-1, and on a self-loop.
    """
    if G.is_multigraph():
        raise ValueError("multigraphs are not topologies: convert with nx.Graph or nx.DiGraph")
    n = G.number_of_nodes()
    if set(G) != set(range(n)):
        raise ValueError(
            f"graph nodes must be the integers 0..{n - 1}; relabel with T.from_networkx(G)"
        )
    loop = next(nx.selfloop_edges(G), None)
    if loop is not None:
        raise ValueError(
            f"self-loop at node {loop[0]}: self weights are implied and must not be stored as edges"
        )
    return n


def messages(G: nx.Graph) -> tuple[np.ndarray, np.ndarray, list[float | None]]:
    """Senders, receivers and 'weight' attributes of every message of one round.

    An edge (i, j) of a DiGraph is the message i -> j; an undirected edge is two messages.

    Parameters
    ----------
    G : the round's graph, nodes 0..n-1.

    Returns
    -------
    tuple (src, dst, weights): src, dst int64 arrays [m] (message e goes src[e] -> dst[e]);
    weights a list [m] of each message's 'weight' attribute, None where it has none.
    """
    edges = list(G.edges(data="weight"))
    src = np.fromiter((e[0] for e in edges), dtype=np.int64, count=len(edges))
    dst = np.fromiter((e[1] for e in edges), dtype=np.int64, count=len(edges))
    weights = [e[2] for e in edges]
    if G.is_directed():
        return src, dst, weights
    return np.concatenate([src, dst]), np.concatenate([dst, src]), weights + weights
