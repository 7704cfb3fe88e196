"""Convergence plots of one run or several (PNG and PDF)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from p2pfl.report.figures import (
    legend_outside,
    log_axis,
    log_floor,
    plt,
    round_axis,
    save,
    series_style,
)

History = list[dict[str, Any]]

PANELS = (  # accuracies are drawn in percent, as every figure of the project draws them
    ("test_acc", "test accuracy of the average model (%)"),
    ("test_acc_local_mean", "test accuracy, mean of the local models (%)"),
    ("train_loss", "training loss (mean over nodes)"),
    ("consensus_dist", "consensus distance"),
)

METRIC_NAMES = {  # an accuracy key of metrics.jsonl -> the axis label of a figure of it
    "test_acc": "test accuracy of the average / server model (%)",
    "test_acc_local_mean": "test accuracy, mean of the nodes' own models (%)",
    "test_acc_local_min": "test accuracy, lowest of the nodes' own models (%)",
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


def _series(history: History, key: str, x: str = "round") -> tuple[list[float], list[float]]:
    points = [(r[_X_KEYS[x]], r[key]) for r in history
              if r.get(key) is not None and r.get(_X_KEYS[x]) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def plot_histories(histories: dict[str, History], path: Path, title: str = "",
                   x: str = "round") -> list[Path]:
    """One figure of accuracy, loss and consensus, one line per run.

    Consensus is on a log axis; a run at exact consensus is drawn along its floor.

    Parameters
    ----------
    histories : {run label: its metrics records}.
    path : the figure's path, without suffix.
    title : the figure's title.
    x : "round", or "time" for the simulated time of runs with [network] enabled.

    Returns
    -------
    list of the Paths written (png and pdf).
    """
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    floor = log_floor([_series(h, "consensus_dist", x)[1] for h in histories.values()])
    clipped: list[str] = []  # runs at exact consensus, drawn along the floor
    for ax, (key, label) in zip(axes.flat, PANELS):
        for i, (name, history) in enumerate(histories.items()):
            xs, values = _series(history, key, x)
            if key == "consensus_dist" and floor is not None:
                if values and max(values) < floor:
                    clipped.append(name)
                values = [max(v, floor) for v in values]
            if key.startswith("test_acc"):
                values = [100 * v for v in values]
            if xs:
                style = series_style(i)
                ax.plot(xs, values, color=style["color"], linestyle=style["linestyle"],
                        marker=style["marker"] if len(xs) < 40 else None, ms=3, label=name)
        ax.set_xlabel(X_AXES[x])
        if x == "round":
            round_axis(ax)
        ax.set_ylabel(label)
        if key == "consensus_dist" and floor is not None:
            top = max(max(_series(h, key, x)[1] or [floor]) for h in histories.values())
            ax.set_ylim(floor / 2, top * 2)
            log_axis(ax, "y", floor / 2, top * 2)
            if clipped:
                ax.text(0.01, 0.01, f"at exact consensus, drawn on the floor: "
                        f"{', '.join(clipped)}", transform=ax.transAxes, fontsize=7,
                        color="0.3")
        ax.grid(alpha=0.3)
    legend_outside(axes.flat[1])
    if title:
        fig.suptitle(title)
    return save(fig, path, make_parents=False)  # `p2pfl plot --out` names an existing folder
