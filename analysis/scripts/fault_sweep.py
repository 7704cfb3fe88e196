"""Accuracy under faults: every [[compare]] variant of a config for a grid of link_drop and
node_drop (docs/reliability.md, "Faults").

`python -m analysis.scripts.fault_sweep configs/faults.toml [--out docs/figures]` prints a
Markdown table (final test accuracy, and for Push-Sum the largest |sum(w) - N| over all rounds)
and writes `fault_sweep.png` (final accuracy vs link_drop, one line per node_drop). No run
directory is written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from p2pfl.config import load_config, variant_overrides, with_overrides
from p2pfl.engine import run
from p2pfl.report.figures import plt, save

LINK_DROPS = (0.0, 0.1, 0.3, 0.5)
NODE_DROPS = (0.0, 0.1, 0.3)


def sweep(path: str) -> list[dict[str, object]]:
    """Every [[compare]] variant of a config over the grid of link_drop and node_drop.

    Parameters
    ----------
    path : the TOML config.

    Returns
    -------
    list of dict, one per (variant, link_drop, node_drop): label, drops, final test_acc, mass
    error (None without Push-Sum weights), messages.
    """
    cfg = load_config(path)
    rows = []
    for variant in cfg.compare:
        for node_drop in NODE_DROPS:
            for link_drop in LINK_DROPS:
                run_cfg = with_overrides(cfg, {**variant_overrides(variant), "compare": None,
                                               "topology.link_drop": link_drop,
                                               "topology.node_drop": node_drop})
                history = run(run_cfg)
                n = run_cfg.data.num_nodes
                mass = [abs(r["ps_weight_sum"] - n) for r in history if "ps_weight_sum" in r]
                rows.append({"label": variant["label"], "link_drop": link_drop,
                             "node_drop": node_drop, "test_acc": history[-1]["test_acc"],
                             "mass_error": max(mass) if mass else None,
                             "messages": sum(r["messages"] for r in history)})
                print(rows[-1], flush=True)
    return rows


def table(rows: list[dict[str, object]]) -> str:
    """Markdown: one line per variant and node_drop, one column per link_drop.

    Parameters
    ----------
    rows : `sweep`'s rows.

    Returns
    -------
    str.
    """
    head = "| algorithm | node_drop | " + " | ".join(f"link {d}" for d in LINK_DROPS)
    lines = [head + " | max abs(sum(w) - N) |", "|---|---|" + "---|" * (len(LINK_DROPS) + 1)]
    for label in dict.fromkeys(r["label"] for r in rows):
        for node_drop in NODE_DROPS:
            cells = [r for r in rows if r["label"] == label and r["node_drop"] == node_drop]
            accs = " | ".join(f"{r['test_acc']:.3f}" for r in cells)
            errs = [r["mass_error"] for r in cells if r["mass_error"] is not None]
            mass = f"{max(errs):.1e}" if errs else "-"
            lines.append(f"| {label} | {node_drop} | {accs} | {mass} |")
    return "\n".join(lines)


def figure(rows: list[dict[str, object]], out: Path) -> None:
    """Final accuracy against link_drop, a panel per variant, a line per node_drop.

    Parameters
    ----------
    rows : `sweep`'s rows.
    out : the figure folder.
    """
    labels = list(dict.fromkeys(r["label"] for r in rows))
    fig, axes = plt.subplots(1, len(labels), figsize=(4.2 * len(labels), 3.2), sharey=True,
                             squeeze=False)
    for ax, label in zip(axes[0], labels):
        for node_drop in NODE_DROPS:
            cells = [r for r in rows if r["label"] == label and r["node_drop"] == node_drop]
            ax.plot([r["link_drop"] for r in cells], [r["test_acc"] for r in cells], "o-",
                    label=f"node_drop {node_drop}")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("link_drop")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("final test accuracy")
    axes[0][0].legend(fontsize=8)
    save(fig, out / "fault_sweep")


def main() -> None:
    """Run the sweep of a config, print its table and draw its figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--out", default="docs/figures", help="figure directory")
    args = parser.parse_args()
    rows = sweep(args.config)
    print(table(rows))
    figure(rows, Path(args.out))


if __name__ == "__main__":
    main()
