"""The candidates of the design command, and the file its pick is written to.

The catalogue (`catalogue`), for a config's algorithm, nodes, network and degree budget:

- from the catalogue of named topologies: the ring, the exponential graph (undirected for an
  algorithm with doubly-stochastic mixing), the one-peer exponential graph, the Base-2 graph
  and, with a budget b, the Base-(b+1) graph (b peers a round), EquiDyn (undirected likewise),
  a random regular graph of degree b (4 without a budget), gossip on the star, and the complete
  graph;
- built from the run's partition: D-Cliques (cliques of b nodes, at most 10, joined clique to
  clique, or in a ring of cliques where that would give a node more than b neighbours) and
  STL-FW at the budget (3 without one); for an algorithm with doubly-stochastic mixing, which
  needs a symmetric W, STL-FW symmetrized (`SymmetricSTLFW`, at the budget, 4 without one);
- with an underlay ([network] underlay), the throughput overlays of Marfoq et al. on its links
  (topologies.throughput): the minimum spanning tree, the delta-MBST at delta = budget and the
  Christofides ring (undirected for doubly-stochastic mixing).

A candidate whose degree (analysis.design_predict.max_degree) exceeds the budget, or that the
algorithm cannot use, is left out by the design with a line saying so: the one-peer exponential
graph is directed, so an algorithm with doubly-stochastic mixing (D-PSGD) cannot use it. MATCHA
is not a candidate: its rounds are random matchings that no topology file can hold.

`write_topology` writes the pick as a [topology] table (topology.toml) that a config can take:
a named topology as its name and options, a graph given as an object as an edge file beside it
(``name = "from_edges"``, weights kept).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

DCLIQUES_MAX = 10  # D-Cliques' own clique size: its paper's largest


def catalogue(cfg: Any, mixing: str, budget: int | None, model_bits: float,
              compute_s: float) -> dict[str, Any]:
    """The candidate topologies of a config (module docstring), as `analysis.study.run` takes
    them: spec strings, tables of [topology] fields and topology objects.

    Parameters
    ----------
    cfg : the experiment's config.
    mixing : its algorithm's mixing, "doubly_stochastic" or "column_stochastic".
    budget : the most neighbours a node may have in a round, or None (no limit).
    model_bits : bits of one message (the overlays weigh transfers by it).
    compute_s : a round's mean local phase on a node at nominal speed, in seconds.

    Returns
    -------
    dict {label: spec string, table or object}.
    """
    directed = mixing == "column_stochastic"
    n = cfg.data.num_nodes
    size = max(min(budget or DCLIQUES_MAX, DCLIQUES_MAX, n), 2)
    # every clique joined to every other by one edge, unless a node would then pass the budget
    inter = "fully" if budget is None or math.ceil(n / size) - 1 <= size else "ring"
    degree = min(budget or 4, n - 1)
    out: dict[str, Any] = {
        "ring": "ring",
        "exponential": {"name": "exponential", "directed": directed},
        "one_peer_exponential": "one_peer_exponential",
        "base_graph": {"name": "base_graph", "k": 1},
        "equi_dyn": {"name": "equi_dyn", "directed": directed},
        "random_regular": {"name": "random_regular", "d": degree - (n * degree) % 2},
        "star": "star",
        "complete": "complete",
        "d_cliques": {"name": "d_cliques", "clique_size": size, "inter": inter},
    }
    if directed:
        out["stl_fw"] = {"name": "stl_fw", "budget": min(budget or 3, n - 1)}
    else:
        out["stl_fw_sym"] = SymmetricSTLFW(min(budget or 4, n - 1))
    if budget is not None and 1 < budget < n - 1:
        out[f"base_graph k={budget}"] = {"name": "base_graph", "k": budget}
    if cfg.network.underlay:
        out.update(overlays(cfg, directed, budget, model_bits, compute_s))
    return out


class SymmetricSTLFW:
    """STL-FW for symmetric mixing, a topology factory (analysis.study_measure): W learned by
    `T.stl_fw` at half the budget (at least 1), then (W + W^T) / 2, still doubly stochastic and
    of at most `budget` neighbours a node, as an undirected graph whose edge weights are its
    entries (the mixing D-PSGD runs). Le Bars et al. learn a W that need not be symmetric; an
    algorithm with doubly-stochastic mixing here needs one that is.

    Parameters
    ----------
    budget : the most neighbours of a node, >= 1.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def __call__(self, class_counts: np.ndarray) -> nx.Graph:
        """The graph of the symmetrized W of the partition's class counts [n, K]."""
        import topologies as T

        counts = np.asarray(class_counts, dtype=float)
        W = T.stl_fw(counts / counts.sum(axis=1, keepdims=True), max(1, self.budget // 2),
                     connected=False)
        return T.from_adjacency((W + W.T) / 2, weighted=True)


def overlays(cfg: Any, directed: bool, budget: int | None, model_bits: float,
             compute_s: float) -> dict[str, nx.Graph]:
    """The throughput overlays on the config's underlay (topologies.throughput), with its
    [network] latency, access links and a round's mean computation.

    Parameters
    ----------
    cfg : the experiment's config ([network] with an underlay).
    directed : keep the ring directed.
    budget : delta of the delta-MBST (None: the best delta).
    model_bits : bits of one message.
    compute_s : a round's mean local phase, in seconds.

    Returns
    -------
    dict {label: nx.Graph or nx.DiGraph} on the silos 0..n-1.
    """
    import topologies as T

    net = cfg.network
    n = cfg.data.num_nodes
    links = T.silo_links(T.underlay(net.underlay), n, latency_s=net.latency_s)
    access = net.uplink_gbps or net.bandwidth_gbps
    ring = T.ring_overlay(links, model_bits, compute_s, access)
    return {"mst_overlay": T.mst_overlay(links, model_bits, compute_s),
            "mbst_overlay": T.mbst_overlay(links, model_bits, compute_s, access,
                                           delta=None if budget is None else max(budget, 2)),
            "ring_overlay": ring if directed else ring.to_undirected()}


def _toml_value(value: Any) -> str:
    """A TOML scalar: a bool, number or string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and math.isfinite(value):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def write_topology(out: Path, label: str, schedule: Any, overrides: dict[str, Any]) -> list[Path]:
    """Write the pick as OUT/topology.toml, a [topology] table: its name and options where it is
    a named topology, else (an object) a static graph's edges in OUT/topology.edges (one 'i j'
    or 'i j weight' a line) loaded by ``name = "from_edges"``.

    Parameters
    ----------
    out : the design's folder.
    label : the pick's label (a comment in the file).
    schedule : the schedule it runs (of its first seed).
    overrides : the pick's dotted config overrides (``topology.name`` and its options where it
        is named, and the common fields: window, link_drop, node_drop).

    Returns
    -------
    list of the files written.

    Raises
    ------
    ValueError
        when the pick is a time-varying object (nothing a config can load).
    """
    from p2pfl.report.results import atomic_file

    table = {k.removeprefix("topology."): v for k, v in sorted(
        overrides.items(), key=lambda kv: kv[0] != "topology.name") if k.startswith("topology.")}
    files = []
    if "name" not in table:  # an object: its graph's edges, with the common fields given
        if schedule.period != 1:
            raise ValueError(f"{label!r} is a time-varying topology object: no file holds it")
        graph = schedule.at(0)
        weighted = any("weight" in d for _, _, d in graph.edges(data=True))
        rows = [f"{i} {j} {float(d['weight'])!r}" if weighted else f"{i} {j}"
                for i, j, d in sorted(graph.edges(data=True), key=lambda e: e[:2])]
        edges = out / "topology.edges"
        with atomic_file(edges) as f:
            f.write("\n".join(rows) + "\n")
        table = {"name": "from_edges", "path": str(edges.resolve()),
                 "directed": graph.is_directed(), **table}
        files.append(edges)
    body = "\n".join(f"{k} = {_toml_value(v)}" for k, v in table.items())
    toml = out / "topology.toml"
    with atomic_file(toml) as f:
        f.write(f"# the design's pick: {label}\n[topology]\n{body}\n")
    return [toml, *files]


def same_rounds(a: Any, b: Any, mixing: str, rounds: int) -> bool:
    """Whether two schedules give the same mixing matrices over `rounds` rounds (to 1e-12).

    Parameters
    ----------
    a, b : schedules.
    mixing : "doubly_stochastic" or "column_stochastic".
    rounds : rounds compared.

    Returns
    -------
    bool.
    """
    import topologies as T

    make = T.doubly_stochastic if mixing == "doubly_stochastic" else T.column_stochastic
    return all(np.allclose(make(a.at(t)), make(b.at(t)), rtol=0, atol=1e-12)
               for t in range(rounds))
