"""The [topology] table: read into the options class of the topology it names.

A topology's options are its builder's parameters (topologies.REGISTRY); the options class is
`TopologyConfig` (what every topology has) with one field per option, made once per topology.
Keys of an earlier release (the flat `out_degree`, `degree`, `ws_k`, `rewire`, `ba_m`) still
work for one release, with a FutureWarning naming the new key.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from typing import Any

import topologies as T
from p2pfl.config.sections import (
    COMMON,
    OBJECT,
    ConfigError,
    TopologyConfig,
    coerce,
    topology_options,
)
from topologies import did_you_mean

# Every key of the flat [topology] record of the release before, with its default there: a key
# at that default changed nothing and is dropped without a word.
LEGACY = {"out_degree": 10, "directed": True, "base": 2, "rows": 0, "cols": 0, "p": 0.1,
          "degree": 4, "ws_k": 4, "rewire": 0.1, "ba_m": 2, "temperature": 1.0, "path": ""}


def option_types(name: str) -> dict[str, type]:
    """The topology's options (not the common fields).

    Parameters
    ----------
    name : the topology's name.

    Returns
    -------
    dict {option: type}; empty for an unknown name.
    """
    entry = T.REGISTRY.get(name) if isinstance(name, str) else None  # a bad name is refused later
    if entry is None:
        return {}
    return {k: o.type for k, o in entry.options.items() if k not in COMMON}


def _legacy_renames(values: dict[str, Any], renamed: dict[str, str],
                    prefix: str) -> dict[str, Any]:
    """`values` without what a renamed key makes moot: the new key of the flat record of the
    release before, there at its default (its watts_strogatz `rewire` beside the record's `p`,
    Erdos-Renyi's), or, where a table gives both, the old key (the new one wins)."""
    out = dict(values)
    for old, new in renamed.items():
        if old not in values or new not in values:
            continue
        if new in LEGACY and values[new] == LEGACY[new] and all(
                k in values for k in ("out_degree", "ws_k", "ba_m")):  # a flat record
            del out[new]
        else:
            _deprecated(f"{prefix}.{old}", f"is ignored: {prefix}.{new} is given")
            del out[old]
    return out


def _others() -> set[str]:
    """Every option some registered topology takes."""
    return {k for entry in T.REGISTRY.values() for k in entry.options}


def build_topology(values: Any, prefix: str, compare_root: bool) -> TopologyConfig:
    """The [topology] table read into its topology's options class.

    A key that only other topologies take is refused (a key of the flat record of the release
    before is dropped at its default there: it changed nothing); in a [[compare]] root, whose
    variants may name other topologies, it is kept for them.

    Parameters
    ----------
    values : the table, as parsed.
    prefix : its dotted name ("topology", or a variant's).
    compare_root : whether it is a [[compare]] root's.

    Returns
    -------
    TopologyConfig, of the topology's options class.

    Raises
    ------
    ConfigError
        naming the field: not a table, a wrong type, another topology's key, an unknown field.
    """
    if not isinstance(values, dict):
        raise ConfigError(prefix, f"must be a table, got {values!r}")
    name = coerce(values.get("name", TopologyConfig.name), str, f"{prefix}.name")
    if name not in T.REGISTRY and name != OBJECT:
        raise ConfigError(f"{prefix}.name", f"{did_you_mean(name, T.REGISTRY)}unknown value "
                          f"{name!r} (allowed: {', '.join((*T.REGISTRY, OBJECT))})")
    own = {f.name: f.type for f in dataclasses.fields(TopologyConfig)} | option_types(name)
    entry = T.REGISTRY.get(name)
    renamed = dict(entry.renamed) if entry else {}
    values = _legacy_renames(values, renamed, prefix)
    if name == "erdos_renyi" and "directed" not in values and not compare_root:
        warnings.warn(f"{prefix}.directed is not set: erdos_renyi is undirected (its builder's "
                      "default), where the release before built it directed; set "
                      f"{prefix}.directed = true for that graph", FutureWarning, stacklevel=4)
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    others = _others()
    unset = {k for k, o in (entry.options.items() if entry else ())
             if o.default is None or o.default is inspect.Parameter.empty}
    for key, value in values.items():
        if key in renamed:
            _deprecated(f"{prefix}.{key}", f"is now {prefix}.{renamed[key]}")
            kwargs[renamed[key]] = coerce(value, own[renamed[key]], f"{prefix}.{key}")
        elif key in own and value is None and key in unset:
            kwargs[key] = None  # an option without a default, as config.json records it unset
        elif key in own:
            kwargs[key] = coerce(value, _hint(own[key]), f"{prefix}.{key}")
        elif key in LEGACY and value == LEGACY[key]:
            continue  # a flat key of the release before, at its default there: it meant nothing
        elif compare_root and key in others:
            extra[key] = value  # for the variants, each checked against its own topology
        elif key in others:
            takes = sorted(n for n, e in T.REGISTRY.items() if key in e.options)
            raise ConfigError(f"{prefix}.{key}", f"topology {name!r} does not take {key} (got "
                              f"{value!r}; {', '.join(takes)} do); its options: "
                              f"{', '.join(option_types(name)) or 'none'}")
        elif key in LEGACY:
            _deprecated(f"{prefix}.{key}", f"is not read by topology {name!r}: ignored")
        else:
            hint = did_you_mean(key, own, f"{prefix}.") or did_you_mean(key, others, f"{prefix}.")
            raise ConfigError(f"{prefix}.{key}", f"{hint}unknown field (allowed for {name!r}: "
                              f"{', '.join(sorted(own))})")
    cfg = topology_options(name)(**kwargs)
    if extra:  # a [[compare]] root: kept for the variants, which are checked on their own
        cls = dataclasses.make_dataclass("CompareRootTopology", [
            (k, type(v), dataclasses.field(default=v)) for k, v in extra.items()],
            bases=(type(cfg),))
        cfg = cls(**dataclasses.asdict(cfg))
    return cfg


def _hint(tp: Any) -> type:
    """A dataclass field's type as `coerce` takes it (fields made by make_dataclass hold the
    type itself; the common fields' annotations are strings)."""
    return {"int": int, "float": float, "str": str, "bool": bool}.get(tp, tp)


def _deprecated(name: str, message: str) -> None:
    warnings.warn(f"{name} {message} (the old key goes in the next release)", FutureWarning,
                  stacklevel=4)
