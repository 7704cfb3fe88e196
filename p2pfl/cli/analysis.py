"""`p2pfl analyze TOPOLOGY` and `p2pfl study CONFIG` (wired into p2pfl.cli)."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Add the analysis commands to the `p2pfl` parser: analyze, study, data.

    Parameters
    ----------
    sub : the parser's subcommands.
    """
    a = sub.add_parser("analyze", help="spectral and connectivity summary of a topology",
                       description="Spectral, connectivity and beyond-the-gap metrics of a "
                       "topology (analysis.summary). The neighbourhood heterogeneity needs the "
                       "data's class proportions: analysis.neighborhood_heterogeneity(W, "
                       "proportions) in Python.")
    a.add_argument("topology", help="topology name (see topologies.TOPOLOGIES)")
    a.add_argument("--n", type=int, default=16, help="number of nodes (default 16)")
    a.add_argument("--set", dest="params", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter of the topology, e.g. --set directed=false, or horizon=40 "
                   "(rounds of a time-varying schedule to analyse) (repeatable)")
    a.add_argument("--mixing", choices=("natural", "column_stochastic", "doubly_stochastic"),
                   default="natural", help="round matrix (natural: MH if undirected, push rule "
                   "if directed)")
    a.add_argument("--eps", type=float, default=1e-3, help="accuracy of the mixing time")
    a.add_argument("--gamma", type=float, help="decay of the random walk of the effective "
                   "number of neighbours, in [0, 1) (default 0.9; reported as "
                   "effective_neighbors_gamma)")
    a.add_argument("--json", action="store_true", help="print one JSON object")
    s = sub.add_parser("study", help="one run per algorithm, topology, sweep value and seed, "
                       "then which topology metric predicts convergence")
    s.add_argument("config", help="TOML experiment file with a [study] table (or none, with "
                   "--topologies), without [[compare]]")
    s.add_argument("--topologies", help="comma-separated names, options after colons, instead "
                   "of the config's: ring,exponential:directed=false,complete (sweeps are kept)")
    s.add_argument("--seeds", help="comma-separated seeds, instead of the config's")
    s.add_argument("--algorithms", help="comma-separated algorithm names, instead of the "
                   "config's: sgp,dfedavgm (each with the config's [algorithm] fields)")
    s.add_argument("--out", default="runs/study", help="output directory (default runs/study)")
    s.add_argument("--stack", type=int, help="cells run at once as one stacked population "
                   "(default: the config's study.stack, else 1); for a GPU, where it is faster")
    s.add_argument("--target", help="test accuracy for 'rounds to target', 0.8 or 80 (percent)"
                   " (default: the config's, else 0.9 x the best mean final accuracy)")
    s.add_argument("--gamma", type=float, help="decay of the effective number of neighbours, "
                   "in [0, 1) (default: the config's study.gamma, else 0.9)")
    s.add_argument("--x", help="comma-separated metrics on the x axes of "
                   "convergence_vs_topology (default diameter,spectral_gap_per_round; also "
                   "spectral_gap_per_period, mixing_time, effective_neighbors, heterogeneity, "
                   "exact_averaging_rounds, edges)")
    s.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field for every run (repeatable)")
    s.add_argument("--device", choices=("cpu", "cuda", "auto"), help="overrides config.device")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    d = sub.add_parser("data", help="what a config's partition gives each node")
    d.add_argument("action", choices=("describe",), help="describe: sizes, label skew and a "
                   "stacked bar per node of its labels")
    d.add_argument("config", help="TOML experiment or study file (its [data] table; a study's "
                   "at its first seed)")
    d.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field, e.g. --set data.alpha=0.1 (repeatable)")
    d.add_argument("--out", help="figure file stem (.png and .pdf; default: none drawn)")
    d.add_argument("--json", action="store_true", help="print one JSON object")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.10g}"
    return "-" if value is None else str(value)


def _horizon(params: dict[str, Any]) -> int | None:
    """Take `horizon` (an analysis parameter, not a topology one) out of the --set pairs."""
    from p2pfl.config import ConfigError

    horizon = params.pop("horizon", None)
    if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int)
                                or horizon < 1):
        raise ConfigError("--set", f"horizon must be an integer >= 1, got {horizon!r}")
    return horizon


def analyze(args: argparse.Namespace) -> int:
    """The `p2pfl analyze` command: spectral and connectivity summary of a topology.

    Parameters
    ----------
    args : the parsed command line.

    Returns
    -------
    int, the exit status.

    Raises
    ------
    ConfigError
        naming --set for a parameter the topology does not take (and as the topology refuses).
    """
    import topologies as T
    from analysis.summary import summary
    from p2pfl.config import ConfigError, parse_overrides

    params = parse_overrides(args.params)
    horizon = _horizon(params)
    try:
        schedule = T.build_schedule(args.topology, args.n, **params)
    except TypeError as err:
        raise ConfigError("--set", f"{args.topology}: {err}") from None
    except ValueError as err:
        raise ConfigError("topology", str(err)) from None
    mixing = None if args.mixing == "natural" else args.mixing
    gamma = {} if args.gamma is None else {"gamma": args.gamma}
    if args.gamma is not None and not 0 <= args.gamma < 1:
        raise ConfigError("--gamma", f"must be in [0, 1), got {args.gamma}")
    try:
        result = summary(schedule, mixing=mixing, eps=args.eps, horizon=horizon, **gamma)
    except ValueError as err:
        raise ConfigError("--mixing" if mixing else "topology", str(err)) from None
    result = {"topology": args.topology, **{k: v for k, v in params.items()}, **result}
    if args.json:
        print(json.dumps({k: (str(v) if isinstance(v, float) and math.isinf(v) else v)
                          for k, v in result.items()}))
    else:
        width = max(map(len, result))
        for key, value in result.items():
            print(f"{key:<{width}}  {_fmt(value)}")
    return 0


def parse_seeds(text: str) -> list[int]:
    """The seeds of a `--seeds` option.

    Parameters
    ----------
    text : comma-separated integers, '0,1,2'.

    Returns
    -------
    list of int, checked (`analysis.study_spec.check_seeds`).

    Raises
    ------
    ConfigError
        naming --seeds for anything else.
    """
    from analysis.study_spec import check_seeds
    from p2pfl.config import ConfigError

    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise ConfigError("--seeds", f"must be comma-separated integers, got {text!r}") from None
    return check_seeds(seeds, "--seeds")


def study(args: argparse.Namespace) -> int:
    """The `p2pfl study` command: one run per algorithm, topology, sweep value and seed, then which
    topology metric predicts convergence.

    Parameters
    ----------
    args : the parsed command line.

    Returns
    -------
    int, the exit status.

    Raises
    ------
    ConfigError
        naming the option or config field that is refused.
    """
    from analysis.study import run_study
    from analysis.study_measure import DEFAULT_X, check_gamma, check_x
    from analysis.study_results import format_table
    from analysis.study_spec import check_stack, load_study
    from p2pfl.config import parse_overrides
    from p2pfl.errors import RunInterrupted
    from p2pfl.report.table import parse_target

    overrides = parse_overrides(args.overrides)
    if args.device:
        overrides["device"] = args.device
    named: list[Any] = [a.strip() for a in (args.algorithms or "").split(",") if a.strip()]
    if named:  # the --set algorithm options go to each named algorithm, checked against it
        options = {k.removeprefix("algorithm."): overrides.pop(k) for k in list(overrides)
                   if k.startswith("algorithm.") and k != "algorithm.name"}
        named = [{"name": name, "label": name, **options} for name in named]
    cfg, spec = load_study(args.config, overrides)
    topologies = ([s for s in args.topologies.split(",") if s.strip()] if args.topologies
                  else list(spec.topologies))
    seeds = parse_seeds(args.seeds) if args.seeds else (spec.seeds or None)
    target = parse_target(args.target) if args.target is not None else spec.target
    target_loss = None if args.target is not None else spec.target_loss
    algorithms = named or list(spec.algorithms)
    gamma = spec.gamma if args.gamma is None else check_gamma(args.gamma, "--gamma")
    x = check_x([k.strip() for k in args.x.split(",")], "--x") if args.x else DEFAULT_X
    try:
        result = run_study(cfg, topologies, args.out, seeds=seeds, sweeps=spec.sweeps,
                           algorithms=algorithms, target=target, target_loss=target_loss,
                           progress=not args.quiet,
                           stack=check_stack(args.stack, "--stack") if args.stack is not None
                           else spec.stack,
                           gamma=gamma, x=x)
    except RunInterrupted as err:
        raise err.rerun("study") from None
    print(format_table(result))
    for path in result.files:
        print(path)
    return 0


def _study_data(path: str, overrides: dict[str, Any]) -> tuple[Any, str]:
    """The experiment of a config or a study config (its [study] table read), with the seed and
    number of nodes its first cell runs with, and a line saying which where it is a study's."""
    from analysis.study_spec import NUM_NODES, load_study
    from p2pfl.config import ConfigError, with_overrides

    cfg, spec = load_study(path, overrides)
    for i, sweep in enumerate(spec.sweeps):
        if sweep.vary == NUM_NODES and f"data.{NUM_NODES}" not in overrides:
            raise ConfigError(f"study.sweep[{i}]", f"sweep {sweep.label!r} varies num_nodes "
                              f"({', '.join(map(str, sweep.values))}): describe one with --set "
                              "data.num_nodes=N")
    if not spec.seeds or "seed" in overrides:
        return cfg, ""
    seeds = ", ".join(map(str, spec.seeds))
    return (with_overrides(cfg, {"seed": spec.seeds[0]}),
            f"seed {spec.seeds[0]}: the first of the study's seeds ({seeds}); --set seed=K "
            "describes another")


def data(args: argparse.Namespace) -> int:
    """The `p2pfl data describe` command: what a config's partition gives each node.

    Parameters
    ----------
    args : the parsed command line.

    Returns
    -------
    int, the exit status (0).

    Raises
    ------
    ConfigError
        naming compare when [[compare]] variants set data fields (and as the config refuses).
    """
    from analysis.partition import partition_summary, plot_label_bars
    from p2pfl.config import ConfigError, parse_overrides
    from p2pfl.engine.builder import federated_data

    cfg, note = _study_data(args.config, parse_overrides(args.overrides))
    varied = sorted({k for v in cfg.compare for k in v if k.startswith("data.")})
    if varied:
        raise ConfigError("compare", f"the [[compare]] variants set {', '.join(varied)}: "
                          "describe one variant's data with --set")
    d = cfg.data
    counts = federated_data(cfg).label_counts()
    result = {"dataset": d.name, "partition": d.partition, "seed": cfg.seed,
              **partition_summary(counts)}
    if args.json:
        print(json.dumps(result | {"sizes": counts.sum(axis=1).tolist()}))
    else:
        if note:
            print(f"study: {note}")
        width = max(map(len, result))
        for key, value in result.items():
            print(f"{key:<{width}}  {_fmt(value)}")
    if args.out:
        title = (f"{d.name}, {d.partition}: {result['nodes']} nodes of {result['size_min']} to "
                 f"{result['size_max']} samples\nclasses per node: "
                 f"{result['classes_per_node']:.1f} held, "
                 f"{result['effective_classes_per_node']:.1f} effective (exp of label entropy)")
        for path in plot_label_bars(counts, args.out, title):
            if not args.json:
                print(path)
    return 0


COMMANDS = {"analyze": analyze, "study": study, "data": data}
