"""How heterogeneous a partition is: node sizes, label skew, and a stacked bar per node of its
labels (`p2pfl data describe CONFIG`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import entropy

from p2pfl.report.figures import plt, save


def partition_summary(counts: np.ndarray) -> dict[str, Any]:
    """Sizes and label skew of a partition from its label counts.

    size_cv: std / mean of the node sizes (0: equal sizes). classes_per_node: classes a node
    holds at least one sample of, mean over nodes. effective_classes_per_node: exp of the
    entropy (natural log) of a node's label distribution, mean over nodes: c for c equally
    frequent classes, near 1 where one class dominates and a few others hold a handful of
    samples (which classes_per_node counts in full). top_class_share: the largest class's share
    of a node's data, mean over nodes. label_tv: total-variation distance between a node's label
    distribution and the pooled one, mean over nodes (0: IID labels; 1: disjoint).

    Parameters
    ----------
    counts : [nodes, classes] samples of each class on each node.

    Returns
    -------
    dict: nodes, samples, classes, the node sizes' min, median, mean, max, and the measures above.
    """
    counts = np.asarray(counts, dtype=np.int64)
    sizes = counts.sum(axis=1)
    shares = counts / sizes[:, None]
    pooled = counts.sum(axis=0) / sizes.sum()
    return {"nodes": len(sizes), "samples": int(sizes.sum()), "classes": counts.shape[1],
            "size_min": int(sizes.min()), "size_median": float(np.median(sizes)),
            "size_mean": float(sizes.mean()), "size_max": int(sizes.max()),
            "size_cv": float(sizes.std() / sizes.mean()),
            "classes_per_node": float((counts > 0).sum(axis=1).mean()),
            "effective_classes_per_node": float(np.exp(entropy(counts, axis=1)).mean()),
            "top_class_share": float(shares.max(axis=1).mean()),
            "label_tv": float(0.5 * np.abs(shares - pooled).sum(axis=1).mean())}


def plot_label_bars(counts: np.ndarray, path: str | Path, title: str = "") -> list[Path]:
    """One stacked bar per node of its samples by class.

    Readable at a hundred nodes and more (thin gaps, a tick every few nodes).

    Parameters
    ----------
    counts : [nodes, classes].
    path : the figure's path (PNG; a PDF beside it).
    title : the figure's title.

    Returns
    -------
    list of the Paths written.
    """
    counts = np.asarray(counts)
    nodes, classes = counts.shape
    colours = plt.get_cmap("tab10" if classes <= 10 else "tab20" if classes <= 20 else "turbo")
    fig, ax = plt.subplots(figsize=(min(14, 4 + 0.09 * nodes), 4.2))
    x = np.arange(nodes)
    bottom = np.zeros(nodes)
    for c in range(classes):
        colour = colours(c if classes <= 20 else c / max(classes - 1, 1))
        ax.bar(x, counts[:, c], bottom=bottom, width=0.9 if nodes > 40 else 0.8,
               color=colour, label=str(c) if classes <= 20 else None, linewidth=0)
        bottom += counts[:, c]
    ax.set_xlim(-0.6, nodes - 0.4)
    step = max(1, int(np.ceil(nodes / 25)))
    ax.set_xticks(x[::step])
    ax.set_xlabel("node")
    ax.set_ylabel("training samples")
    ax.set_title(title or f"{nodes} nodes: samples per class")
    if classes <= 20:
        ax.legend(title="class", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                  ncols=1 if classes <= 12 else 2)
    ax.grid(axis="y", alpha=0.3)
    return save(fig, path)
