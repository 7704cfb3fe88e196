"""Figures for papers (matplotlib Agg; every function writes `path`.png and `path`.pdf).

Run curves reuse p2pfl.report.plots; the rest draws topologies, spectra, consensus and data
partitions (the topology study's figures are in analysis.study_plots). Style:
p2pfl.report.figures.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from analysis.matrices import MatrixLike
from analysis.spectral import eigenvalues
from p2pfl.report.figures import (
    keyed_styles,
    legend_outside,
    log_axis,
    plt,
    round_axis,
    save,
    series_style,
)
from p2pfl.report.runs import RunFacts

ZERO_FLOOR = 1e-16  # where plot_consensus draws an exact 0
DRAW_MAX_NODES = 200  # draw_topology refuses larger graphs: nothing readable comes out


def plot_runs(run_dirs: Sequence[str | Path], path: str | Path, title: str = "") -> list[Path]:
    """Accuracy, loss and consensus distance vs round of several run directories on one figure.

    Parameters
    ----------
    run_dirs : run directories (each named by its folder).
    path : the figure's path (PNG; a PDF beside it).
    title : the figure's title.

    Returns
    -------
    list of the Paths written.

    Raises
    ------
    FileNotFoundError
        for a directory without metrics.jsonl.
    """
    from p2pfl.report.plots import plot_histories
    from p2pfl.report.results import read_metrics

    histories = {}
    for run_dir in map(Path, run_dirs):
        if not (run_dir / "metrics.jsonl").exists():
            raise FileNotFoundError(f"{run_dir} holds no metrics.jsonl")
        histories[run_dir.name] = read_metrics(run_dir / "metrics.jsonl")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return plot_histories(histories, path, title)


def _seed_points(histories: Sequence[Sequence[Mapping[str, Any]]], metric: str, x: str
                 ) -> tuple[np.ndarray, list[list[float]]]:
    """The x values of a label's curve and the seeds' values (x 100) at each.

    Against the round, the rounds some seed evaluated; against simulated time, the union of the
    seeds' evaluation times, each seed interpolated linearly between its own evaluations (a
    seed counts only within the time it covers)."""
    key = "round" if x == "round" else "sim_time_s"
    seeds = []
    for history in histories:
        points = [(r[key], 100 * r[metric]) for r in history
                  if metric in r and key in r and math.isfinite(r[metric])]
        if points:
            seeds.append(np.array(points, dtype=float))
    if not seeds:
        return np.array([]), []
    if x == "round":
        by_round: dict[float, list[float]] = {}
        for p in seeds:
            for t, value in p:
                by_round.setdefault(t, []).append(float(value))
        rounds = sorted(by_round)
        return np.array(rounds), [by_round[t] for t in rounds]
    grid = np.unique(np.concatenate([p[:, 0] for p in seeds]))
    values: list[list[float]] = [[] for _ in grid]
    for p in seeds:
        inside = np.flatnonzero((grid >= p[0, 0]) & (grid <= p[-1, 0]))
        for i, value in zip(inside, np.interp(grid[inside], p[:, 0], p[:, 1])):
            values[i].append(float(value))
    return grid, values


def _last_finite(values: Sequence[float]) -> float:
    """The last finite value of a drawn curve (-inf if none): where the legend ranks it."""
    finite = [v for v in np.asarray(values, dtype=float) if np.isfinite(v)]
    return finite[-1] if finite else -np.inf


def _seed_label(label: str, facts: Sequence[RunFacts]) -> str:
    """A legend entry: the label, its seeds, and those that diverged (and where)."""
    entry = f"{label}, {len(facts)} seeds" if len(facts) > 1 else label
    diverged = sorted(f.diverged_at for f in facts if f.diverged_at is not None)
    if diverged:
        unit = facts[0].unit
        where = ", ".join(map(str, diverged))
        entry += (f" (diverged at {unit} {where})" if len(diverged) == len(facts) else
                  f" ({len(diverged)} of {len(facts)} seeds diverged, at {unit} {where})")
    return entry


def plot_seed_bands(groups: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]],
                    path: str | Path, title: str = "", metric: str = "test_acc",
                    ylabel: str = "test accuracy of the average / server model (%)",
                    x: str = "round", facts: Mapping[str, Sequence[RunFacts]] | None = None
                    ) -> list[Path]:
    """One curve per label: the mean over its seeds of `metric` (x 100) against the round or the
    simulated time.

    A band goes from the lowest to the highest seed where there are several. A seed that stopped
    early (diverged, or still running) counts only where it reached. A label keeps its colour
    across figures (`keyed_styles`); the legend says which seeds diverged and which curves draw
    exactly over another.

    Parameters
    ----------
    groups : {label: the histories (lists of per-round records) of its seeds}.
    path : the figure's path (PNG; a PDF beside it).
    title : the figure's title.
    metric : the metrics key drawn.
    ylabel : the y axis' label.
    x : "round", or "time" (simulated seconds, `sim_time_s`).
    facts : {label: the RunFacts of its seeds} (diverged seeds, the colour's key), or None.

    Returns
    -------
    list of the Paths written.
    """
    fig, ax = plt.subplots(figsize=(9.5, 5))
    facts = facts or {}
    keys = [facts[label][0].key if facts.get(label) else label for label in groups]
    styles = keyed_styles(keys)
    curves: list[tuple[np.ndarray, np.ndarray]] = []  # (x, mean) of each label
    lowest: list[float] = []  # the lowest point of each label's band (or mean)
    shown: list[str] = []  # the labels of `curves`
    drawn: dict[tuple, str] = {}  # a curve's points -> the label that drew it first
    banded = partial = False
    for style, (label, histories) in zip(styles, groups.items()):
        xs, values = _seed_points(histories, metric, x)
        entry = _seed_label(label, facts.get(label) or [RunFacts(label, "", "round")]
                            * len(histories))
        if not len(xs):  # e.g. every seed diverged before its first evaluation: named only
            ax.plot([], [], color=style["color"], linestyle=style["linestyle"],
                    label=f"{entry}, nothing evaluated")
            continue
        mean = np.array([np.mean(v) for v in values])
        same = drawn.setdefault((tuple(xs), tuple(mean)), label)
        if same != label:
            entry += f" (same curve as {same}, drawn under it)"
        curves.append((xs, mean))
        lowest.append(min(min(v) for v in values))
        shown.append(label)
        counts = np.array([len(v) for v in values])
        every = counts == counts.max()  # the mean of every seed with values: drawn solid
        (line,) = ax.plot(xs, np.where(every, mean, np.nan), color=style["color"],
                          linestyle=style["linestyle"], label=entry, linewidth=1.2)
        if not every.all():  # where only some seeds have values (one stopped, or has not
            partial = True  # begun): dotted, a change of seeds, not of learning
            ax.plot(xs, mean, color=style["color"], linestyle=":", linewidth=1.0)
        if len(histories) > 1:
            banded = True
            ax.fill_between(xs, [min(v) for v in values], [max(v) for v in values],
                            color=line.get_color(), alpha=0.15, linewidth=0)
    if curves:  # the y axis starts below every curve after its first tenth and over the
        # second half of the plot: the first rounds' climb would squeeze the end
        half = max(r[-1] for r, _ in curves) / 2
        low = [min(m[len(m) // 10], m[r >= half].min(initial=np.inf)) for r, m in curves]
        bottom = max(0.0, min(low) - 3)
        ax.set_ylim(bottom=bottom)
        cut = [label for label, low in zip(shown, lowest) if low < bottom]  # a mean or a band
        notes = ["bands: lowest to highest seed"] if banded else []
        if partial:
            notes.append("dotted: where only some seeds have a value")
        if cut:
            which = ("every curve" if len(cut) == len(shown) else
                     ", ".join(f'"{label}"' for label in cut) if len(cut) < 4
                     else f"{len(cut)} curves")
            notes.append(f"parts of {which} (means or bands) lie below the axis")
        if notes:
            ax.text(0.0, -0.13, "\n".join(notes), transform=ax.transAxes, ha="left",
                    va="top", fontsize=8, color="0.3")  # under the x label, one per line
    ax.set_xlabel("round" if x == "round" else "simulated time (s)")
    if x == "round":
        round_axis(ax)
    ax.set_ylabel("\n".join(textwrap.wrap(ylabel, 50)))
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    ends = [_last_finite(h.get_ydata()) for h in handles]
    order = sorted(range(len(handles)), key=lambda i: -ends[i])  # legend in the final order
    legend_outside(ax, [handles[i] for i in order], [labels[i] for i in order])
    return save(fig, path)


def plot_consensus(curves: Mapping[str, np.ndarray], path: str | Path,
                   ylabel: str = "consensus distance  mean_i ||x_i - x_bar||^2") -> list[Path]:
    """One line per label of a per-round quantity on a log scale.

    Exact zeros (exact consensus) are drawn at 1e-16.

    Parameters
    ----------
    curves : {label: [T] values}, e.g. `consensus_distance(trajectory)`.
    path : the figure's path (PNG; a PDF beside it).
    ylabel : names what is drawn: the default is the consensus distance; for `consensus_error`
        curves say so, e.g. "consensus error  max_i |z_i - mean_i z_i(0)|".

    Returns
    -------
    list of the Paths written.
    """
    fig, ax = plt.subplots(figsize=(9, 4.5))
    exact = [label for label, v in curves.items() if (np.asarray(v, dtype=float) <= 0).any()]
    arrays = {label: np.maximum(np.asarray(v, dtype=float), ZERO_FLOOR)
              for label, v in curves.items()}
    for i, (label, values) in enumerate(arrays.items()):
        style = series_style(i)
        ax.plot(np.arange(len(values)), values, label=label, color=style["color"],
                linestyle=style["linestyle"])
    if arrays:
        log_axis(ax, "y", min(v.min() for v in arrays.values()),
                 max(v.max() for v in arrays.values()))
    ax.set_xlabel("round")
    round_axis(ax)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    if exact:
        names = ", ".join(label.split(" (")[0] for label in exact)
        ax.text(0.99, 0.1, f"exact consensus, drawn at {ZERO_FLOOR:g}: {names}",
                transform=ax.transAxes, ha="right", fontsize=7, color="0.3")
    legend_outside(ax)
    return save(fig, path)


def draw_topology(G: nx.Graph, path: str | Path, title: str = "") -> list[Path]:
    """Nodes on a circle (0 at the top, clockwise), arrows for a DiGraph.

    Parameters
    ----------
    G : the graph, at most DRAW_MAX_NODES nodes.
    path : the figure's path (PNG; a PDF beside it).
    title : the figure's title.

    Returns
    -------
    list of the Paths written.

    Raises
    ------
    ValueError
        for more than DRAW_MAX_NODES nodes.
    """
    n = G.number_of_nodes()
    if n > DRAW_MAX_NODES:
        raise ValueError(f"draw_topology draws at most {DRAW_MAX_NODES} nodes, got {n}")
    angles = np.pi / 2 - 2 * np.pi * np.arange(n) / max(n, 1)
    pos = {node: (math.cos(a), math.sin(a)) for node, a in zip(sorted(G), angles)}
    fig, ax = plt.subplots(figsize=(5, 5))
    nx.draw_networkx(G, pos, ax=ax, node_size=max(30, 300 - 2 * n), font_size=7 if n <= 40 else 0,
                     arrows=G.is_directed(), arrowsize=8, width=0.6, node_color="#4c72b0",
                     font_color="white", edge_color="#555555")
    ax.set_title(title or f"{n} nodes, {G.number_of_edges()} edges")
    ax.set_axis_off()
    return save(fig, path)


def plot_partition(counts: np.ndarray, path: str | Path, title: str = "") -> list[Path]:
    """Heatmap of samples per (node, class).

    Parameters
    ----------
    counts : [nodes, classes].
    path : the figure's path (PNG; a PDF beside it).
    title : the figure's title.

    Returns
    -------
    list of the Paths written.

    Raises
    ------
    ValueError
        unless counts is 2-D.
    """
    counts = np.asarray(counts)
    if counts.ndim != 2:
        raise ValueError(f"counts must be [nodes, classes], got shape {counts.shape}")
    fig, ax = plt.subplots(figsize=(min(12, 2 + 0.4 * counts.shape[1]),
                                    min(10, 1.5 + 0.12 * counts.shape[0])))
    image = ax.imshow(counts, aspect="auto", cmap="viridis", interpolation="nearest")
    fig.colorbar(image, ax=ax, label="samples")
    ax.set_xlabel("class")
    ax.set_ylabel("node")
    ax.set_title(title or "data partition")
    return save(fig, path)


def label_counts(labels: np.ndarray, partition: Sequence[np.ndarray],
                 num_classes: int) -> np.ndarray:
    """Samples per (node, class), from one index list per node.

    Parameters
    ----------
    labels : [n] labels.
    partition : one index array per node (any lengths, as `p2pfl.data.partition` returns).
    num_classes : K.

    Returns
    -------
    [nodes, K] int array.
    """
    labels = np.asarray(labels)
    return np.stack([np.bincount(labels[np.asarray(row)], minlength=num_classes)
                     for row in partition])


def plot_spectrum(matrices: Mapping[str, MatrixLike], path: str | Path) -> list[Path]:
    """Eigenvalues of each W in the complex plane with the unit circle (dense, n <= DENSE_MAX).

    Parameters
    ----------
    matrices : {label: W (a matrix or graph)}.
    path : the figure's path (PNG; a PDF beside it).

    Returns
    -------
    list of the Paths written.
    """
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    theta = np.linspace(0, 2 * np.pi, 400)
    ax.plot(np.cos(theta), np.sin(theta), color="0.7", lw=0.8)
    for label, W in matrices.items():
        ev = np.asarray(eigenvalues(W), dtype=complex)
        ax.scatter(ev.real, ev.imag, s=14, alpha=0.7, label=label)
    ax.set_aspect("equal")
    ax.set_xlabel("Re lambda")
    ax.set_ylabel("Im lambda")
    ax.grid(alpha=0.3)
    legend_outside(ax)
    return save(fig, path)
