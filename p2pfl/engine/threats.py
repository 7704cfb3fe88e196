"""A run's Byzantine nodes and privacy noise, from its [byzantine] and [privacy] tables, and the
record of the Byzantine set in the run directory (byzantine.json)."""

from __future__ import annotations

from typing import Any

import numpy as np

import topologies as T
from p2pfl.config import Config, ConfigError
from p2pfl.config.threats import byzantine_count
from p2pfl.context import Byzantine, Privacy
from p2pfl.core.seeding import stream_seed

BYZANTINE_RECORD = "byzantine.json"


def byzantine_of(cfg: Config, schedule: T.Schedule) -> Byzantine | None:
    """The run's Byzantine nodes and attack, or None.

    A fraction or a count is placed by `byzantine.placement` on the graph of round 0 (random:
    from the run's (seed, "byzantine") stream).

    Parameters
    ----------
    cfg : the config.
    schedule : the run's topology.

    Returns
    -------
    Byzantine, or None when no node is.
    """
    from algorithms.attacks import ATTACK_PARAMS

    b = cfg.byzantine
    count = byzantine_count(b.nodes, cfg.data.num_nodes)
    if count == 0:
        return None
    if isinstance(b.nodes, list):
        nodes = sorted(b.nodes)
    else:
        graph = schedule.at(0, None) if schedule.needs_losses else schedule.at(0)
        nodes = T.placement(graph, count, b.placement,
                            seed=stream_seed(cfg.seed, "byzantine")).tolist()
    params = {k: float(getattr(b, k)) for k in ATTACK_PARAMS[b.attack]}
    return Byzantine(tuple(int(i) for i in nodes), b.attack, params)


def privacy_of(cfg: Config) -> Privacy | None:
    """The run's privacy noise, or None.

    Parameters
    ----------
    cfg : the config.

    Returns
    -------
    Privacy, or None when [privacy] sigma is 0.
    """
    p = cfg.privacy
    return Privacy(p.sigma, p.clip, p.delta, p.accounting) if p.sigma > 0 else None


def check_one_process(cfg: Config, distributed: bool) -> None:
    """Byzantine nodes, robust aggregation and private gossip run in one process.

    Parameters
    ----------
    cfg : the config.
    distributed : whether the run is sharded over processes.

    Raises
    ------
    ConfigError
        naming the section or algorithm.aggregator of a distributed run that sets it.
    """
    if not distributed:
        return
    for name, on in (("byzantine", byzantine_count(cfg.byzantine.nodes, cfg.data.num_nodes)),
                     ("privacy", cfg.privacy.sigma > 0),
                     ("algorithm.aggregator",
                      getattr(cfg.algorithm, "aggregator", "mean") != "mean")):
        if on:
            raise ConfigError(name, "runs in one process (the neighbourhoods and the noise are "
                              "gathered whole); a distributed run leaves it out")


def byzantine_record(byzantine: Byzantine | None, cfg: Config) -> dict[str, dict[str, Any]]:
    """byzantine.json of a run with Byzantine nodes: the set, how it was chosen, the attack.

    Parameters
    ----------
    byzantine : the run's Byzantine nodes, or None.
    cfg : the config.

    Returns
    -------
    dict {file name: record}; empty without Byzantine nodes.
    """
    if byzantine is None:
        return {}
    b, n = cfg.byzantine, cfg.data.num_nodes
    how = "listed" if isinstance(b.nodes, list) else b.placement
    honest = np.ones(n, dtype=bool)
    honest[list(byzantine.nodes)] = False
    return {BYZANTINE_RECORD: {"nodes": list(byzantine.nodes), "count": len(byzantine.nodes),
                               "of": n, "placement": how,
                               "attack": byzantine.attack, "params": byzantine.params,
                               "honest": np.flatnonzero(honest).tolist()}}
