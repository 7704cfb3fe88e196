"""A run's Byzantine nodes and privacy noise, from its [byzantine] and [privacy] tables, and the
record of the Byzantine set in the run directory (byzantine.json): written before round 1 with
the aggregator's assumption checked on the graph of round 1 (algorithms/assumptions.py), and
again by the algorithm when the run finishes, checked on every round's graph."""

from __future__ import annotations

import warnings
from typing import Any

import topologies as T
from p2pfl.config import Config, ConfigError
from p2pfl.config.threats import byzantine_count
from p2pfl.context import Byzantine, Privacy
from p2pfl.core.seeding import stream_seed

BYZANTINE_RECORD = "byzantine.json"
WEAK_ALIE_Z = 0.1  # a default z this close to 0 sends about the honest mean: said once


def byzantine_of(cfg: Config, schedule: T.Schedule) -> Byzantine | None:
    """The run's Byzantine nodes and attack, or None.

    A fraction or a count is placed by `byzantine.placement` on the graph of round 0 (random:
    from the run's (seed, "byzantine") stream). ALIE's z of 0 becomes the default
    `algorithms.attacks.alie_z(N, f)`, so that the parameters hold the z the attack uses.

    Parameters
    ----------
    cfg : the config.
    schedule : the run's topology.

    Returns
    -------
    Byzantine, or None when no node is.
    """
    from algorithms.attacks import ATTACK_PARAMS, alie_z

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
    if b.attack == "alie" and params["z"] == 0:
        params["z"] = alie_z(cfg.data.num_nodes, count)
        if abs(params["z"]) < WEAK_ALIE_Z:
            warnings.warn(f"ALIE's default z is {params['z']:.3g} for {cfg.data.num_nodes} nodes "
                          f"and {count} Byzantine: its messages lie within {WEAK_ALIE_Z} "
                          "standard deviations of the honest mean, close to no attack; set "
                          "byzantine.z for a stronger one", UserWarning, stacklevel=2)
    return Byzantine(tuple(int(i) for i in nodes), b.attack, params,
                     "listed" if isinstance(b.nodes, list) else b.placement)


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


def byzantine_record(byzantine: Byzantine | None, cfg: Config,
                     schedule: T.Schedule) -> dict[str, dict[str, Any]]:
    """byzantine.json of a run with Byzantine nodes, before round 1: the set, how it was chosen,
    the attack, and the aggregator's assumption checked on the graph of round 1 (no faults).

    Parameters
    ----------
    byzantine : the run's Byzantine nodes, or None.
    cfg : the config.
    schedule : the run's topology.

    Returns
    -------
    dict {file name: record}; empty without Byzantine nodes.
    """
    from algorithms.assumptions import AssumptionLedger, AssumptionWarning

    if byzantine is None:
        return {}
    n, options = cfg.data.num_nodes, cfg.algorithm
    graph = schedule.at(0, None) if schedule.needs_losses else schedule.at(0)
    ledger = AssumptionLedger(n, byzantine.nodes, options.aggregator, options.trim,
                              options.clip_radius)
    with warnings.catch_warnings():  # the run warns in the round where it happens
        warnings.simplefilter("ignore", AssumptionWarning)
        ledger.add(0, T.doubly_stochastic(graph, sparse=True))
    return {BYZANTINE_RECORD: byzantine.record(n) | {
        "assumption": ledger.record("the graph of round 1 without faults, before the run")}}
