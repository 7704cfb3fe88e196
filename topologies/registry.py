"""The named topologies: a named topology is its builder function, registered once.

    @register
    def exponential(n: int, base: int = 2, directed: bool = True) -> nx.Graph: ...

The builder's signature is the topology's options and its docstring its help: every parameter
but the run's facts (`RUN_FACTS`: the node count `n`, the run's `seed`, the partition's
`class_counts`), with its annotated type and default, is an option; the docstring's first
paragraph is the topology's summary and its Parameters section the options' help. Configs, the
command line's listing and `build_schedule` (topologies/by_name.py) read only this table.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from topologies._common import ParameterError, did_you_mean

RUN_FACTS = ("n", "seed", "class_counts")  # what a run gives a builder, never options
PLAIN = (bool, int, float, str)


@dataclass(frozen=True)
class Option:
    """One option of a named topology: a parameter of its builder."""

    name: str
    type: type  # bool, int, float or str
    default: Any  # inspect.Parameter.empty: the option must be given
    doc: str


@dataclass(frozen=True, eq=False)
class NamedTopology:
    """A registered builder: `name(n, ..., seed=...)` -> a graph or a schedule."""

    name: str
    builder: Callable[..., Any]
    options: Mapping[str, Option]
    facts: tuple[str, ...]  # the RUN_FACTS the builder takes
    summary: str
    renamed: Mapping[str, str] = field(default_factory=dict)  # old config key -> option

    def call(self, facts: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
        """The builder called with the run facts it takes and `options` (checked by name).

        Parameters
        ----------
        facts : the run's facts (n, seed, class_counts, ...); those the builder takes are passed.
        options : the topology's options.

        Returns
        -------
        what the builder returns (a graph or schedule).

        Raises
        ------
        ParameterError
            naming an option the topology does not take, or one without a default that is missing.
        """
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            hint = did_you_mean(unknown[0], self.options)
            raise ParameterError(unknown[0], f"is not an option of topology {self.name!r} "
                                 f"({hint}it takes: {', '.join(self.options) or 'none'})")
        missing = [k for k, o in self.options.items()
                   if o.default is inspect.Parameter.empty and k not in options]
        if missing:
            raise ParameterError(missing[0], f"must be given for topology {self.name!r}")
        return self.builder(**{k: facts[k] for k in self.facts}, **options)


REGISTRY: dict[str, NamedTopology] = {}


def register(builder: Callable[..., Any] | None = None, *, name: str | None = None,
             renamed: Mapping[str, str] | None = None) -> Any:
    """Register `builder` as a named topology.

    Usable as ``@register`` or ``@register(name=..., renamed={old_key: option})``.

    Parameters
    ----------
    builder : the topology's builder (its signature is its options); None when called with
        keywords only.
    name : the topology's name (default: the function's name).
    renamed : {old config key: option}, keys of an earlier release that still work, with a
        deprecation message.

    Returns
    -------
    the builder itself, or (without `builder`) the decorator that registers one.

    Raises
    ------
    ValueError
        when the name is registered already (and see ``describe_builder``).
    """

    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        key = name or fn.__name__
        if key in REGISTRY:
            raise ValueError(f"topology {key!r} is registered already")
        REGISTRY[key] = describe_builder(fn, key, renamed or {})
        return fn

    return add(builder) if builder is not None else add


def describe_builder(fn: Callable[..., Any], name: str,
                     renamed: Mapping[str, str] | None = None) -> NamedTopology:
    """The NamedTopology of builder `fn`.

    Its options come from the signature (types from the annotations), their help from the
    docstring's Parameters section; parameters named in RUN_FACTS are filled by the run.

    Parameters
    ----------
    fn : the builder.
    name : the topology's name.
    renamed : {old config key: option}, or None.

    Returns
    -------
    NamedTopology.

    Raises
    ------
    ValueError
        when fn takes *args or **kwargs, an option has no plain type, or a renamed key names no
        option.
    """
    hints = typing.get_type_hints(fn)
    docs = option_docs(fn.__doc__ or "")
    options, facts = {}, []
    for p in inspect.signature(fn).parameters.values():
        if p.name in RUN_FACTS:
            facts.append(p.name)
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(f"topology {name!r}: *args and **kwargs are not options")
        options[p.name] = Option(p.name, plain_type(hints.get(p.name), p, name), p.default,
                                 docs.get(p.name, ""))
    for old, new in (renamed or {}).items():
        if new not in options:
            raise ValueError(f"topology {name!r}: renamed key {old!r} names no option {new!r}")
    paragraph = inspect.cleandoc(fn.__doc__ or name).split("\n\n", 1)[0]
    summary = " ".join(paragraph.split())
    return NamedTopology(name, fn, options, tuple(facts), summary, dict(renamed or {}))


def plain_type(hint: Any, p: inspect.Parameter, name: str) -> type:
    """The config type of an option.

    Its annotation if plain (bool, int, float, str), the first plain member of a union
    (``str | Selector`` -> str), else the default's type.

    Parameters
    ----------
    hint : the option's type hint.
    p : the option's parameter (for its default).
    name : the topology's name, for the error.

    Returns
    -------
    type, one of bool, int, float, str.

    Raises
    ------
    ValueError
        when neither the annotation nor the default gives a plain type.
    """
    members = typing.get_args(hint) if isinstance(hint, types.UnionType) or (
        typing.get_origin(hint) is typing.Union) else (hint,)
    for member in members:
        if member in PLAIN:
            return member
    if p.default is not inspect.Parameter.empty and type(p.default) in PLAIN:
        return type(p.default)
    raise ValueError(f"topology {name!r}: option {p.name!r} needs a bool, int, float or str "
                     "annotation")


def option_docs(doc: str) -> dict[str, str]:
    """The help of each parameter, read from a numpydoc Parameters section.

    Parameters
    ----------
    doc : a docstring; its Parameters section has "name : text" lines, a continuation indented
        further; several names may share a line: "rows, cols : ...".

    Returns
    -------
    dict {parameter: its help}, empty when there is no Parameters section.
    """
    text = inspect.cleandoc(doc)
    section = re.search(r"^Parameters\n-+\n(.*?)(?:\n\n[A-Z][a-z]+\n-+\n|\Z)", text, re.S | re.M)
    if not section:
        return {}
    docs: dict[str, str] = {}
    names: list[str] = []
    for line in section.group(1).splitlines():
        head = re.match(r"^([A-Za-z_][\w, ]*?)\s*:\s*(.*)$", line)
        if head and not line.startswith(" "):
            names = [n.strip() for n in head.group(1).split(",")]
            for n in names:
                docs[n] = head.group(2).strip()
        elif names and line.strip():
            for n in names:
                docs[n] = f"{docs[n]} {line.strip()}".strip()
    return docs
