"""`p2pfl design CONFIG`: which graph for the config's network and data (analysis.design)."""

from __future__ import annotations

import argparse
import math


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add the design command to the `p2pfl` parser.

    Parameters
    ----------
    sub : the parser's subcommands.
    """
    d = sub.add_parser("design", help="which topology for a config's network and data: "
                       "candidates predicted, then checked by short runs",
                       description="Predict each candidate topology's simulated time to the "
                       "target on the config's [network] (its round time on the engine's clock, "
                       "its rounds from its effective neighbours and heterogeneity), then check "
                       "the best predicted by successive halving over short runs at equal "
                       "simulated time; print the ranked table and write the pick as "
                       "OUT/topology.toml (docs/topology-research.md, section 7).")
    d.add_argument("config", help="TOML experiment file with [network] enabled and a "
                   "decentralized algorithm")
    d.add_argument("--budget", type=int, help="the most neighbours a node sends to or receives "
                   "from in a round (default: no limit)")
    d.add_argument("--target", help="test accuracy to reach, 0.8 or 80 (percent) (default: 0.9 x "
                   "the best mean accuracy at the horizon)")
    d.add_argument("--seeds", help="comma-separated seeds (default: the config's seed and the "
                   "next two)")
    d.add_argument("--keep", type=int, default=6, help="candidates that run, the fastest "
                   "predicted (default 6)")
    d.add_argument("--horizon", type=float, help="simulated seconds of the longest runs "
                   "(default: the config's rounds x the median predicted round)")
    d.add_argument("--out", default="runs/design", help="output directory (default runs/design)")
    d.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field for every run (repeatable)")
    d.add_argument("--quiet", action="store_true", help="no progress bars")


def design(args: argparse.Namespace) -> int:
    """The `p2pfl design` command.

    Parameters
    ----------
    args : the parsed command line.

    Returns
    -------
    int, the exit status (0).

    Raises
    ------
    ConfigError
        naming the option or config field that is refused.
    """
    from analysis.design import design_topology
    from analysis.design_report import table
    from p2pfl.cli.analysis import parse_seeds
    from p2pfl.config import ConfigError, load_config, parse_overrides
    from p2pfl.errors import RunInterrupted
    from p2pfl.report.table import parse_target

    cfg = load_config(args.config, parse_overrides(args.overrides))
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    for name, value, low in (("--budget", args.budget, 1), ("--keep", args.keep, 2)):
        if value is not None and value < low:
            raise ConfigError(name, f"must be an integer >= {low}, got {value}")
    if args.horizon is not None and not (math.isfinite(args.horizon) and args.horizon > 0):
        raise ConfigError("--horizon", f"must be a finite number of simulated seconds > 0, got "
                          f"{args.horizon}")
    try:
        result = design_topology(cfg, args.out, budget=args.budget,
                                 target=parse_target(args.target), seeds=seeds, keep=args.keep,
                                 horizon_s=args.horizon, progress=not args.quiet)
    except RunInterrupted as err:
        raise err.rerun("design") from None
    print(table(result))
    for path in result.files:
        print(path)
    return 0


COMMANDS = {"design": design}
