"""The study's figures, drawn into its folder: `plot_study` (every figure of a StudyResult) and
`plot_sweep` (one sweep's); the others are analysis.study_plots' (convergence_vs_topology) and
analysis.study_curves' (curves_by_<metric>)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.study_curves import plot_curves
from analysis.study_measure import DEFAULT_X, metric_label
from analysis.study_plots import (
    GEOMETRIC,
    RESULTS,
    TIME_VARYING,
    _mean,
    plot_convergence_vs_topology,
    target_label,
)
from analysis.study_spec import file_stem
from p2pfl.report.figures import log_axis, plt, round_axis, save, series_style
from p2pfl.report.plots import plot_histories

CURVES = {"diameter": "curves_by_diameter", "spectral_gap_per_round": "curves_by_gap"}


def plot_sweep(means: list[dict[str, Any]], sweep: str, path: Path, target: float | None,
               rounds: int, title: str = "", metric: str = "test_acc") -> list[Path]:
    """1 x 3 for one sweep: final accuracy, rounds to target, and the topology's diameter and
    spectral gap against the swept value.

    Rounds to target: a series per algorithm; a lower bound, where some seeds never reached the
    target, drawn with an upward arrow. Diameter on the left axis, spectral gap per round on the
    right (log). Error bars ± sd over seeds.

    Parameters
    ----------
    means : the study's mean rows.
    sweep : the sweep's label.
    path : the figure's path (PNG; a PDF beside it).
    target : the common target, or None.
    rounds : the longest run's rounds (where censored points are drawn).
    title : the figure's title.
    metric : "test_acc" or "test_loss", the target's metric.

    Returns
    -------
    list of the Paths written.
    """
    rows = [m for m in means if m["sweep"] == sweep and m["status"] == "ok"]
    algorithms = list(dict.fromkeys(m.get("algorithm", "") for m in rows))
    vary = rows[0]["vary"] if rows else "value"
    xs = list(dict.fromkeys(m["value"] for m in rows))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), layout="constrained")
    for series, algorithm in enumerate(algorithms):
        mine = [m for m in rows if m.get("algorithm", "") == algorithm]
        style = series_style(series)
        for ax, key in zip(axes[:2], RESULTS):
            scale = 100 if key == "final_acc" else 1
            points = [(m["value"], _mean(m, key), m.get(f"{key}_sd"),
                       bool(m.get(f"{key}_lower_bound"))) for m in mine]
            done = [(x, scale * y, None if sd is None else scale * sd, bound)
                    for x, y, sd, bound in points if y is not None]
            label = algorithm if len(algorithms) > 1 else None
            if done:
                ax.plot([p[0] for p in done], [p[1] for p in done], color=style["color"],
                        linewidth=1, label=label)
            for x, y, sd, bound in done:
                ax.errorbar([x], [y], yerr=[0.07 * (rounds + 1) if bound else sd or 0.0],
                            lolims=bound, marker=style["marker"], capsize=3,
                            color=style["color"])
    if any(m.get("rounds_to_target_lower_bound") for m in rows):
        axes[1].plot([], [], "^", color="0.3", label="lower bound: some seeds never reached "
                     "the target")
        axes[1].axhline(rounds, color="0.4", linestyle=":", linewidth=1,
                        label=f"last round ({rounds})")
        axes[1].set_ylim(top=max(axes[1].get_ylim()[1], rounds + 1 + 0.14 * (rounds + 1)))
    for ax, key in zip(axes[:2], RESULTS):
        ax.set_ylabel(target_label(target, metric) if key == "rounds_to_target"
                      else RESULTS[key])
        if key == "rounds_to_target":
            round_axis(ax, "y")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    first = [m for m in rows if m.get("algorithm", "") == (algorithms[0] if algorithms else "")]
    diam = [(m["value"], _mean(m, "diameter"), m.get("diameter_sd")) for m in first
            if _mean(m, "diameter") is not None]
    if diam:
        axes[2].errorbar([d[0] for d in diam], [d[1] for d in diam],
                         yerr=[d[2] or 0.0 for d in diam], marker="o", capsize=3, color="C0")
    axes[2].set_ylabel("diameter (hops)", color="C0")
    round_axis(axes[2], "y")
    twin = axes[2].twinx()
    gaps = [(m["value"], _mean(m, "spectral_gap_per_round"), m.get("spectral_gap_per_round_sd"))
            for m in first if _mean(m, "spectral_gap_per_round")]
    if gaps:
        twin.errorbar([g[0] for g in gaps], [g[1] for g in gaps],
                      yerr=[g[2] or 0.0 for g in gaps], fmt="s--", capsize=3, color="C1")
        low, high = min(g[1] for g in gaps), max(g[1] for g in gaps)
        twin.set_ylim(low / 1.5, high * 1.5)
        log_axis(twin, "y", low / 1.5, high * 1.5)
    twin.set_ylabel(metric_label("spectral_gap_per_round"), color="C1")
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
    note = ("; time-varying: diameter of a min_B-window union"
            if any(m["kind"] == TIME_VARYING for m in rows) else "")
    seeds = max((m["finished"] for m in rows), default=1)
    spread = f"mean ± sd over {seeds} seeds" if seeds > 1 else "one seed"
    fig.suptitle(f"{title + ': ' if title else ''}sweep {sweep!r} over {vary}, "
                 f"{spread}{note}", fontsize=10)
    return save(fig, path)


def plot_study(result: Any, out: Path, title: str = "") -> list[Path]:
    """Every figure of a StudyResult into `out`.

    Parameters
    ----------
    result : the StudyResult.
    out : the figure folder.
    title : the figures' title.

    Returns
    -------
    list of the Paths written; none if no run finished.
    """
    means = [m for m in result.means if m["status"] == "ok"]
    if not means:
        return []
    metric = getattr(result, "target_metric", "test_acc")
    rounds = max(len(h) for h in result.histories.values())
    gamma = getattr(result, "gamma", 0.9)
    files = plot_convergence_vs_topology(means, out / "convergence_vs_topology", result.target,
                                         rounds, title, metric,
                                         getattr(result, "x", DEFAULT_X), gamma,
                                         getattr(result, "target_note", ""),
                                         tuple(getattr(result, "correlations", ())))
    ok = {(r.get("algorithm", ""), r["label"], r["seed"]) for r in result.rows
          if r["status"] == "ok"}
    finished = {run: h for run, h in result.histories.items() if run in ok}  # as the means
    algorithms = list(dict.fromkeys(m.get("algorithm", "") for m in means))
    for algorithm in algorithms:
        mine = [m for m in means if m.get("algorithm", "") == algorithm]
        suffix = f"_{file_stem(algorithm)}" if len(algorithms) > 1 else ""
        named = f"{algorithm}, {title}" if len(algorithms) > 1 else title
        for key in dict.fromkeys((*DEFAULT_X, *getattr(result, "x", ()))):
            name = CURVES.get(key, f"curves_by_{key}")
            files += plot_curves(mine, finished, key, out / f"{name}{suffix}", named, gamma)
    for sweep in dict.fromkeys(m["sweep"] for m in means if m["sweep"]):
        files += plot_sweep(means, sweep, out / f"sweep_{file_stem(sweep)}", result.target,
                            rounds, title, metric)
    several = len(algorithms) > 1
    timed = {f"{algorithm + ' on ' if several else ''}{label} (seed {seed})": h
             for (algorithm, label, seed), h in result.histories.items()
             if h}  # a run that diverged in its first round has no curve
    if timed and all(any("sim_time_s" in r for r in h) for h in timed.values()):
        files += plot_histories(timed, out / "curves_time", title, x="time")
    return files
