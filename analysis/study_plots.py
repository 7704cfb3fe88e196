"""The study's summary figure, convergence_vs_topology (PNG and PDF, style of
p2pfl.report.figures), and what the study's figures share.

Final accuracy and rounds to target against one or more recorded metrics (`x`, default diameter
and spectral gap per round), mean ± sd over seeds as error bars. Every point is at its true x:
nothing is spread sideways and no two topologies are joined by a line; topologies are told
apart by marker (and colour, with one algorithm) in the legend, algorithms by colour.

- A topology that averages exactly (the complete graph in 1 round, the one-peer exponential
  graph on 2^k nodes in k) has spectral gap 1 per round and per period, whatever k: on a gap
  axis these are drawn right of the numeric range, past a break, one column per k (fewer
  rounds further right), labelled "exact: k rds"; a topology that never averages exactly is
  drawn in a "never" column on the axis of rounds to exact averaging.
- Rounds to target that some seeds never reached are a lower bound (analysis.study_results):
  drawn with an upward arrow, and a dotted line marks the last round.
- A topology whose cells all reused another's runs (a sweep value equal to a topology of the
  study) is drawn on top of it; the legend says "the runs of <topology>".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedFormatter, FixedLocator, LogLocator, MaxNLocator, NullLocator

from analysis.study_measure import GAPS, metric_label
from p2pfl.report.figures import MARKERS, plt, round_axis, save

TIME_VARYING = "time-varying"
GEOMETRIC = 10  # values spanning this factor or more get a log axis (gaps: any positive)
RESULTS = {"final_acc": "final test accuracy (%)", "rounds_to_target": "rounds to target"}
INTEGER = ("diameter", "mixing_time", "exact_averaging_rounds", "edges")
LINEAR = ("diameter", "exact_averaging_rounds")  # hops and rounds: a linear axis, always
STRIP = 0.12  # width of one column past the break, as a share of the whole axis (at most)


def _mean(m: dict[str, Any], key: str) -> float | None:
    value = m.get(f"{key}_mean")
    return None if value is None or not math.isfinite(value) else value


def _key(m: dict[str, Any]) -> tuple[str, str]:
    """A mean row's (algorithm, topology label)."""
    return m.get("algorithm", ""), m["label"]


def target_label(target: float | None, metric: str = "test_acc") -> str:
    """The y label of rounds to the study's target.

    Parameters
    ----------
    target : the common target, or None.
    metric : "test_acc" or "test_loss".

    Returns
    -------
    str.
    """
    if target is None:
        return RESULTS["rounds_to_target"]
    if metric == "test_loss":
        return f"rounds to test loss {target:g}"
    return f"rounds to {100 * target:.1f} % test accuracy"


def special(m: dict[str, Any], key: str) -> tuple[str, float] | None:
    """Where a mean row is drawn past the axis break of `key`, if it is.

    An exact-averaging topology on a gap axis, a topology that never averages exactly on the axis
    of rounds to exact averaging.

    Parameters
    ----------
    m : a mean row.
    key : the x metric.

    Returns
    -------
    tuple (label, order) of the column past the break, or None for a point on the numeric range.
    """
    exact = m.get("exact_averaging_rounds_mean")
    if key in GAPS and exact is not None and math.isfinite(exact) and _mean(m, key) is not None:
        return f"{exact:g} rd{'s' * (exact != 1)}", -exact
    value = m.get(f"{key}_mean")
    return ("never", 0.0) if value is not None and math.isinf(value) else None


class Axis:
    """Where each topology is drawn along a metric: `x` ((algorithm, label) -> position),
    the numeric range and its scale, and the columns past the break."""

    def __init__(self, means: list[dict[str, Any]], key: str) -> None:
        self.key = key
        numeric = {_key(m): v for m in means
                   if special(m, key) is None and (v := _mean(m, key)) is not None}
        self.missing = list(dict.fromkeys(m["label"] for m in means
                                          if m.get(f"{key}_mean") is None))
        columns = sorted({s for m in means if (s := special(m, key))}, key=lambda s: s[1])
        values = list(numeric.values())
        self.log = bool(values) and min(values) > 0 and key not in LINEAR and (
            key in GAPS or max(values) >= GEOMETRIC * min(values))
        low, high = (min(values), max(values)) if values else (0.5, 1.0)
        sds = [(v, m.get(f"{key}_sd") or 0.0) for m in means
               if (v := numeric.get(_key(m))) is not None]  # the x error bars fit in too
        low = min([low, *(v - sd for v, sd in sds if v - sd > 0 or not self.log)])
        high = max([high, *(v + sd for v, sd in sds)])
        if self.log:  # a gap below 1 has no exact averaging: its range stops at 1
            self.low, self.edge = low / 1.5, min(high * 1.5, 1.0) if key in GAPS else high * 1.5
        else:
            pad = 0.08 * ((high - low) or max(abs(high), 1.0))
            self.low, self.edge = low - pad, high + pad
        self.x = dict(numeric)
        share = min(STRIP, 0.5 / (len(columns) + 0.6))  # of the axis, per column
        self.step = share / (1 - share * (len(columns) + 0.6))  # of the numeric range
        self.columns: list[tuple[float, str]] = []
        for i, (label, order) in enumerate(columns):
            where = self._past(i + 1)
            self.columns.append((where, label))
            self.x.update({_key(m): where for m in means if special(m, key) == (label, order)})
        self.high = self._past(len(columns) + 0.6) if columns else self.edge

    def _past(self, steps: float) -> float:
        """The position `steps` columns past the break."""
        if self.log:
            return self.edge * (self.edge / self.low) ** (self.step * steps)
        return self.edge + self.step * steps * (self.edge - self.low)

    def draw(self, ax: Any) -> None:
        """Scale, limits and ticks of `ax`'s x axis; the columns past the break shaded."""
        if self.log:
            ax.set_xscale("log")
            decades = math.log10(self.edge / self.low)
            subs = (1.0, 2.0, 5.0) if decades < 3 else (1.0,)
            ticks = LogLocator(subs=subs).tick_values(self.low, self.edge)
        else:
            ticks = MaxNLocator(5, integer=self.key in INTEGER,
                                steps=[1, 2, 2.5, 5, 10]).tick_values(self.low, self.edge)
        top = self.edge * (1 - 1e-9) if self.columns else self.edge  # the break: no tick
        ticks = [t for t in ticks if self.low <= t <= top] if self.x else []
        labels = [f"{t:g}" for t in ticks]
        if self.columns:
            ax.axvspan(self.edge, self.high, color="0.5", alpha=0.12, linewidth=0)
            ax.axvline(self.edge, color="0.4", linewidth=0.8, linestyle=(0, (4, 2)))
            if self.key in GAPS:
                ax.text(math.sqrt(self.edge * self.high) if self.log else
                        (self.edge + self.high) / 2, 0.98, "exact\naveraging in", ha="center",
                        va="top", fontsize=7, color="0.3", transform=ax.get_xaxis_transform())
            ticks += [where for where, _ in self.columns]
            labels += [label for _, label in self.columns]
        ax.set_xlim(self.low, self.high)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(FixedFormatter(labels))
        ax.xaxis.set_minor_locator(NullLocator())


def _look(i: int, m: dict[str, Any], algorithms: list[str]) -> dict[str, Any]:
    """Marker and colour of topology `i` (of its algorithm's `m`): with one algorithm, a colour
    and a marker per topology; with several, the algorithm's colour and the topology's marker
    (hollow from the ninth topology on), each algorithm's markers smaller than the one
    before, so that two algorithms' points at one place (the same runs) show as nested
    markers."""
    several = len(algorithms) > 1
    series = algorithms.index(m.get("algorithm", "")) if several else 0
    color = f"C{series % 10 if several else i % 10}"
    hollow = several and i // len(MARKERS) % 2 == 1
    return dict(marker=MARKERS[i % len(MARKERS)], color=color, linestyle="none",
                markersize=max(11 - 3 * series, 4) if several else 8,
                markeredgecolor=color,
                markerfacecolor="white" if hollow else to_rgba(color, 0.35))


def _rounds(m: dict[str, Any], rounds: int) -> tuple[float | None, bool]:
    """(rounds to target to draw, whether it is a lower bound)."""
    mean = m.get("rounds_to_target_mean")
    return (None if mean is None else float(mean)), bool(m.get("rounds_to_target_lower_bound"))


def plot_convergence_vs_topology(means: list[dict[str, Any]], path: Path, target: float | None,
                                 rounds: int, title: str = "", metric: str = "test_acc",
                                 x: tuple[str, ...] = ("diameter", "spectral_gap_per_round"),
                                 gamma: float = 0.9, note: str = "",
                                 correlations: tuple[dict[str, Any], ...] = ()) -> list[Path]:
    """2 x len(x): final accuracy and rounds to `target` against each metric of `x` (module
    docstring).

    Parameters
    ----------
    means : the study's mean rows.
    path : the figure's path (PNG; a PDF beside it).
    target : the common target, or None.
    rounds : the longest run's rounds (where censored points are drawn).
    title : the figure's title.
    metric : "test_acc" or "test_loss", the target's metric.
    x : the metrics on the x axes.
    gamma : the decay of the effective number of neighbours.
    note : how the target was chosen (the caption).
    correlations : the rank correlations (analysis.study_rank), Kendall's tau of each metric with
        rounds to target above its panel.

    Returns
    -------
    list of the Paths written.
    """
    means = [m for m in means if m["status"] == "ok"]
    algorithms = list(dict.fromkeys(m.get("algorithm", "") for m in means))
    topologies = list(dict.fromkeys(m["label"] for m in means))
    fig, axes = plt.subplots(2, len(x), figsize=(4.6 * len(x) + 2.6, 7.5), layout="constrained",
                             squeeze=False)
    placed = {key: Axis(means, key) for key in x}
    arrow = 0.07 * (rounds + 1)
    for m in means:
        look = _look(topologies.index(m["label"]), m, algorithms)
        for col, key in enumerate(x):
            where = placed[key].x.get(_key(m))
            if where is None:
                continue
            xsd = m.get(f"{key}_sd") if special(m, key) is None else None
            acc = _mean(m, "final_acc")
            if acc is not None:
                sd = m.get("final_acc_sd")
                axes[0][col].errorbar([where], [100 * acc], yerr=None if sd is None
                                      else [100 * sd], xerr=[xsd] if xsd else None, capsize=3,
                                      elinewidth=1, **look)
            y, bound = _rounds(m, rounds)
            if y is not None:
                sd = m.get("rounds_to_target_sd")
                yerr = [arrow] if bound else (None if sd is None else [sd])
                axes[1][col].errorbar([where], [y], yerr=yerr, lolims=bound,
                                      xerr=[xsd] if xsd else None, capsize=3, elinewidth=1,
                                      **look)
    for col, key in enumerate(x):
        for row, y_key in enumerate(RESULTS):
            ax = axes[row][col]
            placed[key].draw(ax)
            missing = placed[key].missing
            ax.set_xlabel(metric_label(key, gamma) + (f"\n(no value: {', '.join(missing)})"
                                                      if missing else ""))
            ax.set_ylabel(target_label(target, metric) if y_key == "rounds_to_target"
                          else RESULTS[y_key])
            ax.grid(alpha=0.3)
        if any(m.get("rounds_to_target_lower_bound") for m in means):
            axes[1][col].axhline(rounds, color="0.4", linestyle=":", linewidth=1)
            axes[1][col].set_ylim(top=max(axes[1][col].get_ylim()[1], rounds + 1 + 2 * arrow))
        round_axis(axes[1][col], "y")
        axes[1][col].set_title(_tau_text(correlations, key, len(algorithms) > 1), fontsize=8)
    handles = _legend(means, algorithms, topologies, rounds)
    fig.legend([h for h, _ in handles], [label for _, label in handles], loc="outside right center",
               fontsize=8)
    seeds = max((m["finished"] for m in means), default=1)
    stats = f"mean ± sd over {seeds} seeds" if seeds > 1 else "one seed"
    fig.suptitle(f"{title + ': ' if title else ''}{stats}", fontsize=10)
    if note:
        fig.supxlabel(f"target: {note}", fontsize=9)
    return save(fig, path)


def _tau_text(correlations: tuple[dict[str, Any], ...], key: str, several: bool) -> str:
    """'Kendall tau +0.39 (27 cells, 2 censored)' of `key`, per algorithm when several."""
    parts = []
    for c in correlations:
        if c["metric"] == key and c["kendall_tau"] is not None:
            who = f"{c['algorithm']}: " if several else ""
            parts.append(f"{who}Kendall tau {c['kendall_tau']:+.2f} ({c['n']} cells, "
                         f"{c['censored']} censored)")
    return "\n".join(parts)


def _legend(means: list[dict[str, Any]], algorithms: list[str], topologies: list[str],
            rounds: int) -> list[tuple[Any, str]]:
    """The legend: algorithms (several), topologies (time-varying ones said), then the marks."""
    several = len(algorithms) > 1
    handles: list[tuple[Any, str]] = []
    if several:
        handles += [(Line2D([], [], marker="s", color=f"C{i % 10}", linestyle="none"), a)
                    for i, a in enumerate(algorithms)]
    for i, label in enumerate(topologies):
        first = next(m for m in means if m["label"] == label)
        look = _look(i, first, algorithms)
        if several:
            look = {**look, "color": "0.3", "markeredgecolor": "0.3", "markersize": 8,
                    "markerfacecolor": "white" if look["markerfacecolor"] == "white" else "0.75"}
        extras = ["time-varying"] if first["kind"] == TIME_VARYING else []
        if first.get("same_runs_as"):
            extras.append(f"the runs of {first['same_runs_as']}")
        if not several and first["reached"] < first["finished"]:
            extras.append(f"target: {first['reached']}/{first['finished']} seeds")
        handles.append((Line2D([], [], **look),
                        f"{label} ({'; '.join(extras)})" if extras else label))
    if any(m.get("rounds_to_target_lower_bound") for m in means):
        handles.append((Line2D([], [], marker="^", color="0.3", linestyle="none"),
                        "lower bound: seeds that never reached\nthe target counted at "
                        f"{rounds + 1} rounds"))
        handles.append((Line2D([], [], color="0.4", linestyle=":"), f"last round ({rounds})"))
    return handles
