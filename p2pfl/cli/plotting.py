"""`p2pfl plot`: the curves of run directories, one per run or, with --seeds or --metric, one
per variant (the mean over its seed folders, a band from the lowest to the highest seed).

A curve keeps its variant's colour in every figure, the legend says which runs diverged, and the
default title says what the runs share (data, nodes, algorithm, topology, attackers, network).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from p2pfl.errors import ConfigError

if TYPE_CHECKING:
    from p2pfl.report.runs import RunFacts

History = list[dict[str, Any]]


def plot_history(run_dir: Path, x: str) -> History:
    """The metrics of one run directory to plot against `x` ("round" or "time").

    Parameters
    ----------
    run_dir : a run directory.
    x : "round" or "time".

    Returns
    -------
    list of records ([] for a run that diverged in its first round).

    Raises
    ------
    ConfigError
        naming runs for a directory that holds no run, --x for a run without simulated time.
    """
    from p2pfl.report.results import read_metrics
    from p2pfl.report.summary import is_run

    metrics = run_dir / "metrics.jsonl"
    if not is_run(run_dir):
        raise ConfigError("runs", f"{run_dir} holds no metrics.jsonl")
    history = read_metrics(metrics) if metrics.exists() else []
    if x == "time" and history and not any("sim_time_s" in r for r in history):
        raise ConfigError("--x", f"{run_dir} has no simulated time (run it with "
                          "network.enabled = true)")
    return history


def plot(args: argparse.Namespace) -> int:
    """One curve per run directory (a directory given twice is drawn once), labelled by the
    fewest trailing path parts that tell the runs apart (or by `--names`): "ring/seed0".

    Parameters
    ----------
    args : the parsed command line.

    Returns
    -------
    int, the exit status.
    """
    from p2pfl.report.labels import distinct_labels, parse_names, unique_paths
    from p2pfl.report.plots import plot_histories
    from p2pfl.report.runs import run_facts, title_of

    run_dirs = unique_paths(args.runs)
    names = parse_names(args.names)
    if args.seeds or args.metric is not None:
        return plot_seeds(run_dirs, args, names)
    if args.ylabel is not None:
        raise ConfigError("--ylabel", "labels the one axis of --metric or --seeds; the four "
                          "panels name their own")
    histories, facts = {}, {}
    for label, run_dir in zip(distinct_labels(run_dirs), run_dirs):
        name = names.get(label, label)
        histories[name] = plot_history(run_dir, args.x)
        fact = run_facts(run_dir)
        facts[name] = replace(fact, key=names.get(fact.key, fact.key))
    title = args.title or title_of([f.config for f in facts.values()])
    for path in plot_histories(histories, Path(args.out), title, x=args.x, facts=facts):
        print(path)
    return 0


def _attacked(config: dict[str, Any] | None) -> bool:
    """Whether a run's config placed Byzantine nodes."""
    nodes = ((config or {}).get("byzantine") or {}).get("nodes", 0)
    return nodes not in (0, 0.0, [], None)


def _with_metric(histories: list[History], facts: list[RunFacts], metric: str
                 ) -> tuple[list[History], bool]:
    """A group's histories holding `metric`: as logged, or, for an honest metric in runs
    without attackers, the same metric over all nodes. Also whether that stand-in was taken;
    ([], False) where no run of the group has either."""
    if any(metric in r for h in histories for r in h):
        return histories, False
    from p2pfl.report.results import HONEST_OF

    stand_in = {honest: plain for plain, honest in HONEST_OF.items()}.get(metric)
    if stand_in is None or any(_attacked(f.config) for f in facts):
        return [], False
    if not any(stand_in in r for h in histories for r in h):
        return [], False
    return [[{**r, metric: r[stand_in]} if stand_in in r else r for r in h]
            for h in histories], True


def plot_seeds(run_dirs: list[Path], args: argparse.Namespace, names: dict[str, str]) -> int:
    """`p2pfl plot --metric` / `--seeds`: one curve of `--metric` per run or, with `--seeds`,
    per group of runs: the folder above their seed<k> folder (a run not in one is its own
    group), the mean over its seeds, against the round or simulated time.

    Parameters
    ----------
    run_dirs : the run directories.
    args : the parsed command line.
    names : {label: the name to show}.

    Returns
    -------
    int, the exit status.

    Raises
    ------
    ConfigError
        naming --metric when no run logged it.
    """
    from analysis.plots import plot_seed_bands
    from p2pfl.report.labels import distinct_labels
    from p2pfl.report.runs import run_facts, title_of, variant_dir

    metric = args.metric or "test_acc"
    grouped: dict[Path, list[Path]] = {}
    for run_dir in run_dirs:
        grouped.setdefault(variant_dir(run_dir) if args.seeds else run_dir, []).append(run_dir)
    groups: dict[str, list[History]] = {}
    facts: dict[str, list[RunFacts]] = {}
    dropped = []
    for label, members in zip(distinct_labels(list(grouped)), grouped.values()):
        name = names.get(label, label)
        runs = [replace(f, key=names.get(f.key, f.key)) for f in map(run_facts, members)]
        logged = [plot_history(r, args.x) for r in members]
        histories, stood_in = _with_metric(logged, runs, metric)
        if not histories and all(f.diverged_at is not None for f in runs):
            histories = logged  # diverged before an evaluation: a legend entry says so
        elif not histories:
            dropped.append(name)
            continue
        if stood_in:
            name += " (no attackers: all nodes)"
        groups[name], facts[name] = histories, runs
    if not groups:
        raise ConfigError("--metric", f"no run logged {metric!r}")
    if dropped:
        print(f"p2pfl: plot: not drawn, no {metric!r} logged: {', '.join(dropped)}",
              file=sys.stderr)
    ylabel = args.ylabel or _ylabel(metric, [f for fs in facts.values() for f in fs])
    seeds = max(len(h) for h in groups.values()) if args.seeds else None
    title = args.title or title_of([f.config for fs in facts.values() for f in fs], seeds)
    for path in plot_seed_bands(groups, Path(args.out), title, metric, ylabel, args.x, facts):
        print(path)
    return 0


def _ylabel(metric: str, facts: list[RunFacts]) -> str:
    """The y label: test_acc named by the model it measures, else the metric's readable name."""
    from p2pfl.report.plots import metric_name

    models = {f.model for f in facts}
    if metric == "test_acc" and len(models) == 1 and models != {"test_acc"}:
        return f"test accuracy of the {next(iter(models))} (%)"
    return metric_name(metric)
