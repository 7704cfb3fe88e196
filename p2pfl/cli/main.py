"""Command line: `p2pfl run CONFIG ...`, `p2pfl resume RUN_DIR`, `p2pfl plot RUN_DIR ...`,
`p2pfl table RUN_DIR ...`, `p2pfl compare CONFIG --only a,b --seeds 0,1,2 --out DIR`,
`p2pfl analyze TOPOLOGY`, `p2pfl study CONFIG`, `p2pfl design CONFIG`,
`p2pfl data describe CONFIG`, `p2pfl algorithms`, `p2pfl topologies`, `p2pfl bench [--quick]`."""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from p2pfl.cli import analysis as analysis_cli
from p2pfl.cli import design as design_cli
from p2pfl.cli import listing, plotting
from p2pfl.cli.starting import EXIT_INTERRUPTED, interrupted_while_starting
from p2pfl.errors import ConfigError, DivergenceError, PeerLost, RunInterrupted
from p2pfl.scale.launch import launched, prints

if TYPE_CHECKING:
    from p2pfl.config import Config

# Each command imports what it needs when it runs: the engine (torch, seconds) only for the
# commands that train, so `--help`, `analyze` and `table` start in a fraction of a second.

EXIT_CONFIG = 2
EXIT_DIVERGED = 3
EXIT_PEER_LOST = 4  # a process of a distributed run was lost
# the commands that need the engine
TRAINING = ("run", "resume", "compare", "study", "data", "design")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="p2pfl", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run an experiment from a TOML config")
    r.add_argument("config", help="TOML experiment file")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field, e.g. --set algorithm.lr=0.05 (repeatable)")
    r.add_argument("--out", help="run directory (default: runs/<algorithm>-<topology>-<time>)")
    r.add_argument("--device", choices=("cpu", "cuda", "auto"), help="overrides config.device")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its last checkpoint (same config)")
    r.add_argument("--nproc", type=int, default=1, metavar="R",
                   help="shard the nodes over R local processes (as torchrun --nproc-per-node R)")
    c = sub.add_parser("resume", help="continue a run directory from its last checkpoint")
    c.add_argument("run_dir", help="run directory (holding config.json and checkpoint.pt)")
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="change a resumable field, e.g. --set rounds=500 (repeatable)")
    c.add_argument("--device", choices=("cpu", "cuda", "auto"), help="overrides config.device")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.add_argument("--nproc", type=int, default=1, metavar="R",
                   help="shard the nodes over R local processes (any R: the checkpoint holds "
                   "every node)")
    p = sub.add_parser("plot", help="draw the curves of one or more run directories")
    p.add_argument("runs", nargs="+", help="run directories (holding metrics.jsonl); a curve "
                   "per run, labelled by the trailing path parts that tell them apart")
    p.add_argument("--out", default="comparison", help="output file stem (.png and .pdf)")
    p.add_argument("--x", choices=("round", "time"), default="round",
                   help="x axis: the round, or the simulated time of runs with [network]")
    p.add_argument("--seeds", action="store_true", help="one curve per folder of seed<k> runs: "
                   "the mean over its seeds, a band from the lowest to the highest")
    p.add_argument("--metric", help="draw this accuracy key alone, a curve per run (with "
                   "--seeds: per folder; default there test_acc), e.g. test_acc_personal")
    p.add_argument("--ylabel", help="the y axis label with --metric or --seeds (default: the "
                   "metric's readable name)")
    p.add_argument("--names", default="", help="curves shown under other names: a=A,b=B (a "
                   "label as drawn without it, e.g. fedfsa=FedFSA)")
    p.add_argument("--title", default="", help="the figure's title")
    analysis_cli.add_commands(sub)
    design_cli.add_commands(sub)
    listing.add_commands(sub)
    _add_table_parsers(sub)
    _add_bench_parser(sub)
    return parser


def _add_table_parsers(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("table", help="comparison table of finished runs (Markdown)")
    t.add_argument("runs", nargs="+", help="run directories, or folders searched for them")
    c = sub.add_parser("compare", help="run chosen [[compare]] variants over seeds, then tabulate")
    c.add_argument("config", help="TOML experiment file with [[compare]] variants")
    c.add_argument("--only", help="comma-separated variant labels or algorithm names")
    c.add_argument("--seeds", help="comma-separated seeds (default: the config's seed)")
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of the config's root (a variant that sets it "
                   "keeps its own; repeatable)")
    c.add_argument("--out", required=True, help="folder for the runs and table.md")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    for q in (t, c):
        q.add_argument("--last", type=int, default=1,
                       help="evaluations averaged for the accuracy columns (default 1: each "
                       "run's final evaluation; fewer where a run has fewer)")
        q.add_argument("--target", help="accuracy for the rounds-to-target column (0.8 or 80)")


def _add_bench_parser(sub: argparse._SubParsersAction) -> None:
    """`p2pfl bench ARGS`: the suite (bench/) owns its options (`p2pfl bench --help`)."""
    b = sub.add_parser("bench", add_help=False, help="benchmark suite: vectorized population "
                       "against the per-node loop (docs/performance.md; p2pfl bench --help)")
    b.add_argument("argv", nargs=argparse.REMAINDER)


def _bench(args: argparse.Namespace) -> int:
    try:
        from bench.suite import parser, run_suite  # lazy: not needed by other commands
    except (ModuleNotFoundError, ImportError) as err:
        if (getattr(err, "name", None) or "bench").split(".")[0] != "bench":
            raise
        raise ConfigError("bench", "the benchmark suite (bench/) is not importable here; run "
                          "'python -m p2pfl.cli bench' from the repository root") from None
    return run_suite(parser().parse_args(args.argv))


def _table(args: argparse.Namespace) -> int:
    from p2pfl.report.summary import find_runs
    from p2pfl.report.table import comparison_table, parse_target

    if args.last < 1:
        raise ConfigError("--last", f"must be at least 1, got {args.last}")
    target = parse_target(args.target)
    if args.command == "table":
        print(comparison_table(find_runs(args.runs), args.last, target), end="")
        return 0
    try:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    except ValueError:
        raise ConfigError("--seeds", f"must be comma-separated integers, got {args.seeds!r}"
                          ) from None
    if seeds and len(set(seeds)) < len(seeds):
        raise ConfigError("--seeds", f"names a seed twice ({args.seeds}): each seed is one run")
    from p2pfl.config import load_config, parse_overrides
    from p2pfl.engine.compare import run_subset

    cfg = load_config(args.config, parse_overrides(args.overrides))
    only = args.only.split(",") if args.only else None
    try:
        print(run_subset(cfg, Path(args.out), only, seeds, args.last, target, not args.quiet),
              end="")
    except RunInterrupted as err:
        raise err.rerun("comparison") from None
    return 0


def _overrides(args: argparse.Namespace) -> dict:
    from p2pfl.config import parse_overrides

    overrides = parse_overrides(args.overrides)
    if args.device:
        overrides["device"] = args.device
    return overrides


def _execute(cfg: Config, out: str | None, progress: bool, resume: bool) -> int:
    from p2pfl.engine import run, run_compare

    if cfg.compare:
        try:
            histories = run_compare(cfg, out, progress=progress, resume=resume)
        except DivergenceError as err:  # the other variants ran: their results first
            _print_finals(err.histories)
            raise
        _print_finals(histories)
    else:
        history = run(cfg, out, progress=progress, resume=resume)
        if prints():  # every rank of a distributed run has the same history
            print(json.dumps(history[-1], sort_keys=True))
    return 0


def _print_finals(histories: dict[str, list[dict]]) -> None:
    """Each variant's final test accuracy (a variant that diverged before a record: nan)."""
    for label, history in histories.items():
        final = history[-1] if history else {}
        print(f"{label}: final test_acc {final.get('test_acc', float('nan')):.4f}")


def _spawn(args: argparse.Namespace, cfg: Config) -> int | None:
    """With --nproc R > 1: the same command as R processes of one distributed run (the config,
    already checked here, is read again by each); None to run in this process."""
    if args.nproc < 1:
        raise ConfigError("--nproc", f"must be at least 1, got {args.nproc}")
    if args.nproc == 1:
        return None
    if launched():  # never a launch within a launch
        raise ConfigError("--nproc", "this process is already one of a distributed run's "
                          "processes (torchrun or --nproc): leave --nproc out")
    if args.nproc > cfg.data.num_nodes:
        raise ConfigError("--nproc", f"{args.nproc} processes for {cfg.data.num_nodes} nodes: "
                          "every process needs at least one node")
    if cfg.compare:
        raise ConfigError("--nproc", "a config with [[compare]] variants runs in one process")
    from p2pfl.scale.launch import spawn

    return spawn(_without_nproc(args.command_line), args.nproc)


def _without_nproc(argv: list[str]) -> list[str]:
    """`argv` without its --nproc option, however written (argparse takes any unique prefix,
    such as --npro 3 or --np=3)."""
    out, skip = [], False
    for arg in argv:
        name = arg.split("=", 1)[0]
        if skip:
            skip = False
        elif len(name) > 2 and "--nproc".startswith(name):
            skip = "=" not in arg
        else:
            out.append(arg)
    return out


def _run(args: argparse.Namespace) -> int:
    if args.resume and args.out and Path(args.out) != Path(args.resume):
        raise ConfigError("--out", f"--resume {args.resume} already names the run directory")
    from p2pfl.config import load_config

    cfg = load_config(args.config, _overrides(args))
    spawned = _spawn(args, cfg)
    if spawned is not None:
        return spawned
    return _execute(cfg, args.resume or args.out, not args.quiet, resume=bool(args.resume))


def _resume(args: argparse.Namespace) -> int:
    from p2pfl.engine.checkpoint import read_run_config

    cfg = read_run_config(Path(args.run_dir), _overrides(args))
    spawned = _spawn(args, cfg)
    if spawned is not None:
        return spawned
    return _execute(cfg, args.run_dir, not args.quiet, resume=True)


def _start(command: str) -> None:
    """Import the engine for a command that trains, before it does anything: a Ctrl-C meanwhile
    (torch takes seconds) is then "interrupted while starting"."""
    if command in TRAINING:
        importlib.import_module("p2pfl.engine")


def _os_error(err: OSError) -> str:
    """One line for a failed file operation: the path, what failed, and what a run keeps."""
    where = f"{err.filename}: " if err.filename else ""
    line = f"{where}{err.strerror or err}"
    if err.errno == errno.ENOSPC:
        line += "; a run keeps its last checkpoint: free space, then p2pfl resume"
    return line


def _say(line: str) -> None:
    """Print an error every process of a distributed run has alike once: from rank 0 (another
    rank's own error reaches rank 0 too, p2pfl.scale.distributed.agree)."""
    if prints():
        print(line, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """The `p2pfl` command: parse the command line and run the command.

    A refused config, a divergence, an interruption, a lost peer and an OSError are one line on
    stderr and their own exit status.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status.
    """
    parser = _parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args, rest = parser.parse_known_args(argv)
    args.command_line = argv
    if args.command == "bench":  # the suite parses its own options
        args.argv = [*rest, *args.argv]
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    commands = {"run": _run, "resume": _resume, "plot": plotting.plot, "table": _table,
                "compare": _table, "bench": _bench, **analysis_cli.COMMANDS,
                **design_cli.COMMANDS,
                **listing.COMMANDS}
    try:
        _start(args.command)
    except KeyboardInterrupt:
        return interrupted_while_starting()
    try:
        if args.command in ("compare", "study", "design") and launched():
            raise ConfigError(args.command, "runs in one process (docs/distributed.md): start "
                              "it without torchrun")
        return commands[args.command](args)
    except ConfigError as err:
        _say(f"p2pfl: error: {err}")
        return EXIT_CONFIG
    except DivergenceError as err:
        _say(f"p2pfl: diverged: {err}")
        return EXIT_DIVERGED
    except RunInterrupted as err:
        _say(f"p2pfl: interrupted: {err}")
        return EXIT_INTERRUPTED
    except PeerLost as err:
        print(f"p2pfl: error: {err}", file=sys.stderr)
        return EXIT_PEER_LOST
    except OSError as err:  # a path the user gave, or the disk: not a bug of the engine
        _say(f"p2pfl: error: {_os_error(err)}")
        return EXIT_CONFIG
    except KeyboardInterrupt:
        _say("p2pfl: interrupted; what was written is kept (metrics and the last checkpoint)")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
