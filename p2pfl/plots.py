"""Convergence plots of one run or several (PNG and PDF)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

History = list[dict[str, Any]]

PANELS = (
    ("test_acc", "test accuracy (average model)"),
    ("test_acc_local_mean", "test accuracy (mean of local models)"),
    ("train_loss", "training loss (mean over nodes)"),
    ("consensus_dist", "consensus distance"),
)


X_AXES = {"round": "round", "time": "simulated time (s)"}  # x axis -> its label
_X_KEYS = {"round": "round", "time": "sim_time_s"}


def _series(history: History, key: str, x: str = "round") -> tuple[list[float], list[float]]:
    points = [(r[_X_KEYS[x]], r[key]) for r in history
              if r.get(key) is not None and r.get(_X_KEYS[x]) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def plot_histories(histories: dict[str, History], path: Path, title: str = "",
                   x: str = "round") -> list[Path]:
    """One figure of accuracy, loss and consensus against the round (or, `x` = "time", the
    simulated time of runs with [network] enabled), one line per run; returns the files."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (key, label) in zip(axes.flat, PANELS):
        for name, history in histories.items():
            xs, values = _series(history, key, x)
            if xs:
                ax.plot(xs, values, marker="o" if len(xs) < 40 else None, ms=3, label=name)
        ax.set_xlabel(X_AXES[x])
        if x == "round":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(label)
        if key == "consensus_dist" and any(_series(h, key, x)[1] for h in histories.values()):
            ax.set_yscale("symlog", linthresh=1e-6)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    paths = [path.with_suffix(".png"), path.with_suffix(".pdf")]
    for p in paths:
        fig.savefig(p, dpi=120)
    plt.close(fig)
    return paths
