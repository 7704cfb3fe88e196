"""`p2pfl algorithms` and `p2pfl topologies`: what exists, one line each, with its source and the
options it reads (defaults shown), so that nobody has to read the code to find a name."""

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
    a = sub.add_parser("algorithms", help="list the algorithms: source paper, kind, options")
    a.add_argument("--json", action="store_true", help="print one JSON object")
    t = sub.add_parser("topologies", help="list the named topologies and the parameters each "
                       "reads")
    t.add_argument("--json", action="store_true", help="print one JSON object")


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else f"{value}"


def _defaults(options: type, without: set[str]) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(options) if f.name not in without}


def algorithm_table() -> dict[str, dict[str, Any]]:
    """Every registered algorithm's kind, source and options.

    The options listed are those beyond the fields that every algorithm reads ("all") and that
    every centralized one reads ("server").

    Returns
    -------
    dict {name: {kind, source, options: {field: default}}}, with the rows "all" and "server".
    """
    from algorithms import ALGORITHMS
    from algorithms.server import Server
    from p2pfl.options import AlgorithmOptions

    common = {f.name for f in dataclasses.fields(AlgorithmOptions)}
    server = {f.name for f in dataclasses.fields(Server.Options)}
    table: dict[str, dict[str, Any]] = {
        "all": {"options": _defaults(AlgorithmOptions, {"name", "variant"})},
        "server": {"options": _defaults(Server.Options, common)}}
    for name, cls in ALGORITHMS.items():
        options = _defaults(cls.Options, server if cls.mixing == "server" else common)
        if len(cls.variants) > 1:
            options["variant"] = cls.default_variant
        table[name] = {"kind": KINDS[cls.mixing], "source": cls.source, "options": options}
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


def algorithms(args: argparse.Namespace) -> int:
    """The `p2pfl algorithms` command: the algorithms, their source paper, kind and options.

    Parameters
    ----------
    args : the parsed command line (--json: one JSON object).

    Returns
    -------
    int, the exit status.
    """
    def line(row: dict[str, Any]) -> str:
        options = ", ".join(f"{k}={_value(v)}" for k, v in row["options"].items()) or "-"
        if "kind" not in row:
            who = "every" if row is table["all"] else "every server"
            return f"(what {who} algorithm reads) {options}"
        return f"{row['kind']:<{kind_width}}  {row['source']}; options: {options}"

    table = algorithm_table()
    kind_width = max(len(row.get("kind", "")) for row in table.values())
    return _print(table, line, args.json)


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
