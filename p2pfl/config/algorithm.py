"""The [algorithm] table: read into the options class of the algorithm it names."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import fields
from typing import Any

from p2pfl.config.sections import ConfigError, coerce
from p2pfl.options import AlgorithmOptions, common_default, field_types
from topologies import did_you_mean


def declared_options() -> dict[str, tuple[dataclasses.Field, type]]:
    """Every [algorithm] field some registered algorithm declares.

    Returns
    -------
    dict {field name: (its dataclasses.Field, its type)}, the first declaration of each.
    """
    from algorithms import ALGORITHMS

    out: dict[str, tuple[dataclasses.Field, type]] = {}
    for cls in ALGORITHMS.values():
        types = field_types(cls.Options)
        for f in fields(cls.Options):
            out.setdefault(f.name, (f, types[f.name]))
    return out


def algorithm_defaults(name: str) -> dict[str, Any]:
    """The default of every declared [algorithm] field as algorithm `name` has it.

    Its own default (its paper's, where it declares one) for a field it reads, the common
    default (p2pfl.options.common_default) for a field it does not.

    Parameters
    ----------
    name : a registered algorithm's name.

    Returns
    -------
    dict {field name: default}.
    """
    from algorithms import ALGORITHMS

    own = {f.name: f.default for f in fields(ALGORITHMS[name].Options)}
    return {k: own.get(k, common_default(f)) for k, (f, _) in declared_options().items()}


def _any_options(name: str) -> type[AlgorithmOptions]:
    """An options class with every declared field: a [[compare]] root's [algorithm] table, which
    may hold settings for the variants' algorithms (each variant is checked against its own).
    An unset field is at the default of the root's algorithm `name` (`algorithm_defaults`)."""
    base = {f.name for f in fields(AlgorithmOptions)}
    defaults = algorithm_defaults(name)
    extra = [(k, tp, dataclasses.field(default=defaults[k], metadata=f.metadata))
             for k, (f, tp) in declared_options().items() if k not in base]
    return dataclasses.make_dataclass("AnyAlgorithmOptions", extra, bases=(AlgorithmOptions,))


def _renamed(values: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`values` with the option names of the release before (algorithms.options.RENAMED) under
    their new names, each with a FutureWarning; a new name given beside its old one wins."""
    from algorithms.options import RENAMED

    out = {}
    for key, value in values.items():
        if key in RENAMED:
            warnings.warn(f"{prefix}.{key} is now {prefix}.{RENAMED[key]} (the old name goes in "
                          "the next release)", FutureWarning, stacklevel=5)
            if RENAMED[key] in values:
                continue
            key = RENAMED[key]
        out[key] = value
    return out


def build_algorithm(values: Any, prefix: str, compare_root: bool) -> AlgorithmOptions:
    """The [algorithm] table read into its algorithm's options class.

    A field that only other algorithms declare is refused unless it is at its common default
    (then it changes nothing).

    Parameters
    ----------
    values : the table, as parsed.
    prefix : its dotted name in the config ("algorithm", or a variant's).
    compare_root : whether it is a [[compare]] root's (then one options class holds every field).

    Returns
    -------
    AlgorithmOptions, of the named algorithm's class.

    Raises
    ------
    ConfigError
        naming the field: not a table, an unknown algorithm name, a value of the wrong type, an
        unknown field, or another algorithm's field away from its default.
    """
    from algorithms import ALGORITHMS

    if not isinstance(values, dict):
        raise ConfigError(prefix, f"must be a table, got {values!r}")
    name = coerce(values.get("name", AlgorithmOptions.name), str, f"{prefix}.name")
    if name not in ALGORITHMS:
        raise ConfigError(f"{prefix}.name", f"{did_you_mean(name, ALGORITHMS)}unknown value "
                          f"{name!r} (allowed: {', '.join(ALGORITHMS)})")
    cls = _any_options(name) if compare_root else ALGORITHMS[name].Options
    own, declared = field_types(cls), declared_options()
    kwargs: dict[str, Any] = {}
    values = _renamed(values, prefix)
    for key, value in values.items():
        if key in own:
            kwargs[key] = coerce(value, own[key], f"{prefix}.{key}")
            continue
        if key not in declared:
            raise ConfigError(f"{prefix}.{key}", f"{did_you_mean(key, own, f'{prefix}.')}unknown "
                              f"field (allowed: {', '.join(sorted(own))})")
        other, tp = declared[key]
        if coerce(value, tp, f"{prefix}.{key}") != common_default(other):
            raise ConfigError(f"{prefix}.{key}", f"{name} does not use {key} (got {value!r}); "
                              f"leave it at {common_default(other)!r} or pick an algorithm that "
                              "takes it (docs/algorithms.md)")
    return cls(**kwargs)
