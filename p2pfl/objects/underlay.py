"""An underlay given as an object: the physical network under the overlay, and its record
(underlay.json).

Any undirected networkx graph on nodes 0..m-1 whose edges carry `capacity_gbps` (> 0, each
direction of a link its own) and, optionally, `latency_s` (>= 0, else 0) is an underlay
(topologies/underlays.py). config.json then says `network.underlay = "object"`, and
underlay.json holds every link, so a resume rebuilds the same network without it being passed
again; a graph passed on resume must be the same one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
from pathlib import Path
from typing import Any

import networkx as nx

from p2pfl.config import OBJECT, Config, ConfigError
from p2pfl.objects.records import read_record

UNDERLAY_RECORD = "underlay.json"


def _links(graph: nx.Graph) -> list[list[float]]:
    """Every link as [u, v, capacity_gbps, latency_s], u < v, sorted; refuses a malformed one."""
    if not isinstance(graph, nx.Graph) or graph.is_directed() or graph.is_multigraph():
        raise ConfigError("underlay", f"must be an undirected networkx Graph, got "
                          f"{type(graph).__name__}")
    if set(graph.nodes) != set(range(graph.number_of_nodes())):
        raise ConfigError("underlay", "must have nodes 0..m-1 (node i of the overlay sits at "
                          "its node i)")
    if graph.number_of_nodes() and not nx.is_connected(graph):
        raise ConfigError("underlay", "must be connected: a message needs a path between any "
                          "two nodes")
    rows = []
    for u, v, d in graph.edges(data=True):
        capacity, latency = d.get("capacity_gbps"), d.get("latency_s", 0.0)
        if not (_real(capacity) and math.isfinite(capacity) and capacity > 0):
            raise ConfigError("underlay", f"link ({u}, {v}) needs capacity_gbps > 0, got "
                              f"{capacity!r}")
        if not (_real(latency) and math.isfinite(latency) and latency >= 0):
            raise ConfigError("underlay", f"link ({u}, {v}) needs latency_s >= 0, got "
                              f"{latency!r}")
        rows.append([int(min(u, v)), int(max(u, v)), float(capacity), float(latency)])
    return sorted(rows)


def _real(value: object) -> bool:
    """A real number (numpy's too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def describe_underlay(graph: nx.Graph) -> dict[str, Any]:
    """The record of an underlay: its nodes, every link, and a fingerprint.

    Parameters
    ----------
    graph : the underlay.

    Returns
    -------
    dict with "nodes", "links" ([u, v, capacity_gbps, latency_s] each) and "fingerprint".

    Raises
    ------
    ConfigError
        naming underlay for a graph that is not one (module docstring).
    """
    links = _links(graph)
    blob = json.dumps([graph.number_of_nodes(), links]).encode()
    return {"nodes": graph.number_of_nodes(), "links": links,
            "fingerprint": hashlib.sha256(blob).hexdigest()}


def rebuild_underlay(record: dict[str, Any]) -> nx.Graph:
    """The underlay a record holds.

    Parameters
    ----------
    record : a `describe_underlay` record.

    Returns
    -------
    nx.Graph with `capacity_gbps` and `latency_s` on its edges.
    """
    graph = nx.empty_graph(record["nodes"])
    for u, v, capacity, latency in record["links"]:
        graph.add_edge(u, v, capacity_gbps=capacity, latency_s=latency)
    return graph


def check_underlay(cfg: Config, underlay: object) -> dict[str, Any]:
    """Whether a run of `cfg` can take `underlay` as its physical network; its record.

    Parameters
    ----------
    cfg : the run's config.
    underlay : the graph passed.

    Returns
    -------
    dict, `describe_underlay`'s record.

    Raises
    ------
    ConfigError
        naming underlay for a malformed graph, one with fewer nodes than the run, or a run
        without the flow network; network.underlay for a config that names an underlay too.
    """
    if not (cfg.network.enabled and cfg.network.model == "flow"):
        raise ConfigError("underlay", "is the physical network of the flow model: set "
                          "network.enabled = true and network.model = 'flow'")
    if cfg.network.underlay not in ("", OBJECT):
        raise ConfigError("network.underlay", f"names {cfg.network.underlay!r} but an underlay "
                          "object is passed too: leave one out")
    record = describe_underlay(underlay)  # type: ignore[arg-type]
    if record["nodes"] < cfg.data.num_nodes:  # (a star's server needs one more: the build)
        raise ConfigError("underlay", f"has {record['nodes']} nodes, fewer than the run's "
                          f"{cfg.data.num_nodes} (node i sits at its node i)")
    return record


def resolve_underlay(cfg: Config, out: Path, resume: bool, underlay: object | None
                     ) -> tuple[Config, nx.Graph | None, dict[str, Any] | None]:
    """The underlay given as an object, checked and recorded.

    Parameters
    ----------
    cfg : the run's config.
    out : the run directory.
    resume : whether the run resumes.
    underlay : a networkx graph (module docstring), or None.

    Returns
    -------
    tuple (config as recorded, the underlay to run on or None for a named one or none, record
    to write).

    Raises
    ------
    ConfigError
        naming underlay for a malformed graph, one other than the run had, one passed to a run
        without the flow network; network.underlay for "object" with nothing passed or recorded.
    """
    recorded = read_record(out / UNDERLAY_RECORD) if resume else None
    if underlay is None:
        if cfg.network.underlay != OBJECT:
            return cfg, None, None
        if recorded is None:
            raise ConfigError("network.underlay", f"{OBJECT!r} means an underlay passed to "
                              "p2pfl.run(cfg, out, underlay=G); none was passed")
        return cfg, rebuild_underlay(recorded), recorded
    record = check_underlay(cfg, underlay)
    if recorded is not None and recorded["fingerprint"] != record["fingerprint"]:
        raise ConfigError("underlay", f"differs from the one {out} ran on (its links or "
                          "nodes): pass the same one, or none (the record rebuilds it)")
    network = dataclasses.replace(cfg.network, underlay=OBJECT)
    return dataclasses.replace(cfg, network=network), rebuild_underlay(record), record
