"""What a study runs: its algorithms, topologies, sweeps and seeds, from Python or a `[study]`
table.

A topology is a spec string (``"exponential:directed=false"``), a table of [topology] fields
(``{"name": "exponential", "directed": False}``), or, from Python, a topology object (a networkx
graph, a list of graphs, a callable t -> graph, a `topologies.Schedule`, mixing matrices) or a
topology factory (a callable taking `class_counts`, and `n` and `seed` if it names them: built
for each cell from its partition, `analysis.study_measure`) given with its label. A `Sweep` runs
one family over several values of one thing: the number of nodes (``vary="num_nodes"``) or a
topology parameter (``vary="k"``); its `topology` is the family's name, its fixed fields, or a
callable value -> topology object or factory. An `Entry` given as is keeps its overrides (the
design command's entries set each topology's own rounds).

An algorithm is a name (``"sgp"``) or a table of [algorithm] fields with an optional label
(``{"name": "dfedsgpsm", "momentum": 0.9, "rho": 0.05}``), set over the experiment's own
[algorithm] table; without `algorithms` the study runs the experiment's algorithm.

In TOML (`p2pfl study CONFIG` reads the table, every other table is the experiment):

    [study]
    seeds = [0, 1, 2]
    algorithms = ["sgp", {name = "dfedsgpsm", momentum = 0.9, rho = 0.05}]
    target = 0.75                 # optional: the test accuracy of "rounds to target"
    topologies = ["complete", "ring", {label = "exp", name = "exponential", directed = false}]

    [[study.sweep]]
    label = "random_out"
    vary = "k"
    values = [1, 2, 4, 8]
    topology = {name = "random_out"}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from analysis.study_measure import check_gamma, is_factory
from analysis.summary import GAMMA
from p2pfl.config import (
    Config,
    ConfigError,
    config_with_overrides,
    folder_name,
    parse_overrides,
    read_toml,
)
from topologies import did_you_mean

NUM_NODES = "num_nodes"  # a sweep over the number of nodes sets data.num_nodes
STUDY_FIELDS = ("seeds", "target", "target_loss", "algorithms", "topologies", "sweep", "stack",
                "gamma")
SWEEP_FIELDS = ("label", "vary", "values", "topology")
OUTPUT_SUFFIXES = (".csv", ".json", ".png", ".pdf")  # the study's own files in its folder


@dataclass(frozen=True)
class Sweep:
    """One family at several values of `vary` (num_nodes or a topology parameter; with a
    callable `topology`, any name for the x axis)."""

    label: str
    vary: str
    values: Sequence[Any]
    topology: str | Mapping[str, Any] | Callable[[Any], object]


@dataclass(frozen=True)
class Entry:
    """One topology of the study: its label, the config overrides that select it, or the
    Python object it runs on, or the factory that builds one per cell from its partition; a
    sweep's entry names its sweep and value."""

    label: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    obj: object | None = None
    sweep: str = ""
    vary: str = ""
    value: Any = None
    factory: Callable[..., object] | None = None


def object_entry(label: str, item: object, overrides: Mapping[str, Any] | None = None,
                 **sweep: Any) -> Entry:
    """The entry of a topology object, or of a factory (`is_factory`).

    Parameters
    ----------
    label : the entry's label.
    item : the object or factory.
    overrides : dotted-key overrides of the entry, or None.
    **sweep : the sweep fields of a sweep's value (sweep, vary, value).

    Returns
    -------
    Entry.
    """
    return Entry(label, overrides or {}, **{"factory" if is_factory(item) else "obj": item},
                 **sweep)


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of the study: its label (its folder) and the [algorithm] fields it sets."""

    label: str
    overrides: Mapping[str, Any]


@dataclass(frozen=True)
class StudySpec:
    """A `[study]` table: algorithms (names or tables), topologies (spec strings or tables),
    sweeps, seeds, the common target (a test accuracy, or a test loss), how many cells run
    stacked at once (p2pfl.engine.stacked), and the gamma of the effective number of
    neighbours."""

    topologies: Sequence[str | Mapping[str, Any]] = ()
    sweeps: Sequence[Sweep] = ()
    seeds: Sequence[int] = ()
    target: float | None = None
    algorithms: Sequence[str | Mapping[str, Any]] = ()
    target_loss: float | None = None
    stack: int = 1
    gamma: float = GAMMA


def file_stem(label: str) -> str:
    """A label as part of a figure's file name: its folder name without dots.

    The figure's .png and .pdf are added to it.

    Parameters
    ----------
    label : the label.

    Returns
    -------
    str.
    """
    return folder_name(label).replace(".", "_")


def parse_topology(spec: str, where: str = "study.topologies") -> tuple[str, dict[str, Any]]:
    """A topology spec string as a label and overrides.

    Parameters
    ----------
    spec : 'exponential:directed=false:base=3'.
    where : the field's name, for the error.

    Returns
    -------
    tuple (label, {'topology.name': ..., 'topology.<option>': ...}).

    Raises
    ------
    ConfigError
        naming `where` for an empty name or an option that is not key=value.
    """
    name, *options = spec.strip().split(":")
    if not name:
        raise ConfigError(where, f"empty topology name in {spec!r}")
    overrides = {"topology.name": name}
    for option in options:
        try:
            overrides.update(parse_overrides([f"topology.{option}"]))
        except ConfigError:
            raise ConfigError(where, f"{spec!r}: an option is key=value, got {option!r}"
                              ) from None
    return spec.strip(), overrides


def _table_overrides(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """{name, param...} -> {'topology.name': ..., 'topology.param': ...}."""
    if "name" not in table:
        raise ConfigError(where, f"a topology table needs a name, got {dict(table)!r}")
    return {f"topology.{k}": v for k, v in table.items() if k != "label"}


def _table_label(table: Mapping[str, Any]) -> str:
    params = "".join(f":{k}={v}".lower() for k, v in table.items() if k not in ("name", "label"))
    return str(table.get("label") or f"{table['name']}{params}")


def _entry(item: Any, label: str | None, where: str) -> Entry:
    if isinstance(item, Entry):  # built in Python (the design command's, with its rounds)
        return item if label is None else replace(item, label=label)
    if isinstance(item, str):
        spec_label, overrides = parse_topology(item, where)
        return Entry(label or spec_label, overrides)
    if isinstance(item, Mapping) and all(isinstance(k, str) for k in item):
        overrides = _table_overrides(item, where)
        return Entry(label or _table_label(item), overrides)
    if label is None:
        raise ConfigError(where, f"a topology object ({type(item).__name__}) needs a label: "
                          "give the topologies as a dict {label: topology}")
    return object_entry(label, item)


def _sweep_values(sweep: Sweep, where: str) -> list[Any]:
    """The sweep's values as plain numbers, strings or booleans (numpy scalars converted): what
    labels, tables and axes can show."""
    values = [v.item() if isinstance(v, np.generic) else v for v in sweep.values]
    if not values:
        raise ConfigError(f"{where}.values", f"sweep {sweep.label!r} has no values")
    for value in values:
        if not isinstance(value, bool | int | float | str):
            raise ConfigError(f"{where}.values", f"sweep {sweep.label!r}: each value must be a "
                              f"number, a string or a boolean, got {value!r}")
    return values


def _sweep_entries(sweep: Sweep, where: str) -> list[Entry]:
    entries = []
    for value in _sweep_values(sweep, where):
        label = f"{sweep.label} {sweep.vary}={value}"
        nodes = {"data.num_nodes": value} if sweep.vary == NUM_NODES else {}
        if callable(sweep.topology):
            entries.append(object_entry(label, sweep.topology(value), overrides=nodes,
                                        sweep=sweep.label, vary=sweep.vary, value=value))
            continue
        family = ({"name": sweep.topology} if isinstance(sweep.topology, str)
                  else dict(sweep.topology))
        overrides = _table_overrides(family, f"{where}.topology")
        if sweep.vary != NUM_NODES:
            overrides[f"topology.{sweep.vary}"] = value
        entries.append(Entry(label, {**overrides, **nodes}, sweep=sweep.label, vary=sweep.vary,
                             value=value))
    return entries


def study_entries(topologies: Sequence[Any] | Mapping[str, Any],
                  sweeps: Sequence[Sweep] = ()) -> list[Entry]:
    """The study's entries, topologies first, then each sweep's values.

    Labels, and sweep labels, must be distinct as folder names (each runs in OUT/<label>/seed<k>,
    each sweep draws sweep_<label>).

    Parameters
    ----------
    topologies : specs, tables, or {label: spec, table, object or factory}.
    sweeps : the sweeps.

    Returns
    -------
    list of Entry.

    Raises
    ------
    ConfigError
        naming the entry that is malformed or whose label is taken.
    """
    if isinstance(topologies, Mapping):
        entries = [_entry(item, str(label), f"study.topologies[{label!r}]")
                   for label, item in topologies.items()]
    else:
        entries = [_entry(item, None, f"study.topologies[{i}]")
                   for i, item in enumerate(topologies)]
    figures: dict[str, str] = {}  # each sweep draws sweep_<label folder>
    for i, sweep in enumerate(sweeps):
        figure = folder_name(sweep.label)
        if figure in figures:
            raise ConfigError(f"study.sweep[{i}].label", f"{sweep.label!r} and {figures[figure]!r}"
                              f" would share the figure sweep_{figure}: give distinct labels")
        figures[figure] = sweep.label
        entries += _sweep_entries(sweep, f"study.sweep[{i}]")
    if not entries:
        raise ConfigError("study.topologies", "give at least one topology or sweep")
    folders: dict[str, str] = {}
    for entry in entries:
        folder = folder_name(entry.label)
        if folder.endswith(OUTPUT_SUFFIXES):
            raise ConfigError("study.topologies", f"{entry.label!r} would run in the folder "
                              f"{folder!r}, named like the study's output files: another label")
        if folder in folders:
            raise ConfigError("study.topologies", f"{entry.label!r} and {folders[folder]!r} "
                              f"would run in the same folder {folder!r}: give distinct labels")
        folders[folder] = entry.label
    return entries


def study_algorithms(items: Sequence[Any]) -> list[Algorithm]:
    """The study's algorithms from names or tables of [algorithm] fields.

    A table's `label` names it (default: its name and fields); labels must be distinct as folder
    names.

    Parameters
    ----------
    items : names or tables.

    Returns
    -------
    list of Algorithm entries.

    Raises
    ------
    ConfigError
        naming study.algorithms (or the item) for anything else or a label taken twice.
    """
    if isinstance(items, str | Mapping) or not isinstance(items, Sequence):
        raise ConfigError("study.algorithms", f"must be a list of names or tables, got {items!r}")
    algorithms, folders = [], {}
    for i, item in enumerate(items):
        where = f"study.algorithms[{i}]"
        if isinstance(item, str) and item.strip():
            algorithm = Algorithm(item.strip(), {"algorithm.name": item.strip()})
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            fields = {k: v for k, v in item.items() if k != "label"}
            params = "".join(f":{k}={v}" for k, v in fields.items() if k != "name")
            algorithm = Algorithm(str(item.get("label") or f"{item['name']}{params}"),
                                  {f"algorithm.{k}": v for k, v in fields.items()})
        else:
            raise ConfigError(where, f"an algorithm is a name or a table with a name, got "
                              f"{item!r}")
        folder = folder_name(algorithm.label)
        if folder in folders:
            raise ConfigError(where, f"{algorithm.label!r} and {folders[folder]!r} would run in "
                              f"the same folder {folder!r}: give distinct labels")
        folders[folder] = algorithm.label
        algorithms.append(algorithm)
    return algorithms


def _check_keys(table: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}", f"{did_you_mean(key, allowed)}unknown field "
                              f"(allowed: {', '.join(allowed)})")


def check_seeds(seeds: Any, where: str = "study.seeds") -> list[int]:
    """The study's seeds, checked.

    Parameters
    ----------
    seeds : the value given.
    where : the field's name, for the error.

    Returns
    -------
    list of int: non-empty, distinct, >= 0.

    Raises
    ------
    ConfigError
        naming `where` for anything else.
    """
    if (not isinstance(seeds, list | tuple) or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise ConfigError(where, f"must be a non-empty list of integers >= 0, got {seeds!r}")
    if len(set(seeds)) < len(seeds):
        raise ConfigError(where, f"names a seed twice ({seeds}): each seed is one run")
    return list(seeds)


def check_target(target: Any, where: str = "study.target") -> float | None:
    """The study's target accuracy, checked.

    Parameters
    ----------
    target : None, or a test accuracy in (0, 1].
    where : the field's name, for the error.

    Returns
    -------
    float, or None.

    Raises
    ------
    ConfigError
        naming `where` for anything else.
    """
    if target is None:
        return None
    if isinstance(target, bool) or not isinstance(target, int | float) or not 0 < target <= 1:
        raise ConfigError(where, f"must be a test accuracy in (0, 1], got {target!r}")
    return float(target)


def check_target_loss(target: Any, where: str = "study.target_loss") -> float | None:
    """The study's target loss, checked.

    Parameters
    ----------
    target : None, or a test loss > 0.
    where : the field's name, for the error.

    Returns
    -------
    float, or None.

    Raises
    ------
    ConfigError
        naming `where` for anything else.
    """
    if target is None:
        return None
    if (isinstance(target, bool) or not isinstance(target, int | float)
            or not 0 < target < float("inf")):
        raise ConfigError(where, f"must be a test loss > 0, got {target!r}")
    return float(target)


def check_stack(stack: Any, where: str = "study.stack") -> int:
    """The number of cells run stacked at once, checked.

    Parameters
    ----------
    stack : an integer >= 1 (1: one after another).
    where : the field's name, for the error.

    Returns
    -------
    int.

    Raises
    ------
    ConfigError
        naming `where` for anything else.
    """
    if isinstance(stack, bool) or not isinstance(stack, int) or stack < 1:
        raise ConfigError(where, f"must be an integer >= 1 (cells run at once), got {stack!r}")
    return stack


def study_from_table(table: Any) -> StudySpec:
    """The `[study]` table of a TOML config (already parsed) as a StudySpec.

    Parameters
    ----------
    table : the parsed table.

    Returns
    -------
    StudySpec.

    Raises
    ------
    ConfigError
        naming the field that is refused.
    """
    if not isinstance(table, Mapping):
        raise ConfigError("study", f"must be a table, got {table!r}")
    _check_keys(table, STUDY_FIELDS, "study")
    topologies = table.get("topologies", [])
    if not isinstance(topologies, list):
        raise ConfigError("study.topologies", f"must be a list, got {topologies!r}")
    raw_sweeps = table.get("sweep", [])
    if not isinstance(raw_sweeps, list) or not all(isinstance(s, dict) for s in raw_sweeps):
        raise ConfigError("study.sweep", "must be an array of tables ([[study.sweep]])")
    sweeps = []
    for i, raw in enumerate(raw_sweeps):
        where = f"study.sweep[{i}]"
        _check_keys(raw, SWEEP_FIELDS, where)
        missing = [k for k in SWEEP_FIELDS if k not in raw]
        if missing:
            raise ConfigError(f"{where}.{missing[0]}", "is required (a sweep has "
                              f"{', '.join(SWEEP_FIELDS)})")
        if not isinstance(raw["values"], list):
            raise ConfigError(f"{where}.values", f"must be a list, got {raw['values']!r}")
        if not isinstance(raw["topology"], str | dict):
            raise ConfigError(f"{where}.topology", "must be a name or a table of [topology] "
                              f"fields, got {raw['topology']!r}")
        sweeps.append(Sweep(str(raw["label"]), str(raw["vary"]), raw["values"], raw["topology"]))
    seeds = check_seeds(table["seeds"]) if "seeds" in table else []
    if "target" in table and "target_loss" in table:
        raise ConfigError("study.target_loss", "give one target: an accuracy (target) or a "
                          "loss (target_loss)")
    algorithms = table.get("algorithms", [])
    study_algorithms(algorithms)
    return StudySpec(topologies, sweeps, seeds, check_target(table.get("target")), algorithms,
                     check_target_loss(table.get("target_loss")),
                     check_stack(table.get("stack", 1)), check_gamma(table.get("gamma", GAMMA)))


def load_study(path: str, overrides: Mapping[str, Any] | None = None
               ) -> tuple[Config, StudySpec]:
    """A TOML file's experiment and its [study] table.

    Parameters
    ----------
    path : the TOML file.
    overrides : dotted-key overrides of the experiment, or None.

    Returns
    -------
    tuple (Config of every table but [study], StudySpec: empty if it has none).

    Raises
    ------
    ConfigError
        naming the field that is refused.
    """
    raw = read_toml(path)
    table = raw.pop("study", {})
    return config_with_overrides(raw, dict(overrides or {})), study_from_table(table)
