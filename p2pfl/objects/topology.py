"""A topology given as an object: the schedule it becomes and its record (topology.json)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import networkx as nx

import topologies as T
from p2pfl.config import OBJECT, Config, ConfigError, TopologyConfig
from p2pfl.errors import UserCodeError
from p2pfl.objects.records import read_record

RECORD = "topology.json"
FINGERPRINT_ROUNDS = 16  # graphs hashed for an aperiodic schedule (and a period above MAX_PERIOD)
MAX_PERIOD = 1000  # longest period whose graphs are stored for a rebuild
_PER_ROUND = ("link_drop", "node_drop")  # topology fields that still apply to an object


def edge_list(G: nx.Graph) -> list[list[Any]]:
    """A graph's edges as plain lists, an undirected edge once, as u < v.

    Parameters
    ----------
    G : the graph.

    Returns
    -------
    list of [u, v, weight or None], sorted.
    """
    rows = []
    for u, v, w in G.edges(data="weight"):
        if not G.is_directed() and u > v:
            u, v = v, u
        rows.append([int(u), int(v), None if w is None else float(w)])
    return sorted(rows, key=lambda r: (r[0], r[1]))


def describe(schedule: T.Schedule) -> dict[str, Any]:
    """The record of `schedule`: class, size, period, fingerprint, and its graphs if periodic.

    Parameters
    ----------
    schedule : the schedule given as an object.

    Returns
    -------
    dict; "graphs" holds the edge lists of one period when the period is at most MAX_PERIOD.

    Raises
    ------
    ConfigError
        naming topology for a schedule that gives two different graphs for round 0 (a resume
        could not reproduce it).
    """
    period = schedule.period
    stored = period is not None and period <= MAX_PERIOD
    rounds = period if stored else FINGERPRINT_ROUNDS
    graphs = [edge_list(schedule.at(t)) for t in range(rounds)]
    if edge_list(schedule.at(0)) != graphs[0]:
        raise ConfigError("topology", "the topology object gave two different graphs for round 0:"
                          " make round t's graph a function of t alone (seed its randomness "
                          "with t)")
    blob = json.dumps([schedule.n, schedule.directed, graphs]).encode()
    cls = type(schedule)
    record: dict[str, Any] = {
        "class": f"{cls.__module__}.{cls.__qualname__}", "n": schedule.n,
        "directed": schedule.directed, "period": period, "rounds_fingerprinted": rounds,
        "fingerprint": hashlib.sha256(blob).hexdigest()}
    if stored:
        record["graphs"] = graphs
    return record


def rebuild(record: dict[str, Any]) -> T.Schedule:
    """The periodic schedule stored in `record` (its "graphs").

    Parameters
    ----------
    record : a `describe` record with graphs.

    Returns
    -------
    Schedule, periodic.
    """
    graphs = []
    for edges in record["graphs"]:
        G = nx.DiGraph() if record["directed"] else nx.Graph()
        G.add_nodes_from(range(record["n"]))
        for u, v, w in edges:
            G.add_edge(u, v, **({} if w is None else {"weight": w}))
        graphs.append(G)
    return T.cycle(graphs)


def _as_object_config(cfg: Config) -> Config:
    """`cfg` with topology.name = "object"; refuses topology settings an object would ignore."""
    from algorithms import ALGORITHMS

    default = type(cfg.topology)()  # the named topology's defaults, its options included
    algorithm = ALGORITHMS.get(cfg.algorithm.name)
    implied = ("", "random", *([] if algorithm is None else
                               [algorithm.implied(cfg).get("topology.selection", "random")]))
    for field in dataclasses.fields(cfg.topology):
        value = getattr(cfg.topology, field.name)
        ignored = field.name not in ("name", *_PER_ROUND) and value != getattr(default, field.name)
        if ignored and not (field.name == "selection" and value in implied):
            raise ConfigError(f"topology.{field.name}", f"is set ({value!r}) but the topology is a "
                              "Python object, which it does not shape; leave it out")
    kept = {k: getattr(cfg.topology, k) for k in _PER_ROUND}
    topology = TopologyConfig(name=OBJECT, selection="random", **kept)
    return dataclasses.replace(cfg, topology=topology)


def resolve_topology(cfg: Config, out: Path, resume: bool,
                     topology: object | None) -> tuple[Config, T.Schedule | None, dict | None]:
    """The topology given as an object, checked and recorded.

    Parameters
    ----------
    cfg : the run's config.
    out : the run directory.
    resume : whether the run resumes.
    topology : anything `T.as_schedule` takes, or None.

    Returns
    -------
    tuple (config as recorded, schedule to run or None for a named topology, record to write).

    Raises
    ------
    ConfigError
        naming topology: "object" in the config with nothing passed, an object that is no
        topology, a node count other than data.num_nodes, or a topology other than the run had.
    UserCodeError
        when the object's own code fails.
    """
    recorded = read_record(out / RECORD) if resume else None
    if topology is None:
        if cfg.topology.name != OBJECT:
            return cfg, None, None
        if recorded is not None and "graphs" in recorded:
            return cfg, rebuild(recorded), recorded
        if recorded is None:
            raise ConfigError("topology.name", f"{OBJECT!r} means a topology passed to "
                              "p2pfl.run(cfg, out, topology=...); none was passed")
        raise ConfigError("topology", f"{out} ran on a {recorded['class']} object that "
                          f"{RECORD} cannot rebuild (aperiodic): pass it again, "
                          "p2pfl.run(cfg, out, topology=..., resume=True)")
    try:
        schedule = T.as_schedule(topology)
    except (TypeError, ValueError) as err:  # ParameterError is a ValueError
        raise ConfigError("topology", str(err)) from None
    except Exception as err:  # a function of one's own, failing in round 0
        name = getattr(topology, "__qualname__", type(topology).__name__)
        raise UserCodeError(f"schedule function {name}", err, 1) from err
    if schedule.n != cfg.data.num_nodes:
        raise ConfigError("topology", f"the topology has {schedule.n} nodes, data.num_nodes is "
                          f"{cfg.data.num_nodes}")
    cfg = _as_object_config(cfg)
    try:
        record = describe(schedule)
    except ValueError as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError("topology", str(err)) from None
    except Exception as err:  # the object's own code, asked for the graphs it records
        raise UserCodeError(schedule_name(schedule), err) from err
    if recorded is not None and recorded["fingerprint"] != record["fingerprint"]:
        raise ConfigError("topology", f"the topology object differs from the one {out} ran on "
                          f"({recorded['class']}, graphs of rounds 0-"
                          f"{recorded['rounds_fingerprinted'] - 1} differ): pass the same one")
    return cfg, schedule, record


def schedule_name(schedule: T.Schedule) -> str:
    """How an error names a schedule.

    Parameters
    ----------
    schedule : the schedule.

    Returns
    -------
    str, its function for a schedule made of one, else its class's `at`.
    """
    if isinstance(schedule, T.FunctionSchedule):
        return f"schedule function {getattr(schedule.fn, '__qualname__', repr(schedule.fn))}"
    return f"schedule {type(schedule).__name__}.at"
