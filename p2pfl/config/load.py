"""Building, validating and overriding configs: TOML file or dict -> validated `Config`."""

from __future__ import annotations

import copy
import dataclasses
import re
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, get_type_hints

import numpy as np

from p2pfl.config.algorithm import build_algorithm
from p2pfl.config.sections import (
    _RANGES,
    ByzantineConfig,
    Config,
    ConfigError,
    DataConfig,
    EngineConfig,
    EvalConfig,
    ModelConfig,
    NetworkConfig,
    PrivacyConfig,
    TopologyConfig,
    _choices,
    coerce,
)
from p2pfl.config.threats import check_byzantine, check_privacy
from p2pfl.config.topology import build_topology, option_types
from p2pfl.options import AlgorithmOptions, check_number, check_values
from topologies import ParameterError, did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _build_section(cls: type, values: Any, prefix: str) -> Any:
    if not isinstance(values, dict):
        raise ConfigError(prefix, f"must be a table, got {values!r}")
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        hint = did_you_mean(unknown[0], known, f"{prefix}.")
        raise ConfigError(f"{prefix}.{unknown[0]}",
                          f"{hint}unknown field (allowed: {', '.join(sorted(known))})")
    kwargs = {k: coerce(v, hints[k], f"{prefix}.{k}") for k, v in values.items()}
    return cls(**kwargs)


_SECTIONS = {
    "data": DataConfig,
    "model": ModelConfig,
    "eval": EvalConfig,
    "engine": EngineConfig,
    "network": NetworkConfig,
    "byzantine": ByzantineConfig,
    "privacy": PrivacyConfig,
}


def config_from_dict(raw: dict[str, Any]) -> Config:
    """Build and validate a `Config` from a plain nested dict (as parsed from TOML).

    Parameters
    ----------
    raw : {section: table, ...}, [[compare]] variants under "compare".

    Returns
    -------
    Config, with what the algorithm implies applied, every variant checked.

    Raises
    ------
    ConfigError
        naming the first bad field: an unknown field or value, a wrong type, a value out of
        range, a [study] table, variants whose labels share a run folder.
    """
    top_hints = get_type_hints(Config)
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _SECTIONS:
            kwargs[key] = _build_section(_SECTIONS[key], value, key)
        elif key == "algorithm":
            kwargs[key] = build_algorithm(value, key, compare_root=bool(raw.get("compare")))
        elif key == "topology":
            kwargs[key] = build_topology(value, key, compare_root=bool(raw.get("compare")))
        elif key == "compare":
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise ConfigError("compare", "must be an array of tables ([[compare]])")
            kwargs[key] = value
        elif key == "study":
            raise ConfigError("study", "a [study] table is run by `p2pfl study CONFIG` (or "
                              "analysis.study.run_study), not as one experiment")
        elif key in top_hints:
            kwargs[key] = coerce(value, top_hints[key], key)
        else:
            raise ConfigError(key, f"{did_you_mean(key, top_hints)}unknown field (allowed: "
                              f"{', '.join(sorted(top_hints))})")
    cfg = _with_implied(Config(**kwargs))
    # A [[compare]] root is never run itself: only its variants are checked against their
    # algorithm (its own algorithm name may be a placeholder).
    (check_fields if cfg.compare else validate)(cfg)
    folders: dict[str, int] = {}
    for i, variant in enumerate(cfg.compare):
        try:
            validate(with_overrides(cfg, {**variant_overrides(variant), "compare": None}))
        except ConfigError as err:
            raise ConfigError(f"compare[{i}].{err.field}", err.message) from None
        folder = folder_name(variant_label(variant))
        if folder in folders:
            raise ConfigError(f"compare[{i}].label", f"{variant_label(variant)!r} runs in the "
                              f"folder {folder!r} of compare[{folders[folder]}]: give the "
                              "variants distinct labels")
        folders[folder] = i
    return cfg


def _with_implied(cfg: Config) -> Config:
    """`cfg` with the settings its algorithm implies (`Algorithm.implied`) filled in where the
    config left them unset (""), and the remaining unset ones at their plain defaults."""
    from algorithms import ALGORITHMS

    if cfg.compare or cfg.algorithm.name not in ALGORITHMS:
        return cfg  # a [[compare]] root is never run; an unknown name fails in validation
    algorithm = ALGORITHMS[cfg.algorithm.name]
    implied = {"topology.selection": "random", "algorithm.variant": algorithm.default_variant,
               **({"algorithm.order": algorithm.paper_order} if algorithm.orders else {}),
               **algorithm.implied(cfg)}
    for dotted, value in implied.items():
        section, key = dotted.split(".")
        part = getattr(cfg, section)
        if getattr(part, key) == "":
            cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(part, **{key: value})})
    return cfg


def _check_dtype_range(cfg: Config) -> None:
    """Refuse a float option beyond the largest value of the run's dtype (it would overflow to
    inf, or fail, the first time it enters a tensor)."""
    largest = float(np.finfo(cfg.engine.dtype).max)
    for section in ("algorithm", "topology", "data"):
        for field in dataclasses.fields(getattr(cfg, section)):
            value = getattr(getattr(cfg, section), field.name)
            if isinstance(value, float) and abs(value) > largest:
                raise ConfigError(f"{section}.{field.name}", f"= {value:g} overflows "
                                  f"engine.dtype {cfg.engine.dtype} (largest {largest:.3g})")


def _check_range(name: str, value: float, bounds: tuple) -> None:
    low, high, low_incl, high_incl = bounds
    why = check_number(value, low, high, not low_incl, not high_incl)
    if why:
        raise ConfigError(name, why)


def validate(cfg: Config) -> None:
    """Check a config: `check_fields`, the algorithm's options, [network], [byzantine], [privacy].

    Every [algorithm] field the chosen algorithm does not read must be at its default, and
    [network] fields take effect only when the network is enabled.

    Parameters
    ----------
    cfg : the config.

    Raises
    ------
    ConfigError
        naming the field.
    """
    check_fields(cfg)
    from algorithms import ALGORITHMS

    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)  # refuses unread options
    _check_network(cfg, algorithm)
    check_byzantine(cfg)
    check_privacy(cfg)


def _check_network(cfg: Config, algorithm: Any) -> None:
    """[network] fields take effect only when it is enabled; overlap is Push-Sum's."""
    net, default = cfg.network, NetworkConfig()
    if not net.enabled:
        for f in fields(NetworkConfig):
            if getattr(net, f.name) != getattr(default, f.name):
                raise ConfigError(f"network.{f.name}", "is set but network.enabled is false: "
                                  "enable the simulated network, or leave it out")
    if not net.overlap:
        for name in ("delays", "max_delay"):
            if getattr(net, name) != getattr(default, name):
                raise ConfigError(f"network.{name}", "is set but network.overlap is false: "
                                  "only overlapped messages are late")
    for name, needs in (("straggler_factor", net.stragglers), ("slow_link_factor", net.slow_links),
                        ("slow_link_latency_s", net.slow_links),
                        ("slow_link_gbps", net.slow_links)):
        if getattr(net, name) != getattr(default, name) and needs == 0:
            what = "stragglers" if name == "straggler_factor" else "slow_links"
            raise ConfigError(f"network.{name}", f"is set but network.{what} is 0: nothing is "
                              "that slow")
    if net.model == "ideal":
        for name in ("uplink_gbps", "downlink_gbps", "underlay"):
            if getattr(net, name) != getattr(default, name):
                raise ConfigError(f"network.{name}", "is set but network.model is 'ideal' "
                                  "(every message has its link to itself): set model = 'flow'")
    if net.overlap and not algorithm.supports_overlap:
        from algorithms import ALGORITHMS

        able = [name for name, cls in ALGORITHMS.items() if cls.supports_overlap]
        raise ConfigError("network.overlap", f"{cfg.algorithm.name} does not mix messages that "
                          f"arrive late; overlap (messages added when they arrive) is for "
                          f"{', '.join(able)}")


def check_fields(cfg: Config) -> None:
    """Check names against the registries and numbers against their ranges.

    Parameters
    ----------
    cfg : the config.

    Raises
    ------
    ConfigError
        naming the field: an unknown value, a number out of range, and settings that contradict
        each other (local_epochs and local_steps both 0, bf16 without float32, compile with the
        loop executor, ...).
    """
    for (section, key), allowed in _choices().items():
        obj = getattr(cfg, section) if section else cfg
        value = getattr(obj, key)
        if value not in allowed:
            name = f"{section}.{key}" if section else key
            raise ConfigError(name, f"{did_you_mean(value, allowed)}unknown value {value!r} "
                              f"(allowed: {', '.join(a if a else repr(a) for a in allowed)})")
    for (section, key), bounds in _RANGES.items():
        obj = getattr(cfg, section) if section else cfg
        _check_range(f"{section}.{key}" if section else key, getattr(obj, key), bounds)
    for section in ("topology", "algorithm", "network", "byzantine", "privacy"):
        try:
            check_values(getattr(cfg, section))
        except ParameterError as err:
            raise ConfigError(f"{section}.{err.name}", err.message) from None
    _check_dtype_range(cfg)
    alg = cfg.algorithm
    if alg.local_epochs == 0 and alg.local_steps == 0:
        raise ConfigError("algorithm.local_steps", "local_epochs and local_steps are both 0")
    if cfg.engine.precision == "bf16" and cfg.engine.dtype != "float32":
        raise ConfigError("engine.precision", "bf16 mixed precision keeps float32 master "
                          f"parameters; engine.dtype is {cfg.engine.dtype} (set it to float32)")
    if cfg.engine.compile and cfg.engine.executor == "loop":
        raise ConfigError("engine.compile", "compiles the vectorized population; the loop "
                          "executor runs plain modules (set engine.executor = \"vectorized\")")


def _parse_value(text: str) -> Any:
    """A --set value: a TOML literal (number, bool, quoted string, array) or else a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _set_path(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `dotted` in `raw`; None removes it (its field goes back to its default); a table value
    merges into the table there, key by key (as TOML's `algorithm.lr = 0.05` in a [[compare]]
    table, or --set 'algorithm={lr=0.05}', mean), so the table's other fields keep their
    values."""
    *parents, leaf = dotted.split(".")
    node = raw
    for part in parents:
        child = node.setdefault(part, {})  # an empty table: a misspelt one is still refused
        if not isinstance(child, dict):
            raise ConfigError(dotted, f"'{part}' is not a table")
        node = child
    if value is None:
        node.pop(leaf, None)
        return
    if isinstance(value, dict) and isinstance(node.setdefault(leaf, {}), dict):
        for key, inner in value.items():
            _set_path(node[leaf], str(key), inner)
        return
    node[leaf] = value


KEPT_ACROSS_TOPOLOGIES = ("window", "link_drop", "node_drop")


# what a config resolves for its algorithm (`_with_implied`): unset again when an override names
# another algorithm, which resolves its own
IMPLIED_BY_ALGORITHM = ("algorithm.variant", "algorithm.order", "topology.selection")


def _given(overrides: dict[str, Any], dotted: str) -> bool:
    """Whether `overrides` set the field `dotted` ("section.key"), alone or in a table."""
    part, key = dotted.split(".")
    table = overrides.get(part)
    return dotted in overrides or (isinstance(table, dict) and key in table)


def _at_old_defaults(table: dict[str, Any], name: str) -> list[str]:
    """The fields of an [algorithm] table at the defaults of its algorithm `name` (none for an
    unknown name, which fails later with its own message)."""
    from algorithms import ALGORITHMS
    from p2pfl.config.algorithm import algorithm_defaults

    if name not in ALGORITHMS:
        return []
    defaults = algorithm_defaults(name)
    return [k for k, v in table.items() if k != "name" and k in defaults and v == defaults[k]]


def _names_given(section: str, key: str, value: Any) -> list[Any]:
    """The name the override `key = value` gives [section]: [name], [None] where it removes the
    name, [] where it names none."""
    if key == f"{section}.name":
        return [value]
    return [value["name"]] if key == section and isinstance(value, dict) and (
        "name" in value) else []


def _apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Set every dotted override in `raw` (None removes the key), after two resets.

    One that names another topology replaces the [topology] table but for
    KEPT_ACROSS_TOPOLOGIES and the keys the new topology takes and the old one does not (a
    [[compare]] root keeps them for its variants); the options of the topology before are not
    the new one's. One that names another algorithm unsets what the config resolved for the
    algorithm before (IMPLIED_BY_ALGORITHM) and the [algorithm] fields at the defaults of the
    algorithm before (`_at_old_defaults`), unless the overrides set them: the new algorithm
    runs at its own defaults (its paper's rho, momentum, ...), not at the other's. A name
    removed (None) names the default topology or algorithm.
    """
    for section in ("topology", "algorithm"):
        default = TopologyConfig.name if section == "topology" else AlgorithmOptions.name
        names = [default if n is None else n for k, v in overrides.items()
                 for n in _names_given(section, k, v)]
        table = raw.get(section)
        if not (names and isinstance(table, dict) and table.get("name", default) != names[-1]):
            continue
        if section == "topology":
            old, new = option_types(table.get("name", default)), option_types(names[-1])
            raw[section] = {k: v for k, v in table.items() if k in KEPT_ACROSS_TOPOLOGIES
                            or (k in new and k not in old)}
            continue
        for dotted in IMPLIED_BY_ALGORITHM:
            part, key = dotted.split(".")
            if not _given(overrides, dotted) and isinstance(raw.get(part), dict) and (
                    key in raw[part]):
                raw[part][key] = ""
        for key in _at_old_defaults(table, table.get("name", default)):
            if not _given(overrides, f"algorithm.{key}"):
                del table[key]
    for key, value in overrides.items():
        _set_path(raw, key, value)


def variant_label(variant: dict[str, Any]) -> str:
    """A [[compare]] variant's label: its `label`, else its overrides as key=value.

    Parameters
    ----------
    variant : one [[compare]] table.

    Returns
    -------
    str.
    """
    overrides = variant_overrides(variant)
    return str(variant.get("label") or ", ".join(f"{k}={v}" for k, v in overrides.items()))


def folder_name(label: str) -> str:
    """The run folder of a variant label.

    Parameters
    ----------
    label : the variant's label.

    Returns
    -------
    str of letters, digits, '_', '.' and '-' only, lower case, never '.', '..' or a hidden name
    ("run" when nothing is left).
    """
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-.").lower() or "run"


def variant_overrides(variant: dict[str, Any]) -> dict[str, Any]:
    """The dotted-key overrides of one [[compare]] table (everything but its label).

    Parameters
    ----------
    variant : one [[compare]] table.

    Returns
    -------
    dict {dotted key: value}.
    """
    return {k: v for k, v in variant.items() if k != "label"}


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """Dotted-key overrides from the command line.

    Parameters
    ----------
    items : ['algorithm.lr=0.05', ...]; each value is parsed as a TOML value (else a string).
        TOML has no null, so no item removes a key (the Python API's None does).

    Returns
    -------
    dict, {'algorithm.lr': 0.05, ...}.

    Raises
    ------
    ConfigError
        naming --set for an item that is not key=value.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--set", f"expected key=value, got {item!r}")
        out[key.strip()] = _parse_value(text.strip())
    return out


def with_overrides(cfg: Config, overrides: dict[str, Any]) -> Config:
    """A new validated config with dotted-key overrides applied.

    [[compare]] variants are kept (each checked against the new root): overriding `rounds` of a
    comparison leaves a comparison. A value of None removes the key, so its field goes back to its
    default: {"topology.path": None} before `p2pfl.run(cfg, topology=G)`, whose object replaces
    what the config names; {"compare": None} drops the variants (one variant's config is
    `with_overrides(cfg, {**variant_overrides(v), "compare": None})`).

    Parameters
    ----------
    cfg : the config.
    overrides : {dotted key: value, or None to remove it}; a table value merges key by key.

    Returns
    -------
    Config.

    Raises
    ------
    ConfigError
        naming the field an override makes invalid.
    """
    raw = cfg.to_dict()
    _apply_overrides(raw, overrides)
    return config_from_dict(raw)


def config_with_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> Config:
    """A validated config from a plain nested dict with dotted-key overrides applied.

    As `with_overrides` (None removes a key; [[compare]] variants are kept), from a dict.

    Parameters
    ----------
    raw : a config dict (e.g. a run's config.json); not changed.
    overrides : {dotted key: value, or None to remove it}.

    Returns
    -------
    Config.

    Raises
    ------
    ConfigError
        naming the invalid field.
    """
    raw = copy.deepcopy(raw)
    _apply_overrides(raw, overrides)
    return config_from_dict(raw)


def read_toml(path: str | Path) -> dict[str, Any]:
    """The parsed TOML file.

    Parameters
    ----------
    path : the file.

    Returns
    -------
    dict of its tables.

    Raises
    ------
    ConfigError
        naming config when the file is missing, unreadable, not UTF-8 or not valid TOML.
    """
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError("config", f"file not found: {path}") from None
    except OSError as err:
        raise ConfigError("config", f"cannot read {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError("config", f"{path} is not UTF-8 text: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError("config", f"{path} is not valid TOML: {err}") from None


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> Config:
    """Read a TOML experiment file, apply dotted-key overrides, validate.

    Parameters
    ----------
    path : the TOML file.
    overrides : {dotted key: value, or None to remove it}, or None.

    Returns
    -------
    Config.

    Raises
    ------
    ConfigError
        naming the problem (as `read_toml` and `config_from_dict`).
    """
    raw = read_toml(path)
    _apply_overrides(raw, overrides or {})
    return config_from_dict(raw)
