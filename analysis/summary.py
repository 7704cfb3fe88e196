"""One dict of every metric of a topology: what `p2pfl analyze` prints."""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp

import topologies as T
from analysis import matrices
from analysis.connectivity import (
    ScheduleLike,
    b_connectivity,
    diameter,
    largest_component_diameter,
    min_b,
    number_of_components,
    rounds_of,
    union_graph,
    why_not_strongly_connected,
)
from analysis.matrices import (
    Matrix,
    adjacency,
    as_matrix,
    is_symmetric,
    sparse_mixing,
)
from analysis.neighbors import NoConsensusWarning, check_gamma, effective_neighbors
from analysis.spectral import (
    algebraic_connectivity,
    ergodicity_coefficient,
    mixing_time,
    perron_vector,
    slem,
)
from analysis.timevarying import (
    exact_averaging_rounds,
    per_round_rate,
    product,
    round_matrix,
    schedule_mixing_time,
)

SUMMARY_KEYS = ("kind", "n", "directed", "edges", "messages", "matrix", "period", "horizon",
                "strongly_connected", "components", "min_B", "no_consensus", "diameter",
                "largest_component_diameter", "slem", "per_round_rate", "spectral_gap_per_round",
                "spectral_gap", "slem_per_period", "spectral_gap_per_period", "lambda2",
                "relaxation_time", "mixing_time", "mixing_eps", "exact_averaging_rounds",
                "effective_neighbors", "effective_neighbors_gamma", "ergodicity_coefficient",
                "n_min_perron", "algebraic_connectivity")
APERIODIC_HORIZON = 20  # rounds examined for a schedule without a period
GAMMA = 0.9  # default decay of the effective number of neighbours' random walk


def _static_matrix(graph: nx.Graph, mixing: str | None) -> Matrix:
    if graph.number_of_nodes() > matrices.DENSE_MAX and mixing is None:
        return sparse_mixing(graph)
    return round_matrix(graph, mixing)


def _matrix_name(graph: nx.Graph | None, mixing: str | None) -> str:
    if graph is None:
        return "given"
    if mixing is None:
        mixing = "column_stochastic" if graph.is_directed() else "doubly_stochastic"
    if graph.number_of_edges() and all(w is not None for *_, w in graph.edges(data="weight")):
        return "edge weights"  # the builder's mixing weights, used as given
    return {"column_stochastic": "push-sum (uniform)",
            "doubly_stochastic": "metropolis-hastings"}[mixing]


def _static(graph: nx.Graph | None, W: Matrix, eps: float, gamma: float) -> dict[str, Any]:
    n = W.shape[0]
    target = graph if graph is not None else W
    reason = why_not_strongly_connected(target)
    connected = reason is None
    out: dict[str, Any] = {"strongly_connected": connected,
                           "components": number_of_components(target),
                           "min_B": 1 if connected else None}
    if reason is not None:
        out["no_consensus"] = reason
    if connected:
        out["diameter"] = diameter(target)
    else:
        out["diameter"] = math.inf
        out["largest_component_diameter"] = largest_component_diameter(target)
    rate = slem(W)
    out["slem"] = rate
    out["spectral_gap_per_round"] = out["spectral_gap"] = 1.0 - rate
    if is_symmetric(W) and n <= matrices.DENSE_MAX:
        dense = W.toarray() if sp.issparse(W) else W
        out["lambda2"] = float(np.sort(np.linalg.eigvalsh(dense))[-2]) if n > 1 else 0.0
    out["relaxation_time"] = 1.0 / (1.0 - rate) if rate < 1.0 else math.inf
    out["per_round_rate"] = rate
    out["mixing_time"] = mixing_time(W, eps) if connected and rate < 1.0 else None
    out["ergodicity_coefficient"] = ergodicity_coefficient(W)
    if n <= matrices.DENSE_MAX:
        out |= _beyond_gap(W, None, gamma)
    if connected:
        out["n_min_perron"] = float(n * perron_vector(W).min())
    if graph is not None and not graph.is_directed():
        out["algebraic_connectivity"] = algebraic_connectivity(graph)
    return out


def detected_period(schedule: Any, rounds: int = APERIODIC_HORIZON) -> int | None:
    """The smallest p <= rounds / 2 for which the graphs of rounds t and t + p are equal.

    Equal nodes, edges and weights, for every t + p < `rounds`.

    Parameters
    ----------
    schedule : anything with at(t).
    rounds : rounds compared.

    Returns
    -------
    int, or None if there is none.
    """
    graphs = [schedule.at(t) for t in range(rounds)]
    for p in range(1, rounds // 2 + 1):
        if all(nx.utils.graphs_equal(graphs[t], graphs[t + p]) for t in range(rounds - p)):
            return p
    return None


def _beyond_gap(topology: ScheduleLike | Matrix, mixing: str | None, gamma: float,
               max_rounds: int | None = None) -> dict[str, Any]:
    """exact_averaging_rounds and effective_neighbors (at gamma), each None where it does not
    apply (an aperiodic schedule has no steady state; a Push-Sum matrix whose graph is not
    strongly connected has no Perron vector)."""
    out: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        out["exact_averaging_rounds"] = exact_averaging_rounds(topology, max_rounds,
                                                               mixing=mixing)
    with contextlib.suppress(ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore", NoConsensusWarning)  # the summary says no_consensus
        out["effective_neighbors"] = effective_neighbors(topology, gamma, mixing=mixing)
    return out


def _time_varying(schedule: ScheduleLike, mixing: str | None, eps: float,
                  horizon: int | None, gamma: float) -> dict[str, Any]:
    sched, length = rounds_of(schedule)
    period = sched.period
    window = horizon or period or length or APERIODIC_HORIZON
    out: dict[str, Any] = {"period": period, "horizon": window}
    union = union_graph(sched, 0, window)
    reason = why_not_strongly_connected(union)
    out["strongly_connected"] = reason is None
    out["components"] = number_of_components(union)
    if reason is not None:
        out["no_consensus"] = f"the union of rounds 0..{window - 1} is {reason}"
    b = min_b(sched, horizon=window if period is None else horizon)
    out["min_B"] = b
    if b is None:
        out["diameter"] = math.inf
    else:
        report = b_connectivity(sched, b, None if period is not None and horizon is None
                                else window)
        out["diameter"] = int(report.max_union_diameter)  # SGP's Delta: union over a B-window
    if sched.n <= matrices.DENSE_MAX:
        rate = per_round_rate(sched, window, mixing)
        out["per_round_rate"] = rate
        out["spectral_gap_per_round"] = out["spectral_gap"] = 1.0 - rate
        if period is not None:
            per_period = (rate if window == period else per_round_rate(sched, period, mixing))
            out["slem_per_period"] = per_period**period
            out["spectral_gap_per_period"] = 1.0 - per_period**period
        out["relaxation_time"] = 1.0 / (1.0 - rate) if rate < 1.0 else math.inf
        out["mixing_time"] = schedule_mixing_time(sched, eps, mixing=mixing)
        out["ergodicity_coefficient"] = ergodicity_coefficient(product(sched, 0, window, mixing))
        out |= _beyond_gap(schedule, mixing, gamma, None if period is not None else window)
    return out


def summary(topology: ScheduleLike | Matrix, *, mixing: str | None = None, eps: float = 1e-3,
            horizon: int | None = None, gamma: float = GAMMA) -> dict[str, Any]:
    """Spectral and connectivity metrics of a graph, a matrix or a schedule, as a flat dict.

    Parameters
    ----------
    topology : graph, matrix (dense or sparse), Schedule or trace (list of graphs/matrices).
    mixing : matrix of a graph's round: None (natural: MH if undirected, push rule if directed),
        "column_stochastic" or "doubly_stochastic" (what an algorithm uses).
    eps : accuracy of the mixing time.
    horizon : rounds of a time-varying schedule to examine (default: its period, else 20).
    gamma : decay of the random walk of the effective number of neighbours, in [0, 1).

    Returns
    -------
    The same keys (SUMMARY_KEYS, in that order) for every topology, None where one does not
    apply: kind ("static" or "time-varying"), n, directed, edges (an undirected edge counted
    once; of round 0 when time-varying; a given matrix is undirected when symmetric), messages
    (messages per round: an undirected edge is two, one each way), matrix, period and horizon
    (period: declared by the schedule, else detected over its first 20 rounds as
    `detected_period` does, so that a function t -> graph and the named schedule it follows give
    the same numbers; horizon: the rounds examined; static: None), strongly_connected and
    components (time-varying: of the union over the horizon), min_B, no_consensus (None, or why
    the nodes cannot agree: "not strongly connected: k strongly connected components"), diameter
    (math.inf if not strongly connected, with largest_component_diameter; time-varying: the
    largest diameter of a union over an aligned min_B-window), slem (static), per_round_rate
    (static: the slem; time-varying: the slem of the product over the horizon, to the power 1 /
    horizon: a geometric mean per round), spectral_gap_per_round (1 - per_round_rate),
    spectral_gap (the same number, the name the topology study reads), slem_per_period and
    spectral_gap_per_period (of the product of one period; periodic time-varying only: the
    one-peer exponential graph of 16 nodes has both gaps 1, as the complete graph, yet takes
    exact_averaging_rounds = 4 to get there, not 1), lambda2 (symmetric W), relaxation_time
    (1 / spectral_gap_per_round), mixing_time (the rounds to accuracy mixing_eps), mixing_eps,
    exact_averaging_rounds (`exact_averaging_rounds`: None if never; an aperiodic schedule is
    examined over the horizon), effective_neighbors (`effective_neighbors` at
    effective_neighbors_gamma, mean over the nodes, read after a whole period; None for an
    aperiodic schedule), ergodicity_coefficient (of W; time-varying: of the product over the
    horizon), n_min_perron (n * min_i pi_i, the limit of the smallest Push-Sum weight; static),
    algebraic_connectivity (undirected static). The neighbourhood heterogeneity needs the data's
    class proportions: `neighborhood_heterogeneity(W, proportions)`.
    """
    check_gamma(gamma)
    if isinstance(topology, np.ndarray) or sp.issparse(topology):
        W = as_matrix(topology)
        directed, messages = not is_symmetric(W), int(adjacency(W).nnz)
        out: dict[str, Any] = {"kind": "static", "n": W.shape[0], "directed": directed,
                               "edges": messages if directed else messages // 2,
                               "messages": messages, "matrix": "given"}
        out.update(_static(None, W, eps, gamma))
        return _keyed(out, eps, gamma)
    sched, length = rounds_of(topology)
    if sched.period is None and length is None:
        period = detected_period(sched)
        if period is not None:
            sched = T.from_function(sched.at, period)
    graph = sched.at(0)
    directed = graph.is_directed()
    edges = graph.number_of_edges()
    head: dict[str, Any] = {"n": sched.n, "directed": directed, "edges": edges,
                            "messages": edges * (1 if directed else 2)}
    if sched.period == 1 or length == 1:
        out = {"kind": "static", **head, "matrix": _matrix_name(graph, mixing)}
        out.update(_static(graph, _static_matrix(graph, mixing), eps, gamma))
        return _keyed(out, eps, gamma)
    out = {"kind": "time-varying", **head, "matrix": _matrix_name(graph, mixing)}
    out.update(_time_varying(sched if length is None else topology, mixing, eps, horizon,
                              gamma))
    return _keyed(out, eps, gamma)


def _keyed(out: dict[str, Any], eps: float, gamma: float) -> dict[str, Any]:
    """`out` with every key of SUMMARY_KEYS, in order (None where a metric does not apply)."""
    return ({k: out.get(k) for k in SUMMARY_KEYS}
            | {"mixing_eps": eps, "effective_neighbors_gamma": gamma})
