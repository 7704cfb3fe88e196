"""Convergence plots of one run or several (PNG and PDF)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

from p2pfl.report.figures import (
    keyed_styles,
    legend_outside,
    log_axis,
    log_floor,
    plt,
    round_axis,
    save,
)
from p2pfl.report.results import HONEST_OF
from p2pfl.report.runs import RunFacts

History = list[dict[str, Any]]

PANELS = (  # accuracies are drawn in percent, as every figure of the project draws them
    ("test_acc", "test accuracy of the {model} (%)"),
    ("test_acc_local_mean", "test accuracy, mean of the nodes' own models (%)"),
    ("train_loss", "training loss (mean over nodes)"),
    ("consensus_dist", "consensus distance"),
)
HONEST_LABELS = {  # with attackers, a panel draws the honest nodes' metric (HONEST_OF) instead
    "test_acc_local_mean": "test accuracy, mean of the honest nodes' own models (%)",
    "consensus_dist": "consensus distance of the honest nodes",
}
ALL_HONEST = " (all nodes in runs without attackers)"
YLABEL_WIDTH = 42  # characters per line of a panel's y label

METRIC_NAMES = {  # an accuracy key of metrics.jsonl -> the axis label of a figure of it
    "test_acc": "test accuracy of the average / server model (%)",
    "test_acc_local_mean": "test accuracy, mean of the nodes' own models (%)",
    "test_acc_local_min": "test accuracy, lowest of the nodes' own models (%)",
    "test_acc_honest_mean": "test accuracy, mean of the honest nodes' own models (%)",
    "test_acc_honest_min": "test accuracy, lowest of the honest nodes' own models (%)",
    "test_acc_node_mean": "accuracy on each node's own test split, mean over nodes (%)",
    "test_acc_node_worst10": "accuracy on each node's own test split, lowest tenth (%)",
    "test_acc_node_std": "accuracy on each node's own test split, sd over nodes (%)",
    "test_acc_personal": "personalised test accuracy, mean over clients (%)",
    "test_acc_personal_global": "server model on the clients' personal splits (%)",
}


def metric_name(metric: str) -> str:
    """The axis label of an accuracy key (drawn in percent).

    Parameters
    ----------
    metric : a metrics key.

    Returns
    -------
    str, METRIC_NAMES' label, else the key with " (%)".
    """
    return METRIC_NAMES.get(metric, f"{metric} (%)")


X_AXES = {"round": "round", "time": "simulated time (s)"}  # x axis -> its label
_X_KEYS = {"round": "round", "time": "sim_time_s"}


def _series(history: History, key: str, x: str = "round",
            fallback: str | None = None) -> tuple[list[float], list[float]]:
    """(x, value) of the records holding `key` (or, in a run without it, `fallback`)."""
    if fallback is not None and not any(key in r for r in history):
        key = fallback
    points = [(r[_X_KEYS[x]], r[key]) for r in history
              if r.get(key) is not None and r.get(_X_KEYS[x]) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def _panels(histories: dict[str, History], facts: Mapping[str, RunFacts]
            ) -> list[tuple[str, str | None, str]]:
    """(key, fallback, y label) of each panel: the honest nodes' metrics where a run had
    attackers; test_acc named by the model it measures."""
    models = sorted({f.model for f in facts.values()} or {"average model"})
    model = models[0] if len(models) == 1 else "average or server model"
    model = "average / server model" if model == "test_acc" else model
    attacked = any("test_acc_honest_mean" in r for h in histories.values() for r in h)
    panels = []
    for key, label in PANELS:
        if attacked and key in HONEST_LABELS:
            honest, text = HONEST_OF[key], HONEST_LABELS[key]
            plain = any(not any(honest in r for r in h) for h in histories.values())
            panels.append((honest, key, text + (ALL_HONEST if plain else "")))
        else:
            panels.append((key, None, label.format(model=model)))
    return panels


def _legend_labels(histories: dict[str, History], facts: Mapping[str, RunFacts],
                   panels: list[tuple[str, str | None, str]], x: str) -> dict[str, str]:
    """Each run's legend entry: its label, where it diverged, and which run it draws exactly
    over (identical curves hide each other)."""
    first: dict[tuple, str] = {}
    labels = {}
    for name, history in histories.items():
        fact = facts.get(name)
        label = name
        if fact is not None and fact.diverged_at is not None:
            label += f" (diverged at {fact.unit} {fact.diverged_at})"
        drawn = tuple(tuple(map(tuple, _series(history, key, x, fb))) for key, fb, _ in panels)
        if drawn in first:
            label += f" (same curves as {first[drawn]}, drawn under it)"
        else:
            first[drawn] = name
        labels[name] = label
    return labels


def _limit_to_stable(ax: Axes, values: dict[str, list[float]], diverged: set[str]
                     ) -> list[str]:
    """Keep the loss panel's y range to the runs that did not diverge; the names of the diverged
    runs that leave it."""
    kept = [v for name, vs in values.items() if name not in diverged for v in vs
            if math.isfinite(v)]
    if not kept or not diverged:
        return []
    low, high = min(kept), max(kept)
    out = [name for name in diverged if any(not low <= v <= high for v in values.get(name, []))]
    if out:
        pad = 0.05 * (high - low) or 0.05 * abs(high) or 1.0
        ax.set_ylim(low - pad, high + pad)
    return out


def plot_histories(histories: dict[str, History], path: Path, title: str = "",
                   x: str = "round", facts: Mapping[str, RunFacts] | None = None
                   ) -> list[Path]:
    """One figure of accuracy, loss and consensus, one line per run.

    Consensus is on a log axis; a run at exact consensus is drawn along its floor. With
    attackers, the second and fourth panels draw the honest nodes' metrics. A run keeps its
    name's colour (`keyed_styles`, by `facts`' key: the seeds of a variant share one); the
    legend says where a run diverged (the loss panel then keeps to the other runs' range) and
    which runs draw exactly over another.

    Parameters
    ----------
    histories : {run label: its metrics records}.
    path : the figure's path, without suffix.
    title : the figure's title.
    x : "round", or "time" for the simulated time of runs with [network] enabled.
    facts : {run label: its RunFacts} (default: each run its own name, average model).

    Returns
    -------
    list of the Paths written (png and pdf).
    """
    facts = dict(facts or {})
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    panels = _panels(histories, facts)
    styles = dict(zip(histories, keyed_styles(
        [facts[n].key if n in facts else n for n in histories])))
    labels = _legend_labels(histories, facts, panels, x)
    diverged = {n for n in histories if n in facts and facts[n].diverged_at is not None}
    consensus_key, consensus_fb, _ = panels[3]
    floor = log_floor([_series(h, consensus_key, x, consensus_fb)[1]
                       for h in histories.values()])
    clipped: list[str] = []  # runs at exact consensus, drawn along the floor
    for ax, (key, fallback, ylabel) in zip(axes.flat, panels):
        drawn: dict[str, list[float]] = {}
        for name, history in histories.items():
            xs, values = _series(history, key, x, fallback)
            if key.startswith("consensus") and floor is not None:
                if values and max(values) < floor:
                    clipped.append(name)
                values = [max(v, floor) for v in values]
            if key.startswith("test_acc"):
                values = [100 * v for v in values]
            if xs:
                style = styles[name]
                ax.plot(xs, values, color=style["color"], linestyle=style["linestyle"],
                        marker=style["marker"] if len(xs) < 40 else None, ms=3,
                        label=labels[name])
                drawn[name] = values
        ax.set_xlabel(X_AXES[x])
        if x == "round":
            round_axis(ax)
        ax.set_ylabel("\n".join(textwrap.wrap(ylabel, YLABEL_WIDTH)))
        if key.startswith("consensus") and floor is not None:
            top = max(max(_series(h, key, x, fallback)[1] or [floor])
                      for n, h in histories.items() if n not in diverged or len(diverged)
                      == len(histories))
            ax.set_ylim(floor / 2, top * 2)
            log_axis(ax, "y", floor / 2, top * 2)
            if clipped:
                ax.text(0.01, 0.01, f"at exact consensus, drawn on the floor: "
                        f"{', '.join(clipped)}", transform=ax.transAxes, fontsize=7,
                        color="0.3")
            off = [n for n in diverged if max(drawn.get(n, [0.0]), default=0.0) > top * 2]
        else:  # accuracies are bounded: only the loss keeps to the stable runs' range
            off = _limit_to_stable(ax, drawn, diverged) if key == "train_loss" else []
        if off:
            ax.text(0.99, 0.99, f"leaves the axis (diverged): {', '.join(sorted(off))}",
                    transform=ax.transAxes, ha="right", va="top", fontsize=7, color="0.3")
        ax.grid(alpha=0.3)
    handles: dict[str, Any] = {}
    for ax in axes.flat:  # a run drawn in any panel has its entry (a run that diverged before
        for handle, label in zip(*ax.get_legend_handles_labels()):  # an evaluation too)
            handles.setdefault(label, handle)
    legend_outside(axes.flat[1], list(handles.values()), list(handles))
    if title:
        fig.suptitle(title)
    return save(fig, path, make_parents=False)  # `p2pfl plot --out` names an existing folder
