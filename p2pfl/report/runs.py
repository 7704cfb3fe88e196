"""What a report knows of a run beyond its records: what its accuracy measures, what its records
count, whether it diverged, and a title that says what was run.

A run directory's config.json names the algorithm; the registry says whether its `test_acc` is
the average model (decentralized) or a server's model, and whether its records are rounds or an
asynchronous run's clock marks. diverged.json says where a run diverged.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p2pfl.config import OBJECT, ConfigError
from p2pfl.config.threats import byzantine_count
from p2pfl.report.results import read_divergence

_SEED_DIR = re.compile(r"seed\d+")
DATASETS = {"fashion_mnist": "Fashion-MNIST", "mnist": "MNIST", "cifar10": "CIFAR-10",
            "cifar100": "CIFAR-100"}
TITLE_WIDTH = 100  # characters per line of a figure's title


def variant_dir(run_dir: Path) -> Path:
    """The folder that names a run: its parent for a `seed<k>` directory, else itself.

    Parameters
    ----------
    run_dir : a run directory.

    Returns
    -------
    Path.
    """
    return run_dir.parent if _SEED_DIR.fullmatch(run_dir.name) else run_dir


def read_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's config.json as a dict.

    Parameters
    ----------
    run_dir : the run directory.

    Returns
    -------
    dict, or None for a directory without one.

    Raises
    ------
    ConfigError
        naming runs when the file is not a JSON object.
    """
    path = run_dir / "config.json"
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError("runs", f"{path} is not valid JSON: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError("runs", f"{path} holds a JSON {type(raw).__name__}, not a config")
    return raw


SERVER = frozenset({  # the built-in algorithms whose test_acc is a server's model
    "fedadam", "fedavg", "fedbuff", "fedcm", "feddyn", "fedfsa", "fedgamma", "fedgloss", "fedgmt",
    "fedlesam", "fedlesam_d", "fedlesam_s", "fedprox", "fedsam", "fedsmoo", "fedspeed",
    "mofedsam", "naive_fedgloss", "scaffold"})
DECENTRALIZED = frozenset({  # ... and those whose test_acc is the nodes' average model
    "adpsgd", "async_sgp", "choco", "dfedavg", "dfedavgm", "dfedsam", "dfedsam_mgs", "dfedsgpm",
    "dfedsgpsm", "dfedsgpsm_s", "dpsgd", "dsgt", "osgp", "push_diging", "push_pull", "sgp"})
ASYNCHRONOUS = frozenset({"adpsgd", "async_sgp", "fedbuff"})  # records are clock marks


def algorithm_kind(name: str | None) -> tuple[str, str]:
    """What an algorithm's test_acc measures and what its records count.

    The built-in algorithms are known by name (a report imports no torch); an algorithm of
    one's own is known where it is registered in this process (`algorithms.register`).

    Parameters
    ----------
    name : an algorithm's name (config.json's), or None.

    Returns
    -------
    (model, unit): model "average model", "server model", or "test_acc" for a name not known
    here; unit "mark" for an asynchronous algorithm (its records are clock marks), else "round".
    """
    registry = sys.modules.get("algorithms")
    cls = getattr(registry, "ALGORITHMS", {}).get(name or "")
    if cls is not None and name not in SERVER | DECENTRALIZED:
        model = "server model" if cls.mixing == "server" else "average model"
        return model, "mark" if issubclass(cls, registry.Asynchronous) else "round"
    unit = "mark" if name in ASYNCHRONOUS else "round"
    if name in SERVER:
        return "server model", unit
    return ("average model" if name in DECENTRALIZED else "test_acc"), unit


@dataclass(frozen=True)
class RunFacts:
    """What a figure or table shows of a run besides its records."""

    key: str  # the variant's name: its seeds share it, and a figure gives it one colour
    model: str  # what test_acc measures: "average model", "server model" or "test_acc"
    unit: str  # what a record counts: "round" or "mark"
    diverged_at: int | None = None  # the round (mark) that diverged, or None
    config: dict[str, Any] | None = None  # config.json


def run_facts(run_dir: Path) -> RunFacts:
    """The facts of a run directory.

    Parameters
    ----------
    run_dir : the run directory.

    Returns
    -------
    RunFacts.

    Raises
    ------
    ConfigError
        as `read_config`.
    """
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    model, unit = algorithm_kind(_get(config, "algorithm.name"))
    divergence = read_divergence(run_dir)
    return RunFacts(variant_dir(run_dir).name, model, unit,
                    divergence["round"] if divergence else None, config)


def _get(config: dict[str, Any] | None, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _common(configs: Sequence[dict[str, Any] | None], dotted: str) -> Any:
    """The value every config has at `dotted`, or None where they differ or lack it."""
    values = [_get(c, dotted) for c in configs]
    first = values[0] if values else None
    return first if all(v == first for v in values) else None


def _data(configs: Sequence[dict[str, Any] | None]) -> list[str]:
    parts = []
    name, nodes = _common(configs, "data.name"), _common(configs, "data.num_nodes")
    if name:
        parts.append(DATASETS.get(name, name))
    if nodes:
        parts.append(f"{nodes} nodes")
    partition = _common(configs, "data.partition")
    if partition == "dirichlet" and _common(configs, "data.alpha") is not None:
        parts.append(f"Dirichlet({_common(configs, 'data.alpha'):g}) labels")
    elif partition:
        parts.append("IID" if partition == "iid" else str(partition))
    model = _common(configs, "model.name")
    if model:
        parts.append(str(model))
    return parts


def _setting(configs: Sequence[dict[str, Any] | None]) -> list[str]:
    parts = []
    for field, say in (("algorithm.name", "{}"), ("algorithm.aggregator", "{} aggregator")):
        value = _common(configs, field)
        if value and not (field == "algorithm.aggregator" and value == "mean"
                          and _common(configs, "byzantine.nodes") in (0, None)):
            parts.append(say.format(value))
    topology = _common(configs, "topology.name")
    if topology:
        directed = " (directed)" if _common(configs, "topology.directed") else ""
        parts.append(("a topology object" if topology == OBJECT else topology) + directed)
    nodes, n = _common(configs, "byzantine.nodes"), _common(configs, "data.num_nodes")
    attack = _common(configs, "byzantine.attack")
    if nodes not in (0, None) and isinstance(n, int):
        try:
            count = byzantine_count(nodes, n)
        except ConfigError:
            count = None
        if count:
            named = {str(_get(c, "byzantine.attack")) for c in configs}
            each = ", ".join(sorted(named - {"none"})) + (" or none" if "none" in named else "")
            kind = (f"Byzantine nodes (attack per curve: {each})" if attack is None else
                    "Byzantine nodes, no attack" if attack == "none" else f"{attack} attackers")
            parts.append(f"{count} {kind}")
    return parts


def _network(configs: Sequence[dict[str, Any] | None]) -> list[str]:
    if not _common(configs, "network.enabled"):
        return []
    parts = []
    factor = _common(configs, "network.slow_factor")
    times = f", {factor:g}x slower" if factor else ""
    for field, what in (("network.stragglers", "node a straggler"),
                        ("network.slow_links", "link slow")):
        value = _common(configs, field)
        if value:  # a fraction: each node (link) is one with this probability, from the seed
            parts.append(f"each {what} w.p. {value:g}{times}")
    horizon = _common(configs, "network.horizon_s")
    if horizon:
        parts.append(f"{horizon:g} simulated s")
    return parts


def title_of(configs: Sequence[dict[str, Any] | None], seeds: int | None = None) -> str:
    """A figure's title from what its runs share: data, nodes, partition, model, algorithm,
    topology, attackers, network; and the number of seeds.

    Parameters
    ----------
    configs : the runs' config.json dicts (None for a run without one).
    seeds : seeds per curve (said where more than one), or None.

    Returns
    -------
    str, wrapped to lines of TITLE_WIDTH characters ("" when the runs share nothing known).
    """
    groups = [", ".join(p) for p in (_data(configs), _setting(configs), _network(configs)) if p]
    if seeds and seeds > 1:
        groups.append(f"mean of {seeds} seeds")
    lines: list[str] = []
    for group in groups:  # a line breaks between groups where it can
        if lines and len(lines[-1]) + 2 + len(group) <= TITLE_WIDTH:
            lines[-1] += f"; {group}"
        else:
            if lines:
                lines[-1] += ";"
            lines.append(group)
    return "\n".join(part for line in lines for part in textwrap.wrap(line, TITLE_WIDTH))
