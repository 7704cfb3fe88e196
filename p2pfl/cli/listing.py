"""`p2pfl algorithms` and `p2pfl topologies`: what exists, one line each, with its source and the
options it reads (defaults shown, with where a paper's default comes from), so that nobody has to
read the code to find a name."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

KINDS = {"doubly_stochastic": "gossip", "column_stochastic": "push-sum",
         "push_pull": "push-pull", "server": "server"}


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add the listing commands to the `p2pfl` parser: algorithms, topologies.

    Parameters
    ----------
    sub : the parser's subcommands.
    """
    a = sub.add_parser("algorithms", help="list the algorithms: source paper, kind, options, "
                       "where their defaults come from")
    a.add_argument("names", nargs="*", metavar="NAME", help="show these algorithms option by "
                   "option: default, where it comes from, what it does, and the settings that "
                   "turn the algorithm's own terms off")
    a.add_argument("--json", action="store_true", help="print one JSON object")
    t = sub.add_parser("topologies", help="list the named topologies and the parameters each "
                       "reads")
    t.add_argument("--json", action="store_true", help="print one JSON object")


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else f"{value}"


def _defaults(options: type, shared: dict[str, Any]) -> dict[str, Any]:
    """The defaults of `options` but those listed in `shared` (field -> default) with the same
    default."""
    return {f.name: f.default for f in dataclasses.fields(options)
            if f.name not in shared or shared[f.name] != f.default}


def _sources(options: type, listed: dict[str, Any]) -> dict[str, str]:
    """Where the defaults of the `listed` fields of `options` come from, for those that name it."""
    from p2pfl.options import default_source

    return {f.name: default_source(f) for f in dataclasses.fields(options)
            if f.name in listed and default_source(f)}


def algorithm_table() -> dict[str, dict[str, Any]]:
    """Every registered algorithm's kind, source, options and where their defaults come from.

    The options listed are those beyond the fields that every algorithm reads ("all") and that
    every centralized one reads ("server"), and those of these whose default is the
    algorithm's own (its paper's).

    Returns
    -------
    dict {name: {kind, source, options: {field: default}, sources: {field: where the default
    comes from}}}, with the rows "all" and "server".
    """
    from algorithms import ALGORITHMS
    from algorithms.server import Server
    from p2pfl.options import AlgorithmOptions

    common = _defaults(AlgorithmOptions, {})
    server = _defaults(Server.Options, {})
    table: dict[str, dict[str, Any]] = {
        "all": {"options": _defaults(AlgorithmOptions, {"name": "osgp", "variant": ""})},
        "server": {"options": _defaults(Server.Options, common)}}
    for name, cls in ALGORITHMS.items():
        options = _defaults(cls.Options, server if cls.mixing == "server" else common)
        sources = _sources(cls.Options, options)
        if len(cls.variants) > 1:
            options["variant"] = cls.default_variant
        table[name] = {"kind": KINDS[cls.mixing], "source": cls.source, "options": options,
                       "sources": sources}
    return table


def topology_table() -> dict[str, dict[str, Any]]:
    """Every registered topology's summary and parameters (its builder's docstring and signature).

    Returns
    -------
    dict {name: {what, params: {option: default or None}}}.
    """
    import inspect

    import topologies as T

    return {name: {"what": entry.summary,
                   "params": {k: None if o.default is inspect.Parameter.empty else o.default
                              for k, o in entry.options.items()}}
            for name, entry in T.REGISTRY.items()}


def _print(table: dict[str, dict[str, Any]], describe: Any, as_json: bool) -> int:
    import json

    if as_json:
        print(json.dumps(table, indent=1))
        return 0
    width = max(map(len, table))
    for name, row in table.items():
        print(f"{name:<{width}}  {describe(row)}")
    return 0


def _detail(name: str, row: dict[str, Any]) -> list[str]:
    """`p2pfl algorithms NAME`: the algorithm's row, then one entry per option (default, doc,
    where the default comes from) and its baselines."""
    from algorithms import ALGORITHMS
    from algorithms.baselines import settings

    cls = ALGORITHMS[name]
    docs = {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls.Options)}
    lines = [f"{name}  {row['kind']}  {row['source']}"]
    for key, value in row["options"].items():
        lines.append(f"  {key} = {_value(value)}: {docs.get(key) or 'the algorithm form'}")
        if key in row["sources"]:
            lines.append(f"    default from {row['sources'][key]}")
    for baseline in vars(cls).get("baselines", ()):
        lines.append(f"  baseline: {settings(baseline.options)} computes {baseline.computes}")
    return lines


def algorithms(args: argparse.Namespace) -> int:
    """The `p2pfl algorithms` command: the algorithms, their source paper, kind and options.

    Parameters
    ----------
    args : the parsed command line (names: show those option by option; --json: one JSON
        object).

    Returns
    -------
    int, the exit status.

    Raises
    ------
    ConfigError
        naming an unknown algorithm.
    """
    def line(row: dict[str, Any]) -> str:
        options = ", ".join(f"{k}={_value(v)}" for k, v in row["options"].items()) or "-"
        if "kind" not in row:
            who = "every" if row is table["all"] else "every server"
            return f"(what {who} algorithm reads) {options}"
        sources = "".join(f"; {k} from {where}" for k, where in row["sources"].items())
        return f"{row['kind']:<{kind_width}}  {row['source']}; options: {options}{sources}"

    from p2pfl.errors import ConfigError
    from topologies import did_you_mean

    table = algorithm_table()
    kind_width = max(len(row.get("kind", "")) for row in table.values())
    names = getattr(args, "names", [])
    known = {k for k, row in table.items() if "kind" in row}
    for name in names:
        if name not in known:
            raise ConfigError("algorithms", f"{did_you_mean(name, known)}unknown algorithm "
                              f"{name!r} (p2pfl algorithms lists them)")
    if not names:
        return _print(table, line, args.json)
    if args.json:
        return _print({k: table[k] for k in names}, line, True)
    print("\n".join(line for name in names for line in _detail(name, table[name])))
    return 0


def topologies(args: argparse.Namespace) -> int:
    """The `p2pfl topologies` command: the named topologies and the parameters each reads.

    Parameters
    ----------
    args : the parsed command line (--json: one JSON object).

    Returns
    -------
    int, the exit status.
    """
    def line(row: dict[str, Any]) -> str:
        params = ", ".join(f"{k}={_value(v)}" for k, v in row["params"].items())
        return f"{row['what']}{f' ({params})' if params else ''}"

    return _print(topology_table(), line, args.json)


COMMANDS = {"algorithms": algorithms, "topologies": topologies}
