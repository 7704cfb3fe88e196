"""One comparison per setting (a Dirichlet alpha, a partition, a graph), summarized across them:
each variant's final accuracy at every setting, a table and a figure with error bars.

    python -m analysis.across 0.1=runs/hetero/alpha0.1 0.3=runs/hetero/alpha0.3 \\
        "2 classes=runs/hetero/pathological2" --last 5 --xlabel "Dirichlet alpha" \\
        --figure docs/figures/heterogeneity.png

Each SETTING=FOLDER is a `p2pfl compare` output folder; its variants (seeds pooled, as `p2pfl
table` pools them) are the rows. SETTING=FOLDER:VARIANT takes that one variant, in the row
`--row` (default: its label), so that one row can gather variants of several folders (a sweep of
one option: "0=runs/a:dfedavg" "0.05=runs/a:dfedsam" "0.1=runs/b:dfedsam_rho0.1" --row DFedSAM).
The accuracy of a run is the mean test accuracy of its last
`--last` evaluations; a cell is the mean +- sd over the finished seeds. Settings are drawn in
the order given, evenly spaced, labelled as given. `--names dfedavg=DFedAvg,osgp=OSGP` shows rows
under other names (a paper's, say) in the table and the figure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from p2pfl.report.figures import marker, plt, save, series_style
from p2pfl.report.grouping import group_runs
from p2pfl.report.labels import parse_names
from p2pfl.report.summary import find_runs, summarize

Cells = dict[str, dict[str, list[float]]]  # variant -> setting -> per-seed accuracies (%)


def collect(settings: dict[str, Path], last: int, chosen: dict[str, str] | None = None,
            row: str | None = None) -> Cells:
    """The final accuracies of every variant in every setting.

    A run still going, without summary.json, does not count.

    Parameters
    ----------
    settings : {setting: folder of its runs}.
    last : k, the evaluated rounds averaged into a run's final accuracy.
    chosen : {setting: the one variant taken from its folder}, or None.
    row : the row of the chosen variants (default: the variant's label).

    Returns
    -------
    Cells, {variant: {setting: [final accuracy (%) of each finished seed]}}.
    """
    cells: Cells = {}
    chosen = chosen or {}
    for setting, folder in settings.items():
        for label, runs in group_runs(find_runs([folder])).items():
            if setting in chosen and label != chosen[setting]:
                continue
            finished = [s for s in (summarize(run, last) for run in runs) if s.finished]
            name = (row or label) if setting in chosen else label
            cells.setdefault(name, {})[setting] = [100 * s.last_mean for s in finished]
    return cells


def table(cells: Cells, settings: list[str]) -> str:
    """Markdown: a row per variant, a column per setting.

    Parameters
    ----------
    cells : {variant: {setting: accuracies (%)}}, as `collect`.
    settings : the columns, in order.

    Returns
    -------
    str; a cell is mean +- sd over seeds, with n seeds where fewer than the most.
    """
    most = max(len(a) for row in cells.values() for a in row.values())
    lines = ["| variant | " + " | ".join(settings) + " |", "|---" * (len(settings) + 1) + "|"]
    for label, row in cells.items():
        shown = []
        for setting in settings:
            accs = row.get(setting, [])
            cell = (f"{np.mean(accs):.2f} ± {np.std(accs):.2f}" if len(accs) > 1
                    else f"{accs[0]:.2f}" if accs else "-")
            shown.append(cell + (f" ({len(accs)} seeds)" if 0 < len(accs) < most else ""))
        lines.append(f"| {label} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


def figure(cells: Cells, settings: list[str], path: Path, xlabel: str, title: str = ""
           ) -> list[Path]:
    """Accuracy (mean, error bar +- sd over seeds) against the settings, a line per variant.

    A legend only where there are several variants.

    Parameters
    ----------
    cells : {variant: {setting: accuracies (%)}}.
    settings : the x positions, in order.
    path : the figure's path (PNG; a PDF beside it).
    xlabel : the x axis' label.
    title : the figure's title.

    Returns
    -------
    list of the Paths written.
    """
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    xs = np.arange(len(settings))
    for i, (label, row) in enumerate(cells.items()):
        at = [(x, row[s]) for x, s in zip(xs, settings) if row.get(s)]
        offset = (i - (len(cells) - 1) / 2) * 0.03  # error bars side by side, not on top
        ax.errorbar([x + offset for x, _ in at], [np.mean(a) for _, a in at],
                    yerr=[np.std(a) for _, a in at], color=series_style(i)["color"],
                    marker=marker(i), ms=5, capsize=3, label=label)
    ax.set_xticks(xs, settings)
    ax.set(xlabel=xlabel, ylabel="final test accuracy of the average model (%)")
    ax.grid(alpha=0.3)
    if len(cells) > 1:
        ax.legend(fontsize=8, frameon=False)
    if title:
        ax.set_title(title)
    return save(fig, path)


def main(argv: list[str] | None = None) -> int:
    """The `python -m analysis.across` command: one comparison per setting, summarized across them.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status: 0, or 2 after a one-line error.
    """
    from p2pfl.config import ConfigError

    parser = argparse.ArgumentParser(prog="python -m analysis.across",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("settings", nargs="+", metavar="SETTING=FOLDER[:VARIANT]")
    parser.add_argument("--row", default=None, help="the row of the settings that name a variant")
    parser.add_argument("--last", type=int, default=10, help="evaluations averaged per run")
    parser.add_argument("--xlabel", default="setting")
    parser.add_argument("--title", default="")
    parser.add_argument("--figure", default=None, help="output file (PNG; a PDF beside it)")
    parser.add_argument("--names", default="", help="rows shown under other names: a=A,b=B")
    args = parser.parse_args(argv)
    try:
        pairs = [item.split("=", 1) for item in args.settings]
        if any(len(p) != 2 or not p[0] for p in pairs):
            raise ConfigError("settings", "each is SETTING=FOLDER, e.g. 0.1=runs/hetero/alpha0.1")
        settings = {name: Path(folder.split(":", 1)[0]) for name, folder in pairs}
        chosen = {name: folder.split(":", 1)[1] for name, folder in pairs if ":" in folder}
        names = parse_names(args.names)
        cells = {names.get(row, row): accs
                 for row, accs in collect(settings, args.last, chosen, args.row).items()}
        print(table(cells, list(settings)), end="")
        if args.figure:
            files = figure(cells, list(settings), Path(args.figure), args.xlabel, args.title)
            print("figure:", ", ".join(map(str, files)))
    except (ConfigError, OSError) as err:
        print(f"across: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
