"""What communication buys: test accuracy against megabytes sent and against simulated seconds,
one curve per variant of a `p2pfl compare` folder (mean over its seeds, a band of +- sd).

    python -m analysis.communication runs/tracking --figure docs/figures/tracking_fmnist.png \\
        [--target 0.8] [--title "..."]

The runs need [network] enabled for the seconds panel (without it only the megabytes one is
drawn). Prints the comparison table (`p2pfl table OUT --target T`, which adds megabytes and
simulated seconds to the target) and writes the figure (PNG and PDF).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from p2pfl.report.figures import marker, plt, save, series_style
from p2pfl.report.grouping import group_runs
from p2pfl.report.results import read_metrics
from p2pfl.report.summary import find_runs
from p2pfl.report.table import comparison_table

History = list[dict[str, Any]]
DASHES = ("-", "--", "-.", ":")  # curves that coincide (equal algorithms) stay visible


@dataclass(frozen=True)
class Curve:
    """A variant's evaluated rounds, averaged over its seeds: each array is [evaluations]."""

    megabytes: np.ndarray  # cumulative megabytes sent up to and including the round
    seconds: np.ndarray | None  # simulated time (None: a run without [network])
    accuracy: np.ndarray  # test accuracy of the average model, %
    spread: np.ndarray  # its standard deviation over the seeds, %


def evaluated(history: History) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """What one run sent and reached at its evaluated rounds.

    Parameters
    ----------
    history : the run's metric records.

    Returns
    -------
    tuple (cumulative MB [e], simulated s [e] or None without a clock, accuracy % [e]).
    """
    sent = np.cumsum([r["bytes_sent"] for r in history]) / 1e6
    at = [i for i, r in enumerate(history) if "test_acc" in r]
    timed = all("sim_time_s" in history[i] for i in at)
    return (sent[at], np.array([history[i]["sim_time_s"] for i in at]) if timed else None,
            100 * np.array([history[i]["test_acc"] for i in at]))


def curves(folder: Path) -> dict[str, Curve]:
    """The curve of every label, over the runs at or below `folder`.

    Runs are grouped as `p2pfl table` groups them (seeds of a variant pooled); evaluations past
    the shortest seed are dropped.

    Parameters
    ----------
    folder : a `p2pfl compare` output folder.

    Returns
    -------
    dict {label: Curve}, means over the seeds.
    """
    out = {}
    for label, runs in group_runs(find_runs([folder])).items():
        points = [evaluated(read_metrics(run / "metrics.jsonl")) for run in runs]
        n = min(len(acc) for _, _, acc in points)
        accuracy = np.stack([acc[:n] for _, _, acc in points])
        seconds = [s for _, s, _ in points]
        out[label] = Curve(np.mean([mb[:n] for mb, _, _ in points], axis=0),
                           None if any(s is None for s in seconds)
                           else np.mean([s[:n] for s in seconds], axis=0),
                           accuracy.mean(0), accuracy.std(0))
    return out


def figure(found: dict[str, Curve], path: Path, target: float | None = None,
           title: str = "") -> list[Path]:
    """Accuracy against megabytes sent (log axis) and, where every run has a clock, against
    simulated seconds; one legend below the panels.

    Parameters
    ----------
    found : {label: Curve}.
    path : the figure's path (PNG; a PDF beside it).
    target : accuracy in (0, 1] drawn as a line, or None.
    title : the figure's title.

    Returns
    -------
    list of the Paths written.
    """
    timed = all(c.seconds is not None for c in found.values())
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(12 if timed else 7, 4.6),
                             squeeze=False)
    panels = [(axes[0][0], "megabytes", "megabytes sent (cumulative, all nodes)")]
    if timed:
        panels.append((axes[0][1], "seconds", "simulated time (s)"))
    for ax, field, label in panels:
        for i, (name, curve) in enumerate(found.items()):
            x, style = getattr(curve, field), series_style(i)
            every = max(1, len(x) // 6)  # markers staggered by series: coinciding curves show both
            ax.plot(x, curve.accuracy, color=style["color"], linestyle=DASHES[i % len(DASHES)],
                    marker=marker(i), markevery=(i * every // len(found), every), ms=5,
                    fillstyle="none", label=name)
            ax.fill_between(x, curve.accuracy - curve.spread, curve.accuracy + curve.spread,
                            color=style["color"], alpha=0.15, lw=0)
        if target is not None:
            ax.axhline(100 * target, color="grey", lw=0.8, ls=":")
        ax.set(xlabel=label, ylabel="test accuracy of the average model (%)")
        ax.grid(alpha=0.3)
    axes[0][0].set_xscale("log")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(4, len(labels)), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title)
    return save(fig, path)


def main(argv: list[str] | None = None) -> int:
    """The `python -m analysis.communication` command: accuracy against megabytes sent and simulated
    seconds of a `p2pfl compare` folder.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status: 0, or 2 after a one-line error.
    """
    from p2pfl.config import ConfigError
    from p2pfl.report.table import parse_target

    parser = argparse.ArgumentParser(prog="python -m analysis.communication",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a `p2pfl compare` output folder")
    parser.add_argument("--figure", default=None, help="output file (default FOLDER/communication"
                        ".png; a .pdf beside it)")
    parser.add_argument("--target", default=None, help="accuracy for the target columns and line")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    try:
        target = parse_target(args.target)
        print(comparison_table(find_runs([folder]), target=target), end="")
        files = figure(curves(folder), Path(args.figure or folder / "communication.png"), target,
                       args.title)
    except (ConfigError, OSError, KeyError) as err:
        print(f"communication: error: {err}", file=sys.stderr)
        return 2
    print("figure:", ", ".join(map(str, files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
