"""The [byzantine] and [privacy] tables: what they may hold, and which algorithms take them."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from p2pfl.config.sections import ByzantineConfig, Config, ConfigError, PrivacyConfig
from topologies.privacy import LINEAR_LIMIT, gaussian_coefficient


def byzantine_count(nodes: Any, n: int) -> int:
    """How many Byzantine nodes `[byzantine] nodes` asks for among n.

    Parameters
    ----------
    nodes : a fraction in [0, 1) (float: round(fraction * n)), a count (int) or a list of ids.
    n : the run's nodes.

    Returns
    -------
    int, the count.

    Raises
    ------
    ConfigError
        naming byzantine.nodes for anything else, an id outside 0..n-1 or given twice, and a
        set that leaves no honest node.
    """
    field = "byzantine.nodes"
    if isinstance(nodes, list):
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in nodes):
            raise ConfigError(field, f"must list node ids (integers), got {nodes!r}")
        bad = [i for i in nodes if not 0 <= i < n]
        if bad:
            raise ConfigError(field, f"node {bad[0]} is not among the run's nodes 0..{n - 1}")
        if len(set(nodes)) != len(nodes):
            raise ConfigError(field, f"lists a node twice: {nodes!r}")
        count = len(nodes)
    elif isinstance(nodes, int) and not isinstance(nodes, bool):
        if nodes < 0:
            raise ConfigError(field, f"a count must be >= 0, got {nodes}")
        count = nodes
    elif isinstance(nodes, float):
        if not (math.isfinite(nodes) and 0 <= nodes < 1):
            raise ConfigError(field, f"a fraction must be in [0, 1), got {nodes!r}")
        count = round(nodes * n)
    else:
        raise ConfigError(field, "must be a fraction in [0, 1), a count or a list of node ids, "
                          f"got {nodes!r}")
    if count >= n:
        raise ConfigError(field, f"makes {count} of the {n} nodes Byzantine: leave at least one "
                          "honest node")
    return count


def _away_from_default(section: Any, default: Any, names: tuple[str, ...]) -> str | None:
    """The first of `names` whose value differs from its default, or None."""
    return next((k for k in names if getattr(section, k) != getattr(default, k)), None)


def _screening_algorithms() -> list[str]:
    """The algorithms whose gossip goes through robust aggregation (they read `aggregator`)."""
    from algorithms import ALGORITHMS

    return [name for name, cls in ALGORITHMS.items()
            if "aggregator" in {f.name for f in dataclasses.fields(cls.Options)}]


def check_byzantine(cfg: Config) -> None:
    """Check [byzantine] against the run.

    Parameters
    ----------
    cfg : the config.

    Raises
    ------
    ConfigError
        naming the field: a field set while no node is Byzantine, another attack's parameter set,
        a placement with a list of ids, an algorithm whose gossip has no robust aggregation,
        clique averaging (its gradients bypass the attack), an ALIE z_max that no honest
        majority gives.
    """
    from algorithms.attacks import ATTACK_PARAMS, alie_z

    b, default = cfg.byzantine, ByzantineConfig()
    count = byzantine_count(b.nodes, cfg.data.num_nodes)
    others = tuple(f.name for f in dataclasses.fields(ByzantineConfig) if f.name != "nodes")
    if count == 0:
        name = _away_from_default(b, default, others)
        if name:
            raise ConfigError(f"byzantine.{name}", "is set but byzantine.nodes makes no node "
                              "Byzantine: give nodes (a fraction, a count or ids), or leave it out")
        return
    if isinstance(b.nodes, list) and b.placement != default.placement:
        raise ConfigError("byzantine.placement", "places a fraction or a count of nodes; "
                          "byzantine.nodes lists them already")
    params = {k for keys in ATTACK_PARAMS.values() for k in keys}
    name = _away_from_default(b, default, tuple(sorted(params - set(ATTACK_PARAMS[b.attack]))))
    if name:
        owner = next(a for a, keys in ATTACK_PARAMS.items() if name in keys)
        raise ConfigError(f"byzantine.{name}", f"is read by the {owner} attack only (attack is "
                          f"{b.attack!r})")
    able = _screening_algorithms()
    if cfg.algorithm.name not in able:
        raise ConfigError("byzantine", f"{cfg.algorithm.name} does not gossip through robust "
                          f"aggregation; Byzantine nodes attack {', '.join(able)}")
    if getattr(cfg.algorithm, "clique_averaging", False):
        raise ConfigError("algorithm.clique_averaging", "sends each node's gradient to its clique "
                          "outside the attack (the attackers' would be honest): leave it out "
                          "with [byzantine]")
    if b.attack == "alie" and b.z == 0 and not math.isfinite(alie_z(cfg.data.num_nodes, count)):
        raise ConfigError("byzantine.z", f"ALIE's z_max needs fewer than half the nodes "
                          f"Byzantine ({count} of {cfg.data.num_nodes}): set z")


def check_privacy(cfg: Config) -> None:
    """Check [privacy] against the run.

    Parameters
    ----------
    cfg : the config.

    Raises
    ------
    ConfigError
        naming the field: clip or delta set without sigma, sigma without clip, an algorithm or
        an order whose rounds are not "add noise, then gossip", clique averaging (it sends raw
        gradients), a robust aggregator or Byzantine nodes beside the noise (the accounting is
        for plain gossip among honest nodes).
    """
    p, default = cfg.privacy, PrivacyConfig()
    if p.sigma == 0:
        name = _away_from_default(p, default, ("clip", "delta", "accounting"))
        if name:
            raise ConfigError(f"privacy.{name}", "is set but privacy.sigma is 0: give the noise "
                              "multiplier, or leave it out")
        return
    if p.clip == 0:
        raise ConfigError("privacy.clip", "must be > 0 with privacy.sigma: the noise is scaled "
                          "to a bounded update")
    if not math.isfinite(gaussian_coefficient(2.0, p.sigma)):
        raise ConfigError("privacy.sigma", f"{p.sigma!r} is so little noise that every privacy "
                          "loss is infinite (2 / sigma^2 overflows); use sigma >= 1e-150, or 0 "
                          "for no noise")
    steps = getattr(cfg.algorithm, "gossip_steps", 1)
    floats = steps * cfg.data.num_nodes**2 * cfg.rounds * (cfg.rounds + 1) // 2
    if p.accounting == "linear" and floats > LINEAR_LIMIT:
        raise ConfigError("privacy.accounting", f"'linear' would hold {floats:,} floats for "
                          f"{cfg.data.num_nodes} nodes, {cfg.rounds} rounds and {steps} gossip "
                          f"steps (limit {LINEAR_LIMIT:,}): use 'reach', or fewer rounds")
    able = _screening_algorithms()
    if cfg.algorithm.name not in able:
        raise ConfigError("privacy", f"{cfg.algorithm.name} does not gossip a noisy update; "
                          f"private gossip runs with {', '.join(able)}")
    if getattr(cfg.algorithm, "order", "atc") != "atc":
        raise ConfigError("algorithm.order", "is 'cta', but [privacy] accounts the noisy update "
                          "gossiped in its own round: set algorithm.order = \"atc\"")
    if getattr(cfg.algorithm, "clique_averaging", False):
        raise ConfigError("algorithm.clique_averaging", "sends each node's raw gradient to its "
                          "clique without noise, which [privacy] does not account: leave it out")
    if cfg.algorithm.aggregator != "mean":
        raise ConfigError("algorithm.aggregator", f"is {cfg.algorithm.aggregator!r}; the "
                          "privacy accounting is for plain gossip (aggregator = \"mean\")")
    if byzantine_count(cfg.byzantine.nodes, cfg.data.num_nodes):
        raise ConfigError("privacy", "the accounting assumes honest-but-curious nodes; a run "
                          "with Byzantine nodes has no [privacy]")
