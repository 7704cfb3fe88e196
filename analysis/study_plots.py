"""The topology study's figures (PNG and PDF, style of p2pfl.report.figures).

- convergence_vs_topology: final accuracy and rounds to target against diameter and against
  spectral gap (log), one marker per topology, mean ± sd over seeds as error bars;
- curves_by_diameter, curves_by_gap: test accuracy and consensus distance per round (mean over
  the seeds that finished, ± sd band), coloured by diameter or gap with a colour bar;
- sweep_<label>: for each sweep, final accuracy, rounds to target, diameter and gap against the
  swept value (on a log axis where the values span a factor 10 or more);
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

from p2pfl.config import folder_name
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
from p2pfl.report.plots import plot_histories

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
    return "\n".join(parts)


def _dodged(means: list[dict[str, Any]], key: str, log: bool) -> dict[str, float]:
    """label -> where to draw its `key` on the x axis: topologies that share a value are spread
    sideways by SPREAD of the axis (of its decades on a log axis), so that none hides another."""
    values = {m["label"]: v for m in means if (v := _mean(m, key)) is not None}
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    span = (math.log10(high / low) if log and low > 0 else high - low) or 1.0
    ties: dict[float, list[str]] = {}
    for label, v in values.items():
        ties.setdefault(round(v, 9), []).append(label)
    shown = {}
    for group in ties.values():
        for j, label in enumerate(group):
            shift = (j - (len(group) - 1) / 2) * SPREAD * span
            shown[label] = values[label] * 10**shift if log else values[label] + shift
    return shown


def plot_convergence_vs_topology(means: list[dict[str, Any]], path: Path, target: float | None,
                                 rounds: int, title: str = "") -> list[Path]:
    """2 x 2: final accuracy and rounds to `target` against diameter and spectral gap."""
    means = [m for m in means if m["status"] == "ok"]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    seeds = max((m["finished"] for m in means), default=1)
    where = {key: _dodged(means, key, key == "spectral_gap") for key in AXES}
    handles = []
    for i, m in enumerate(means):
        style = series_style(i)
        hollow = m["kind"] == TIME_VARYING
        look = dict(marker=marker(i), color=style["color"], markersize=7,
                    markerfacecolor="none" if hollow else style["color"], linestyle="none")
        for row, y_key in enumerate(METRICS):
            for col, x_key in enumerate(AXES):
                x, y = where[x_key].get(m["label"]), _mean(m, y_key)
                if x is None:
                    continue
                ax = axes[row][col]
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
        reached = (f" (target: {m['reached']}/{m['finished']} seeds)"
                   if m["reached"] < m["finished"] else "")
        handles.append((Line2D([], [], **look), f"{m['label']}{reached}"))
    for row, y_key in enumerate(METRICS):
        for col, x_key in enumerate(AXES):
            ax = axes[row][col]
            ax.set_xlabel(AXES[x_key])
            ax.set_ylabel(f"rounds to {100 * target:.1f} % test accuracy"
                          if y_key == "rounds_to_target" and target else METRICS[y_key])
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
    fig.legend([h for h, _ in handles], [lab for _, lab in handles], loc="center left",
               bbox_to_anchor=(1.0, 0.5), fontsize=8, borderaxespad=0.0)
    caption = _caption(means, seeds, ", error bars ± sd", "hollow markers")
    if any(len(set(where[key].values())) > len({round(_mean(m, key) or 0, 9) for m in means})
           for key in AXES):
        caption = caption.replace("± sd", "± sd; equal x values spread sideways", 1)
    fig.suptitle(f"{title}\n{caption}" if title else caption, fontsize=10)
    return save(fig, path)


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


def plot_curves(means: list[dict[str, Any]], histories: dict[tuple[str, int], Any],
                color_by: str, path: Path, title: str = "") -> list[Path]:
    """Test accuracy and consensus distance per round, one curve per topology (mean over seeds,
    band ± sd), coloured by `color_by` ("diameter" or "spectral_gap") with a colour bar."""
    shown = [m for m in means if m["status"] == "ok" and _mean(m, color_by) is not None]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    norm = _norm([_mean(m, color_by) for m in shown], color_by == "spectral_gap")
    cmap = ListedColormap(plt.get_cmap("viridis")(np.linspace(0.0, 0.85, 256)))  # no yellow
    bands = len(shown) <= MAX_BANDS
    curves = {m["label"]: {key: _band([h for (label, _), h in histories.items()
                                       if label == m["label"]], key)
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
    fig.suptitle(f"{title}\n{caption}" if title else caption, fontsize=10)
    return save(fig, path)


def plot_sweep(means: list[dict[str, Any]], sweep: str, path: Path, target: float | None,
               rounds: int, title: str = "") -> list[Path]:
    """1 x 3 for one sweep: final accuracy, rounds to target, and diameter (left axis) with
    spectral gap (right axis, log) against the swept value; error bars ± sd over seeds."""
    rows = [m for m in means if m["sweep"] == sweep and m["status"] == "ok"]
    vary = rows[0]["vary"] if rows else "value"
    xs = [m["value"] for m in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, key in zip(axes[:2], METRICS):
        scale = 100 if key == "final_acc" else 1
        points = [(m["value"], _mean(m, key), m.get(f"{key}_sd")) for m in rows]
        done = [(x, scale * y, None if sd is None else scale * sd) for x, y, sd in points
                if y is not None]
        if done:
            ax.errorbar([p[0] for p in done], [p[1] for p in done],
                        yerr=[p[2] or 0.0 for p in done], marker="o", capsize=3, color="C0")
        missed = [x for x, y, _ in points if y is None]
        if missed and key == "rounds_to_target":
            ax.plot(missed, [rounds] * len(missed), "^", color="C0", markerfacecolor="none",
                    label="target not reached")
            ax.legend(fontsize=8)
        ax.set_ylabel(f"rounds to {100 * target:.1f} % test accuracy"
                      if key == "rounds_to_target" and target else METRICS[key])
        if key == "rounds_to_target":
            round_axis(ax, "y")
    diam = [(m["value"], _mean(m, "diameter"), m.get("diameter_sd")) for m in rows
            if _mean(m, "diameter") is not None]
    if diam:
        axes[2].errorbar([d[0] for d in diam], [d[1] for d in diam],
                         yerr=[d[2] or 0.0 for d in diam], marker="o", capsize=3, color="C0")
    axes[2].set_ylabel("diameter (hops)", color="C0")
    round_axis(axes[2], "y")
    twin = axes[2].twinx()
    gaps = [(m["value"], _mean(m, "spectral_gap"), m.get("spectral_gap_sd")) for m in rows
            if _mean(m, "spectral_gap")]
    if gaps:
        twin.errorbar([g[0] for g in gaps], [g[1] for g in gaps],
                      yerr=[g[2] or 0.0 for g in gaps], fmt="s--", capsize=3, color="C1")
        low, high = min(g[1] for g in gaps), max(g[1] for g in gaps)
        twin.set_ylim(low / 1.5, high * 1.5)
        log_axis(twin, "y", low / 1.5, high * 1.5)
    twin.set_ylabel(AXES["spectral_gap"], color="C1")
    numeric = bool(xs) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in xs)
    geometric = numeric and min(xs) > 0 and max(xs) >= GEOMETRIC * min(xs)
    for ax in axes:
        ax.set_xlabel(vary)
        if geometric:  # 4, 8, ..., 256 nodes: evenly spaced, not crowded at the left
            ax.set_xscale("log")
            ax.set_xticks([], minor=True)
        if numeric:
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.grid(alpha=0.3)
    note = ("; time-varying: diameter of a min_B-window union, gap 1 - per-round rate"
            if any(m["kind"] == TIME_VARYING for m in rows) else "")
    seeds = max((m["finished"] for m in rows), default=1)
    spread = f"mean ± sd over {seeds} seeds" if seeds > 1 else "one seed"
    fig.suptitle(f"{title + chr(10) if title else ''}sweep {sweep!r} over {vary}: "
                 f"{spread}{note}", fontsize=10)
    return save(fig, path)


def plot_study(result: Any, out: Path, title: str = "") -> list[Path]:
    """Every figure of a StudyResult into `out`; none if no run finished."""
    means = [m for m in result.means if m["status"] == "ok"]
    if not means:
        return []
    rounds = max(len(h) for h in result.histories.values())
    files = plot_convergence_vs_topology(means, out / "convergence_vs_topology", result.target,
                                         rounds, title)
    ok = {(r["label"], r["seed"]) for r in result.rows if r["status"] == "ok"}
    finished = {run: h for run, h in result.histories.items() if run in ok}  # as the means
    for key, name in (("diameter", "curves_by_diameter"), ("spectral_gap", "curves_by_gap")):
        files += plot_curves(means, finished, key, out / name, title)
    for sweep in dict.fromkeys(m["sweep"] for m in means if m["sweep"]):
        files += plot_sweep(means, sweep, out / f"sweep_{folder_name(sweep)}", result.target,
                            rounds, title)
    timed = {f"{label} (seed {seed})": h for (label, seed), h in result.histories.items()
             if h}  # a run that diverged in its first round has no curve
    if timed and all(any("sim_time_s" in r for r in h) for h in timed.values()):
        files += plot_histories(timed, out / "curves_time", title, x="time")
    return files
