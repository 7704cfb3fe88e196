"""The topology of a run: the schedule a config names (built after the data, when it is built
from the partition) and the checks that the algorithm can mix on it."""

from __future__ import annotations

import networkx as nx
import numpy as np

import topologies as T
from algorithms import Algorithm
from p2pfl.config import Config, ConfigError
from p2pfl.core.seeding import stream_seed
from p2pfl.errors import UserCodeError
from p2pfl.objects.topology import schedule_name

CONNECTIVITY_WINDOW = 20  # rounds of a time-varying schedule checked for joint connectivity


def needs_class_counts(cfg: Config) -> bool:
    """Whether the topology `cfg` names is built from the run's partition.

    Parameters
    ----------
    cfg : the config.

    Returns
    -------
    bool, True when its registered builder takes `class_counts`.
    """
    entry = T.REGISTRY.get(cfg.topology.name)
    return entry is not None and "class_counts" in entry.facts


def schedule_for(cfg: Config, algorithm: Algorithm,
                 counts: np.ndarray | None = None) -> T.Schedule:
    """The topology schedule `cfg` names, for `algorithm`.

    A centralized algorithm runs on a star of num_nodes + 1 whose hub 0 is the server.

    Parameters
    ----------
    cfg : the config.
    algorithm : the run's algorithm.
    counts : the run's [num_nodes, K] class counts (`class_counts`), given to a topology built
        from the partition (`needs_class_counts`).

    Returns
    -------
    Schedule.

    Raises
    ------
    ConfigError
        naming the field: a bad parameter, missing class counts, a centralized algorithm on
        another topology than 'star'.
    """
    topo, n = cfg.topology, cfg.data.num_nodes
    if counts is None and needs_class_counts(cfg):
        raise ConfigError("topology.name", f"{topo.name!r} is built from the run's partition: "
                          "give its class counts (p2pfl.engine.builder.class_counts(cfg))")
    if algorithm.mixing == "server":
        if topo.name != "star":
            raise ConfigError("topology.name", f"{algorithm.name} is centralized and runs on "
                              f"'star' (hub = server), got {topo.name!r}")
        n += 1
    params = {k: v for k, v in vars(topo).items()
              if k not in ("name", "link_drop", "node_drop") and v is not None}
    try:
        return T.build_schedule(topo.name, n, **params, seed=stream_seed(cfg.seed, "topology"),
                                class_counts=counts if needs_class_counts(cfg) else None)
    except T.ParameterError as err:
        name = "data.num_nodes" if err.name == "n" else f"topology.{err.name}"
        raise ConfigError(name, err.message) from None
    except ValueError as err:
        raise ConfigError("topology", str(err)) from None


def check_mixing(algorithm: Algorithm, schedule: T.Schedule, t: int,
                 graph: nx.Graph | None = None) -> nx.Graph:
    """Refuse round t's graph if the algorithm cannot mix on it, or if the schedule cannot make it.

    Parameters
    ----------
    algorithm : the run's algorithm.
    schedule : the topology.
    t : round (0-based here, as `at` counts).
    graph : the graph (default: the schedule's of round t).

    Returns
    -------
    nx.Graph, the graph checked.

    Raises
    ------
    ConfigError
        naming the round.
    UserCodeError
        when a schedule function of one's own fails.
    """
    try:
        graph = schedule.at(t) if graph is None else graph
        if graph.number_of_nodes() != schedule.n:
            raise ValueError(f"the graph has {graph.number_of_nodes()} nodes, the schedule "
                             f"says n = {schedule.n}")
        if algorithm.mixing == "doubly_stochastic":
            T.check_doubly_stochastic(T.doubly_stochastic(graph, sparse=True))
        else:
            T.check_column_stochastic(T.column_stochastic(graph, sparse=True))
    except ValueError as err:
        where = f" (the graph of round {t})" if t else ""
        raise ConfigError("topology", f"{algorithm.name} needs "
                          f"{algorithm.mixing.replace('_', '-')} mixing{where}: {err}") from None
    except Exception as err:  # a schedule of one's own, failing in its own code
        raise UserCodeError(schedule_name(schedule), err, t + 1) from err
    return graph


def unchecked_graphs(schedule: T.Schedule) -> bool:
    """Whether graphs after check_topology's window still need check_mixing in their round.

    A function of one's own without a period (the library's schedules build valid graphs).

    Parameters
    ----------
    schedule : the topology.

    Returns
    -------
    bool.
    """
    return isinstance(schedule, T.FunctionSchedule) and schedule.period is None


def check_topology(algorithm: Algorithm, schedule: T.Schedule, rounds: int) -> None:
    """Refuse a topology whose mixing matrix or connectivity the algorithm cannot work with.

    The graphs of a period (or of the first rounds) are checked before round 0, and their union
    must be strongly connected.

    Parameters
    ----------
    algorithm : the run's algorithm (a centralized one is not checked).
    schedule : the topology.
    rounds : the run's rounds.

    Raises
    ------
    ConfigError
        naming topology (or the round, as `check_mixing`).
    """
    if algorithm.mixing == "server":
        return
    window = 1 if schedule.period == 1 else min(rounds, schedule.period or CONNECTIVITY_WINDOW)
    # every graph of a period (or of the first rounds) before round 0, each built once
    checked = (check_mixing(algorithm, schedule, t) for t in range(window))
    if not T.union_is_strongly_connected(schedule.n, checked):
        what = "graph" if window == 1 else f"union of the graphs of rounds 0..{window - 1}"
        raise ConfigError("topology", f"the {what} is not strongly connected: {algorithm.name} "
                          "cannot reach the network average")
