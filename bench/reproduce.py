"""Reproduce the source papers' experiments at their settings: every table of docs/reproduction.md.

Each experiment is a paper config whose `[[compare]]` variants are the paper's methods; this runs
them over the seeds with `p2pfl compare` (so the same command continues killed runs and extends
finished ones), then writes OUT/<experiment>/table.md and OUT/<experiment>/curves.png (mean over
seeds, band from the lowest to the highest seed) and prints the tables.

    python -m bench.reproduce                          # everything, the papers' rounds
    python -m bench.reproduce --rounds 100 --only dfedsgpsm   # a first pass of one experiment
    python -m bench.reproduce --no-run --figures docs/figures  # redraw docs/reproduction.md's

`--rounds` caps every experiment's rounds (a prefix of the paper's run: the lr schedule depends
only on the round, so a later call with more rounds continues it exactly).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from analysis.plots import plot_seed_bands
from p2pfl.config import ConfigError, folder_name, load_config, variant_label
from p2pfl.engine import DivergenceError
from p2pfl.engine.compare import evaluated, run_subset
from p2pfl.report.results import METRICS, read_metrics
from p2pfl.report.table import comparison_table


@dataclasses.dataclass(frozen=True)
class Experiment:
    name: str
    config: str
    last: int  # evaluated rounds averaged in the table (the paper's statistic, or close to it)
    title: str
    overrides: tuple[tuple[str, object], ...] = ()  # dotted config fields set on every run


EXPERIMENTS = (
    Experiment("dfedsgpsm", "configs/dfedsgpsm_paper/fashion_mnist.toml", 5,
               "DFedSGPSM paper, Table 1 setting"),
    Experiment("fedfsa", "configs/centralized_paper/fedfsa.toml", 5, "FedFSA paper setting"),
    Experiment("fedlesam", "configs/centralized_paper/fedlesam.toml", 5,
               "FedLESAM paper setting"),
    Experiment("fedgmt", "configs/centralized_paper/fedgmt.toml", 10,
               "FedGMT reference-code setting"),
    Experiment("fedgloss", "configs/centralized_paper/fedgloss.toml", 10,
               "FedGloSS paper, CNN alpha = 0.05 setting"),
    Experiment("dfedsgpsm_unequal", "configs/dfedsgpsm_paper/unequal_fashion_mnist.toml", 5,
               "DFedSGPSM Table 1, reduced, unequal sizes"),
    Experiment("dfedsgpsm_equal", "configs/dfedsgpsm_paper/unequal_fashion_mnist.toml", 5,
               "DFedSGPSM Table 1, reduced, equal sizes",
               (("data.partition", "dirichlet_prior"),)),
)


def run_experiment(exp: Experiment, out: Path, seeds: list[int], rounds: int | None,
                   progress: bool, figures: Path | None = None,
                   train: bool = True) -> tuple[str, list[str]]:
    """Run (or continue) one experiment.

    Parameters
    ----------
    exp : the experiment.
    out : its folder.
    seeds : seeds.
    rounds : cap on its rounds, or None.
    progress : whether to draw progress bars.
    figures : folder of its figure, or None.
    train : False: only tabulate and draw the runs already in `out`, as far as they got.

    Returns
    -------
    tuple (its table, the messages of runs that diverged).
    """
    cfg = load_config(exp.config, dict(exp.overrides))
    if rounds is not None:
        cfg = dataclasses.replace(cfg, rounds=min(rounds, cfg.rounds))
    problems = []
    dirs = [out / folder_name(variant_label(v)) / f"seed{s}" for v in cfg.compare for s in seeds]
    if train:
        try:
            table = run_subset(cfg, out, None, seeds, exp.last, None, progress)
        except DivergenceError as err:
            problems.append(f"{exp.name}: {err}")
            table = (out / "table.md").read_text()
    else:
        found = [d for d in dirs if evaluated(d)]
        table = comparison_table(found, exp.last) if found else ""
    groups = {variant_label(v): [read_metrics(d / METRICS) for d in dirs[i:i + len(seeds)]
                                 if (d / METRICS).exists()]
              for v, i in zip(cfg.compare, range(0, len(dirs), len(seeds)))}
    d = cfg.data
    title = (f"{exp.title}: {d.name}, {d.num_nodes} nodes, {d.partition}({d.alpha}), "
             f"{cfg.model.name}")
    plot_seed_bands(groups, out / "curves", title)
    if figures is not None:
        plot_seed_bands(groups, figures / f"reproduction_{exp.name}", title)
    return table, problems


def main(argv: list[str] | None = None) -> int:
    """Reproduce the source papers' experiments: print each table.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status: 0, 2 after a one-line error, 3 when a run diverged.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/reproduce", help="folder of the experiments")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    parser.add_argument("--rounds", type=int, help="cap on every experiment's rounds")
    parser.add_argument("--only", help="comma-separated experiments: "
                        + ", ".join(e.name for e in EXPERIMENTS))
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--figures", help="also draw each figure as FIGURES/reproduction_<name>")
    parser.add_argument("--no-run", action="store_true",
                        help="train nothing: tabulate and draw the runs as far as they got")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
        wanted = args.only.split(",") if args.only else [e.name for e in EXPERIMENTS]
        unknown = sorted(set(wanted) - {e.name for e in EXPERIMENTS})
        if unknown:
            raise ConfigError("--only", f"no experiment named {unknown[0]!r}")
        if args.rounds is not None and args.rounds < 1:
            raise ConfigError("--rounds", f"must be at least 1, got {args.rounds}")
        problems = []
        for exp in EXPERIMENTS:
            if exp.name in wanted:
                table, failed = run_experiment(exp, Path(args.out) / exp.name, seeds,
                                               args.rounds, not args.quiet,
                                               Path(args.figures) if args.figures else None,
                                               not args.no_run)
                print(f"## {exp.name} ({exp.config})\n\n{table}")
                problems += failed
    except ValueError as err:  # ConfigError is one; so is a seed that is not an integer
        print(f"reproduce: error: {err}", file=sys.stderr)
        return 2
    for line in problems:
        print(f"reproduce: diverged: {line}", file=sys.stderr)
    return 3 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
