"""The study's curves figures: test accuracy and consensus distance per round, one curve per
topology of one algorithm (mean over the seeds that finished, ± sd band up to MAX_BANDS
topologies), coloured by a recorded metric with a colour bar.

Every colour map runs in one sense: dark = better connected (small diameter, mixing time or
heterogeneity; large spectral gap or effective neighbours), light = worse. A consensus distance
of 0 (exact consensus, as on the complete graph) has no place on a log axis: those rounds are
not drawn as a line but marked with triangles on the bottom edge, and the legend says so.
Time-varying topologies are dashed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import ListedColormap, LogNorm, Normalize

from analysis.study_measure import GAPS, METRICS, metric_label
from analysis.study_plots import GEOMETRIC, INTEGER, TIME_VARYING, _key, _mean, special
from p2pfl.report.figures import (
    EXACT,
    legend_outside,
    log_axis,
    log_ticks,
    marker,
    plt,
    round_axis,
    save,
)

MAX_BANDS = 5  # ± sd bands up to this many topologies (more: a grey blob)


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


def _norm(values: list[float], key: str) -> Normalize:
    """The colour scale of metric `key`'s `values`: log for a gap, or for positive values
    spanning a factor GEOMETRIC; at least a factor 2.25 (log, widened around its middle), 1
    (a count) or a tenth of the largest value wide, so that its colour bar has readable
    ticks."""
    low, high = min(values, default=0.0), max(values, default=1.0)
    if low > 0 and (key in GAPS or high >= GEOMETRIC * low):
        middle = math.sqrt(low * high)
        return LogNorm(min(low, middle / 1.5), max(high, middle * 1.5))
    width = 1.0 if key in INTEGER else 0.1 * abs(high) or 1.0
    return Normalize(low, max(high, low + width))


def _colormap(larger_is_better: bool) -> ListedColormap:
    """viridis without its yellow, dark at the better-connected end."""
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 0.85, 256))
    return ListedColormap(colors[::-1] if larger_is_better else colors)


def _name(m: dict[str, Any], color_by: str) -> str:
    """A curve's legend label: the topology, on a gap scale whether it averages exactly, and
    whose runs it reused."""
    column = special(m, color_by) if color_by in GAPS else None
    extras = [f"exact averaging in {column[0]}"] if column else []
    if m.get("same_runs_as"):
        extras.append(f"the runs of {m['same_runs_as']}")
    return m["label"] + (f" ({'; '.join(extras)})" if extras else "")


def plot_curves(means: list[dict[str, Any]], histories: dict[tuple[str, str, int], Any],
                color_by: str, path: Path, title: str = "", gamma: float = 0.9) -> list[Path]:
    """Test accuracy and consensus distance per round, one curve per topology of one algorithm,
    coloured by the metric `color_by`.

    Parameters
    ----------
    means : the mean rows of the algorithm's topologies.
    histories : {(algorithm, label, seed): per-round records}.
    color_by : a key of analysis.study_measure.METRICS.
    path : the figure's path (PNG; a PDF beside it).
    title : the figure's title.
    gamma : the decay of the effective number of neighbours (for the colour bar's label).

    Returns
    -------
    list of the Paths written.
    """
    shown = [m for m in means if m["status"] == "ok" and _mean(m, color_by) is not None]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    values = [_mean(m, color_by) for m in shown]
    norm = _norm(values, color_by)
    cmap = _colormap(METRICS[color_by].larger_is_better)
    bands = len(shown) <= MAX_BANDS
    curves = {m["label"]: {key: _band([h for (algorithm, label, _), h in histories.items()
                                       if (algorithm, label) == _key(m)], key)
                           for key in ("test_acc", "consensus_dist")} for m in shown}
    top = max((c["consensus_dist"][1].max() for c in curves.values()
               if len(c["consensus_dist"][1])), default=0.0)
    for i, m in enumerate(shown):
        color = cmap(norm(max(_mean(m, color_by), norm.vmin)))
        style = dict(color=color, linestyle="--" if m["kind"] == TIME_VARYING else "-",
                     marker=marker(i), markersize=4, linewidth=1.3,
                     markerfacecolor=color if i // 8 % 2 == 0 else "white")  # past 8: hollow
        label = _name(m, color_by)
        rounds, mean, sd = curves[m["label"]]["test_acc"]
        if len(rounds):
            axes[0].plot(rounds, 100 * mean, label=label, markevery=max(1, len(rounds) // 8),
                         **style)
            if bands and m["finished"] > 1:
                axes[0].fill_between(rounds, 100 * (mean - sd), 100 * (mean + sd), color=color,
                                     alpha=0.1, linewidth=0)
        rounds, mean, _ = curves[m["label"]]["consensus_dist"]
        zero = mean <= EXACT * top  # exact consensus, or its rounding noise
        if len(rounds) and zero.any():
            label += ("\n(consensus distance 0: \u25bc on the bottom edge)" if zero.all()
                      else "\n(0 where \u25bc on the bottom edge)")
            axes[1].plot(rounds[zero], np.zeros(zero.sum()), linestyle="none", marker="v",
                         color=color, markersize=6, clip_on=False,
                         transform=axes[1].get_xaxis_transform(), markevery=max(
                             1, int(zero.sum()) // 8))
        if len(rounds):
            axes[1].plot(rounds, np.where(zero, np.nan, mean), label=label,
                         markevery=max(1, len(rounds) // 8), **style)
    axes[0].set_ylabel("test accuracy of the average model (%)")
    axes[1].set_ylabel("consensus distance")
    positive = [v for line in axes[1].get_lines() for v in line.get_ydata()
                if np.isfinite(v) and v > 0 and line.get_linestyle() != "None"]
    if positive:
        low, high = min(positive) / 2, max(positive) * 2
        axes[1].set_ylim(low, high)
        log_axis(axes[1], "y", low, high)
    for ax in axes:
        ax.set_xlabel("round")
        round_axis(ax)
        ax.grid(alpha=0.3, which="both")
    bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=list(axes),
                       location="bottom", shrink=0.5, aspect=40, pad=0.02)
    better = ("closer to the global class mix" if color_by == "heterogeneity"
              else "better connected")
    bar.set_label(f"{metric_label(color_by, gamma)}: dark = {better}")
    if isinstance(norm, LogNorm):
        log_ticks(bar.ax.xaxis, norm.vmin, norm.vmax)
    else:
        bar.ax.xaxis.set_major_locator(plt.MaxNLocator(5, integer=color_by in INTEGER))
    legend_outside(axes[1])
    seeds = max((m["finished"] for m in shown), default=1)
    parts = [f"mean over {seeds} seeds" + (", bands ± sd" if bands else
                                            " (± sd: see convergence_vs_topology)")
             if seeds > 1 else "one seed"]
    if any(m["kind"] == TIME_VARYING for m in shown):
        parts.append("dashed: time-varying")
    caption = "; ".join(parts)
    fig.suptitle(f"{title}: {caption}" if title else caption, fontsize=10)
    return save(fig, path)
