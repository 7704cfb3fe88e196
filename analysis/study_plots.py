"""The study's figures (PNG and PDF, style of p2pfl.report.figures).

- convergence_vs_topology: final accuracy and rounds to target against diameter and against
  spectral gap (log), mean ± sd over seeds as error bars: one marker per topology, or, with
  several algorithms, one series per algorithm (its topologies joined in order of x);
- curves_by_diameter, curves_by_gap: test accuracy and consensus distance per round (mean over
  the seeds that finished, ± sd band), coloured by diameter or gap with a colour bar (one pair
  of figures per algorithm when there are several: curves_by_diameter_<algorithm>, ...);
- sweep_<label>: for each sweep, final accuracy, rounds to target, diameter and gap against the
  swept value (on a log axis where the values span a factor 10 or more), a series per
  algorithm;
- curves_time (runs with [network] enabled): every run's curves against simulated time.

Time-varying schedules are marked apart (hollow markers, dashed curves): their diameter is that
of the union over a min_B window and their gap is 1 - the per-round rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import ListedColormap, LogNorm, Normalize
from matplotlib.lines import Line2D

from p2pfl.report.figures import (
    legend_outside,
    log_axis,
    log_floor,
    log_ticks,
    marker,
    plt,
    round_axis,
    save,
    series_style,
)

TIME_VARYING = "time-varying"
AXES = {"diameter": "diameter (hops)", "spectral_gap": "spectral gap (1 - SLEM)"}
SPREAD = 0.03  # sideways step between points with equal x, as a share of the axis (a marker)
MAX_BANDS = 5  # curves figures draw ± sd bands up to this many topologies (more: a grey blob)
GEOMETRIC = 10  # a sweep whose values span this factor or more gets a log x axis
METRICS = {"final_acc": "final test accuracy (%)", "rounds_to_target": "rounds to target"}


def _mean(m: dict[str, Any], key: str) -> float | None:
    value = m.get(f"{key}_mean")
    return None if value is None or not math.isfinite(value) else value


def _caption(means: list[dict[str, Any]], seeds: int, spread: str, marked: str) -> str:
    """'mean over k seeds<spread>' (or 'one seed'), and how time-varying schedules are drawn
    (`marked`: "hollow markers" or "dashed")."""
    parts = [f"mean over {seeds} seeds{spread}" if seeds > 1 else "one seed"]
    if any(m["kind"] == TIME_VARYING for m in means):
        parts.append(f"{marked}: time-varying (diameter of a min_B-window union, "
                     "gap 1 - per-round rate)")
    return "; ".join(parts)


def _key(m: dict[str, Any]) -> tuple[str, str]:
    """A mean row's (algorithm, topology label)."""
    return m.get("algorithm", ""), m["label"]


def _dodged(means: list[dict[str, Any]], key: str, log: bool) -> dict[tuple[str, str], float]:
    """(algorithm, label) -> where to draw its `key` on the x axis: points that share a value
    are spread sideways by SPREAD of the axis (of its decades on a log axis), so that none hides
    another."""
    values = {_key(m): v for m in means if (v := _mean(m, key)) is not None}
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    span = (math.log10(high / low) if log and low > 0 else high - low) or 1.0
    ties: dict[float, list[tuple[str, str]]] = {}
    for label, v in values.items():
        ties.setdefault(round(v, 9), []).append(label)
    shown = {}
    for group in ties.values():
        for j, label in enumerate(group):
            shift = (j - (len(group) - 1) / 2) * SPREAD * span
            shown[label] = values[label] * 10**shift if log else values[label] + shift
    return shown


def _label_place(x: float, xs: list[float], log: bool) -> tuple[tuple[int, int], str]:
    """Offset (points) and alignment of a topology's label at `x` among the labelled `xs`
    (sorted): above and below in turn from left to right, so that neighbours do not overlap,
    and to the left of the point in the right quarter of the range, so that it stays inside."""
    scale = (lambda v: math.log10(v) if v > 0 else 0.0) if log else (lambda v: v)
    low, high = scale(xs[0]), scale(xs[-1])
    right = high > low and (scale(x) - low) / (high - low) > 0.75
    dy = 6 if xs.index(x) % 2 == 0 else -12
    return ((-4, dy), "right") if right else ((4, dy), "left")


def target_label(target: float | None, metric: str = "test_acc") -> str:
    """The y label of rounds to the study's target."""
    if target is None:
        return METRICS["rounds_to_target"]
    if metric == "test_loss":
        return f"rounds to test loss {target:g}"
    return f"rounds to {100 * target:.1f} % test accuracy"


def plot_convergence_vs_topology(means: list[dict[str, Any]], path: Path, target: float | None,
                                 rounds: int, title: str = "",
                                 metric: str = "test_acc") -> list[Path]:
    """2 x 2: final accuracy and rounds to `target` against diameter and spectral gap; with
    several algorithms, a series per algorithm, each topology labelled on the first series."""
    means = [m for m in means if m["status"] == "ok"]
    algorithms = list(dict.fromkeys(m.get("algorithm", "") for m in means))
    several = len(algorithms) > 1
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), layout="constrained")
    seeds = max((m["finished"] for m in means), default=1)
    where = {key: _dodged(means, key, key == "spectral_gap") for key in AXES}
    first = {key: sorted(x for (algorithm, _), x in where[key].items()
                         if algorithm == algorithms[0]) for key in AXES}
    handles = []
    for i, m in enumerate(means):
        series = algorithms.index(m.get("algorithm", "")) if several else i
        style = series_style(series)
        hollow = m["kind"] == TIME_VARYING
        look = dict(marker=marker(series), color=style["color"], markersize=7,
                    markerfacecolor="none" if hollow else style["color"], linestyle="none")
        for row, y_key in enumerate(METRICS):
            for col, x_key in enumerate(AXES):
                x, y = where[x_key].get(_key(m)), _mean(m, y_key)
                if x is None:
                    continue
                ax = axes[row][col]
                if several and series == 0 and row == 0 and y is not None:
                    offset, align = _label_place(x, first[x_key], x_key == "spectral_gap")
                    ax.annotate(m["label"], (x, 100 * y), textcoords="offset points",
                                xytext=offset, ha=align, fontsize=7, color="0.35")
                if y is None and y_key == "rounds_to_target":  # no seed reached the target
                    ax.plot([x], [rounds], **{**look, "marker": "^", "markerfacecolor": "none"})
                    continue
                if y is None:
                    continue
                scale = 100 if y_key == "final_acc" else 1
                ysd = m.get(f"{y_key}_sd")
                xsd = m.get(f"{x_key}_sd")
                ax.errorbar([x], [scale * y], yerr=None if ysd is None else [scale * ysd],
                            xerr=None if not xsd else [xsd], capsize=3, elinewidth=1, **look)
        if not several:
            reached = (f" (target: {m['reached']}/{m['finished']} seeds)"
                       if m["reached"] < m["finished"] else "")
            handles.append((Line2D([], [], **look), f"{m['label']}{reached}"))
        elif not any(label == m["algorithm"] for _, label in handles):
            handles.append((Line2D([], [], **{**look, "linestyle": "-", "linewidth": 1}),
                            m["algorithm"]))
    if several:
        _join_series(axes, means, algorithms, where)
    for row, y_key in enumerate(METRICS):
        for col, x_key in enumerate(AXES):
            ax = axes[row][col]
            ax.set_xlabel(AXES[x_key])
            ax.set_ylabel(target_label(target, metric) if y_key == "rounds_to_target"
                          else METRICS[y_key])
            if y_key == "rounds_to_target":
                round_axis(ax, "y")
            if x_key == "diameter":
                round_axis(ax, "x")
            else:
                gaps = [g for m in means if (g := _mean(m, "spectral_gap"))]
                if gaps:
                    log_axis(ax, "x", min(gaps) / 1.5, max(gaps) * 1.5)
                    ax.set_xlim(min(gaps) / 1.5, max(gaps) * 1.5)
            ax.grid(alpha=0.3, which="both")
    if any(m["reached"] == 0 for m in means):
        handles.append((Line2D([], [], marker="^", color="0.3", markerfacecolor="none",
                               linestyle="none"), "target not reached (drawn at the last round)"))
    if any(m["kind"] == TIME_VARYING for m in means):
        handles.append((Line2D([], [], marker="o", color="0.3", markerfacecolor="none",
                               linestyle="none"), "time-varying (window-union diameter, "
                        "gap 1 - per-round rate)"))
    spread = any(len(set(where[key].values())) > len({round(_mean(m, key) or 0, 9)
                                                      for m in means}) for key in AXES)
    axes[0][1].legend([h for h, _ in handles], [lab for _, lab in handles], loc="upper left",
                      bbox_to_anchor=(1.02, 1.0), fontsize=8, borderaxespad=0.0)
    stats = f"mean ± sd over {seeds} seeds" if seeds > 1 else "one seed"
    note = "; equal x values spread sideways" if spread else ""
    fig.suptitle(f"{title + ': ' if title else ''}{stats}{note}", fontsize=10)
    return save(fig, path)


def _join_series(axes: Any, means: list[dict[str, Any]], algorithms: list[str],
                 where: dict[str, dict[tuple[str, str], float]]) -> None:
    """A thin line through each algorithm's points, in order of x, on every panel."""
    for series, algorithm in enumerate(algorithms):
        mine = [m for m in means if m.get("algorithm", "") == algorithm]
        color = series_style(series)["color"]
        for row, y_key in enumerate(METRICS):
            scale = 100 if y_key == "final_acc" else 1
            for col, x_key in enumerate(AXES):
                points = sorted((x, scale * y) for m in mine
                                if (x := where[x_key].get(_key(m))) is not None
                                and (y := _mean(m, y_key)) is not None)
                if len(points) > 1:
                    axes[row][col].plot(*zip(*points), color=color, linewidth=0.8, alpha=0.6)


def _band(histories: Sequence[list[dict[str, Any]]], key: str
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rounds, mean, sd) of `key` over the histories, at the rounds every history has."""
    per_round: dict[int, list[float]] = {}
    for history in histories:
        for r in history:
            if r.get(key) is not None and math.isfinite(r[key]):
                per_round.setdefault(r["round"], []).append(r[key])
    rounds = np.array(sorted(t for t, v in per_round.items() if len(v) == len(histories)))
    values = [per_round[t] for t in rounds]
    mean = np.array([np.mean(v) for v in values])
    sd = np.array([np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in values])
    return rounds, mean, sd


def _norm(values: list[float], log: bool) -> Normalize:
    """The colour scale of `values` (log: of the positive ones), at least a factor 2.25 (log,
    widened around its middle) or 1 (linear) wide, so that its colour bar has readable ticks."""
    positive = [v for v in values if v > 0]
    if log and positive:
        low, high = min(positive), max(positive)
        middle = math.sqrt(low * high)
        return LogNorm(min(low, middle / 1.5), max(high, middle * 1.5))
    low = min(values, default=0.0)
    return Normalize(low, max(max(values, default=1.0), low + 1))


def plot_curves(means: list[dict[str, Any]], histories: dict[tuple[str, str, int], Any],
                color_by: str, path: Path, title: str = "") -> list[Path]:
    """Test accuracy and consensus distance per round, one curve per topology of one algorithm
    (`means` rows of it; mean over seeds, band ± sd), coloured by `color_by` ("diameter" or
    "spectral_gap") with a colour bar."""
    shown = [m for m in means if m["status"] == "ok" and _mean(m, color_by) is not None]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    norm = _norm([_mean(m, color_by) for m in shown], color_by == "spectral_gap")
    cmap = ListedColormap(plt.get_cmap("viridis")(np.linspace(0.0, 0.85, 256)))  # no yellow
    bands = len(shown) <= MAX_BANDS
    curves = {m["label"]: {key: _band([h for (algorithm, label, _), h in histories.items()
                                       if (algorithm, label) == _key(m)], key)
                           for key in ("test_acc", "consensus_dist")} for m in shown}
    floor = log_floor([c["consensus_dist"][1] for c in curves.values()])
    for i, m in enumerate(shown):
        color = cmap(norm(max(_mean(m, color_by), norm.vmin)))
        style = dict(color=color, linestyle="--" if m["kind"] == TIME_VARYING else "-",
                     marker=marker(i), markersize=4, linewidth=1.3,
                     markerfacecolor=color if i // 8 % 2 == 0 else "white")  # past 8: hollow
        for ax, key, scale in ((axes[0], "test_acc", 100), (axes[1], "consensus_dist", 1)):
            rounds, mean, sd = curves[m["label"]][key]
            if not len(rounds):
                continue
            label = m["label"]
            if key == "consensus_dist" and floor is not None:
                if mean.max() < floor:
                    label += " (exact consensus: on the floor)"
                mean = np.maximum(mean, floor)
            ax.plot(rounds, scale * mean, label=label,
                    markevery=max(1, len(rounds) // 8), **style)
            if bands and key == "test_acc" and m["finished"] > 1:
                ax.fill_between(rounds, scale * (mean - sd), scale * (mean + sd), color=color,
                                alpha=0.1, linewidth=0)
    axes[0].set_ylabel("test accuracy of the average model (%)")
    axes[1].set_ylabel("consensus distance")
    if floor is not None:
        top = max(line.get_ydata().max() for line in axes[1].get_lines())
        axes[1].set_ylim(floor / 2, top * 2)
        log_axis(axes[1], "y", floor / 2, top * 2)
    for ax in axes:
        ax.set_xlabel("round")
        round_axis(ax)
        ax.grid(alpha=0.3, which="both")
    bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=list(axes),
                       location="bottom", shrink=0.5, aspect=40, pad=0.02)
    bar.set_label(AXES[color_by])
    if isinstance(norm, LogNorm):
        log_ticks(bar.ax.xaxis, norm.vmin, norm.vmax)
    else:
        bar.ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    legend_outside(axes[1])
    seeds = max((m["finished"] for m in shown), default=1)
    caption = _caption(shown, seeds, ", bands ± sd" if bands
                       else " (± sd: see convergence_vs_topology)", "dashed")
    fig.suptitle(f"{title}: {caption}" if title else caption, fontsize=10)
    return save(fig, path)
