"""Byzantine nodes and private gossip on real Fashion-MNIST: the grids of docs/robustness.md.

Every cell is configs/robustness.toml with a topology, an aggregator, [byzantine] and [privacy]
set; cells run one at a time, each seed in OUT/<grid>/<cell>/seed<k> (a finished run is kept and
not run again, so a grid is continued by the same command; `--budget-s` stops starting runs after
that many seconds). The checkpoints and final models are deleted after each run (the metrics,
config, byzantine.json and privacy.json stay). Then the tables are printed and the figures
written to OUT (or `--figures`).

    python -m bench.robustness --grid bar --seeds 0,1,2 --out runs/robustness
    python -m bench.robustness --grid count --budget-s 540 --out runs/robustness   # repeat
    python -m bench.robustness --grid privacy_distance --figures docs/figures
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

import topologies as T
from analysis.privacy import pairwise_privacy
from p2pfl.config import load_config, with_overrides
from p2pfl.engine import run
from p2pfl.errors import DivergenceError
from p2pfl.report.figures import plt, save, series_style

CONFIG = "configs/robustness.toml"
TOPOLOGIES = {"ring": {"topology.name": "ring"}, "torus": {"topology.name": "torus"},
              "exponential": {"topology.name": "exponential", "topology.directed": False},
              "dumbbell": {"topology.name": "dumbbell"}}
AGGREGATORS = ("mean", "clipped_gossip", "self_centered_clipping", "trimmed_mean", "median")
SIGMAS = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
DIVERGED = "diverged.json"  # written by a run that diverged (p2pfl.report.results.DIVERGED)
CHANCE = 0.1  # a diverged run's honest accuracy (10 classes)
# DFedSAM-MGS with rho = 0: DFedAvg with Q = 4 gossip steps after the noise (it has no `order`)
PRIVATE = {"algorithm.name": "dfedsam_mgs", "algorithm.order": "", "algorithm.gossip_steps": 4,
           "algorithm.rho": 0.0, "privacy.clip": 1.0}


def _cell(topology: str, aggregator: str = "mean", byzantine: int = 0, attack: str = "sign_flip",
          placement: str = "random", **more: Any) -> tuple[str, dict[str, Any]]:
    """(name, overrides) of one cell."""
    overrides = dict(TOPOLOGIES[topology]) | {"algorithm.aggregator": aggregator}
    if byzantine:
        overrides |= {"byzantine.nodes": byzantine, "byzantine.attack": attack,
                      "byzantine.placement": placement}
    name = f"{topology}-{aggregator}-{byzantine}{attack if byzantine else ''}"
    if more:
        overrides |= more
        name += "-" + "-".join(f"{k.split('.')[-1]}{v}" for k, v in more.items()
                               if k in ("privacy.sigma",))
    return name, overrides


def _attacked(name: str) -> bool:
    """Whether the Byzantine nodes of the cell `name` attack (a cell without any, or with the
    attack "none", has none that does)."""
    return "-0" not in name and not name.endswith("none")


def cells(grid: str) -> list[tuple[str, dict[str, Any]]]:
    """The cells of a grid.

    Parameters
    ----------
    grid : bar | count | dissensus | privacy.

    Returns
    -------
    list of (cell name, dotted overrides of configs/robustness.toml).
    """
    if grid == "bar":  # the baseline: the same node marked, honest (attack "none")
        return [_cell("exponential", byzantine=1, attack="none"),
                _cell("exponential", byzantine=1), _cell("exponential", "clipped_gossip", 1)]
    if grid == "count":  # clipped_gossip without attackers is plain gossip: not run twice
        return [_cell(t, a, k) for t in TOPOLOGIES for k in (0, 1, 2) for a in AGGREGATORS
                if (a, k) != ("clipped_gossip", 0)]
    if grid == "dissensus":
        return [_cell(t, a, 1, "dissensus", "cut") for t in TOPOLOGIES for a in AGGREGATORS]
    if grid == "privacy":
        plain = {k: v for k, v in PRIVATE.items() if not k.startswith("privacy.")}
        private = [("exponential-private-sigma0", plain | dict(TOPOLOGIES["exponential"]))]
        return private + [(f"exponential-private-sigma{s}",
                           PRIVATE | dict(TOPOLOGIES["exponential"]) | {"privacy.sigma": s})
                          for s in SIGMAS if s > 0]
    raise SystemExit(f"unknown grid {grid!r}")


def run_grid(grid: str, out: Path, seeds: list[int], rounds: int | None, budget: float) -> None:
    """Run the unfinished (cell, seed) runs of `grid`, one at a time, within `budget` seconds.

    Parameters
    ----------
    grid : the grid's name.
    out : the output folder.
    seeds : the seeds.
    rounds : rounds of every run (None: the config's).
    budget : seconds after which no new run starts.
    """
    base = load_config(CONFIG)
    start = time.perf_counter()
    for name, overrides in cells(grid):
        for seed in seeds:
            folder = out / grid / name / f"seed{seed}"
            if (folder / "summary.json").exists() or (folder / DIVERGED).exists():
                continue
            if time.perf_counter() - start > budget:
                print(f"budget spent: {grid} continues with the same command", file=sys.stderr)
                return
            cfg = with_overrides(base, overrides | {"seed": seed}
                                 | ({"rounds": rounds} if rounds else {}))
            began = time.perf_counter()
            with contextlib.suppress(DivergenceError):  # an outcome of the attack: the run
                run(cfg, folder, figures=False)  # wrote diverged.json
            for bulky in ("checkpoint.pt", "final.pt"):
                (folder / bulky).unlink(missing_ok=True)
            print(f"{grid}/{name}/seed{seed}: {time.perf_counter() - began:.0f} s",
                  file=sys.stderr)


def final(folder: Path) -> dict[str, Any]:
    """The last record of a run, with the honest metrics (all nodes when none is Byzantine).

    Parameters
    ----------
    folder : the run directory.

    Returns
    -------
    dict: honest_mean, honest_min, consensus, wall_s (the run's rounds), diverged (1 for a
    run that diverged: its accuracies are chance, CHANCE, its consensus NaN), and the privacy
    numbers of privacy.json when there is one.
    """
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    if (folder / DIVERGED).exists():
        return {"honest_mean": CHANCE, "honest_min": CHANCE, "consensus": float("nan"),
                "wall_s": sum(r["wall_s"] for r in records), "diverged": 1}
    last = records[-1]
    out = {"honest_mean": last.get("test_acc_honest_mean", last["test_acc_local_mean"]),
           "honest_min": last.get("test_acc_honest_min", last["test_acc_local_min"]),
           "consensus": last.get("consensus_dist_honest", last["consensus_dist"]),
           "wall_s": sum(r["wall_s"] for r in records), "diverged": 0}
    if (folder / "privacy.json").exists():
        record = json.loads((folder / "privacy.json").read_text())
        out |= {k: record[k] for k in ("epsilon_max", "epsilon_mean", "epsilon_local")}
    return out


def summarize(grid: str, out: Path) -> dict[str, dict[str, Any]]:
    """Mean and standard deviation over the finished seeds of every cell.

    Parameters
    ----------
    grid : the grid's name.
    out : the output folder.

    Returns
    -------
    dict {cell: {key: mean, key + "_sd": sd, "seeds": count}}.
    """
    table = {}
    for name, _ in cells(grid):
        runs = [final(f) for f in sorted((out / grid / name).glob("seed*"))
                if (f / "summary.json").exists() or (f / DIVERGED).exists()]
        if not runs:
            continue
        row: dict[str, Any] = {"seeds": len(runs)}
        for key in [k for k in runs[0] if all(k in r for r in runs)]:
            values = [r[key] for r in runs]
            row[key] = float(np.mean(values))  # NaN where a run diverged
            row[key + "_sd"] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        table[name] = row
    return table


def print_table(grid: str, table: dict[str, dict[str, Any]]) -> None:
    """Print one Markdown line per cell: honest accuracy (mean, min) in %, consensus, seconds.

    Parameters
    ----------
    grid : the grid's name (privacy adds the epsilon columns).
    table : `summarize`'s {cell: row}.
    """
    extra = " | eps max | eps mean | eps local" if grid == "privacy" else ""
    print(f"\n{grid}\n\n| cell | seeds | honest acc % | honest min % | consensus | s/run{extra} |")
    print("|---|---|---|---|---|---|" + ("---|---|---|" if extra else ""))
    for name, r in table.items():
        diverged = round(r["diverged"] * r["seeds"])
        seeds = f"{r['seeds']}" + (f" ({diverged} diverged)" if diverged else "")
        line = (f"| {name} | {seeds} | {100 * r['honest_mean']:.1f} ± "
                f"{100 * r['honest_mean_sd']:.1f} | {100 * r['honest_min']:.1f} | "
                f"{r['consensus']:.3g} | {r['wall_s']:.0f} |")
        if extra:
            line += "".join(f" {r[k]:.3g} |" if k in r else " - |"
                            for k in ("epsilon_max", "epsilon_mean", "epsilon_local"))
        print(line)


def figure(grid: str, table: dict[str, dict[str, Any]], path: Path) -> None:
    """The grid's figure: honest accuracy against the Byzantine count per topology (count),
    per aggregator and topology (dissensus, bar), or against sigma (privacy).

    Parameters
    ----------
    grid : the grid's name.
    table : `summarize`'s {cell: row}.
    path : the figure's path without suffix.
    """
    if grid == "count":
        fig, axes = plt.subplots(1, len(TOPOLOGIES), figsize=(15, 3.6), sharey=True)
        for ax, topology in zip(axes, TOPOLOGIES):
            for i, aggregator in enumerate(AGGREGATORS):
                xs, ys = [], []
                for k in (0, 1, 2):
                    key = _cell(topology, "mean" if (aggregator, k) == ("clipped_gossip", 0)
                                else aggregator, k)[0]
                    if key in table:
                        xs.append(k)
                        ys.append(100 * table[key]["honest_mean"])
                ax.plot(xs, ys, label=aggregator, **series_style(i))
            ax.set_title(topology)
            ax.set_xlabel("sign-flipping nodes of 16")
            ax.set_xticks([0, 1, 2])
        axes[0].set_ylabel("honest nodes' accuracy (%)")
        axes[-1].legend(fontsize=8)
    elif grid in ("dissensus", "bar"):  # bars grouped by topology, one colour per aggregator
        groups = [t for t in TOPOLOGIES if any(n.startswith(t + "-") for n in table)]
        series = [a for a in AGGREGATORS if any(f"-{a}-" in n for n in table)]
        attacked = {(t, a, _attacked(n)) for n in table for t in groups for a in series
                    if n.startswith(f"{t}-{a}-")}
        kinds = sorted({k for _, _, k in attacked})  # the bar grid has a run without attack
        bars = [(a, k) for a in series for k in kinds if any((t, a, k) in attacked
                                                                 for t in groups)]
        width = 0.8 / len(bars)
        fig, ax = plt.subplots(figsize=(max(5.0, 1.2 + 1.6 * len(groups) * len(bars) / 3), 3.6))
        for i, (aggregator, attack) in enumerate(bars):
            names = [next((n for n in table if n.startswith(f"{t}-{aggregator}-")
                           and _attacked(n) == attack), None) for t in groups]
            xs = [g + (i - (len(bars) - 1) / 2) * width for g, n in enumerate(names) if n]
            rows = [table[n] for n in names if n]
            label = aggregator if grid == "dissensus" else (
                f"{aggregator}, {'1 sign-flipping node' if attack else 'same node, no attack'}")
            ax.bar(xs, [100 * r["honest_mean"] for r in rows], width,
                   yerr=[100 * r["honest_mean_sd"] for r in rows], label=label,
                   color=series_style(i)["color"])
            for x, r in zip(xs, rows):  # a diverged seed counts as chance: say so
                if r["diverged"]:
                    ax.text(x, 100 * r["honest_mean"] + 2, "diverged", rotation=90,
                            ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups)
        ax.set_ylabel("honest nodes' accuracy (%)")
        ax.set_ylim(0, 100)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
        if grid == "dissensus":
            ax.set_title("one dissensus attacker on a minimum cut, 16 nodes", fontsize=9)
    else:
        fig, ax = plt.subplots(figsize=(6, 3.8))
        sig = [float(n.split("sigma")[-1]) for n in table]
        rows = list(table.values())
        ax.errorbar(sig, [100 * r["honest_mean"] for r in rows],
                    yerr=[100 * r["honest_mean_sd"] for r in rows], capsize=3, **series_style(0))
        for j, (x, r) in enumerate(zip(sig, rows)):  # the largest pairwise epsilon, at delta
            text = (f"eps {r['epsilon_max']:.0e}" if "epsilon_max" in r
                    else "diverged" if r["diverged"] else "")
            ax.annotate(text, (x, 100 * r["honest_mean"]), textcoords="offset points",
                        xytext=(0, 10 if j % 2 else -16), ha="center", fontsize=7)
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_xlabel("noise multiplier sigma (std = sigma * clip)")
        ax.set_ylabel("nodes' accuracy (%)")
        ax.set_ylim(0, 100)
        ax.set_title("private gossip, 16 nodes, exponential graph; eps: the largest pairwise "
                     "epsilon", fontsize=8)
    save(fig, path)


def per_message_sum(W: np.ndarray, steps: int) -> np.ndarray:
    """Muffliato's Theorem 1 as published (NeurIPS 2022): one divergence per message,
    S[i, j] = sum_{t < steps} sum_{w in N(i)} (W^t)_wj^2 / ||(W^t)_w||^2, as if every message had
    noise of its own. Not a bound (topologies/privacy.py); drawn beside the exact loss only.

    Parameters
    ----------
    W : dense [n, n] mixing matrix.
    steps : gossip steps.

    Returns
    -------
    float64 [n, n] array (the diagonal is meaningless).
    """
    observed = (W != 0) & ~np.eye(len(W), dtype=bool)
    power, total = np.eye(len(W)), np.zeros(W.shape)
    for _ in range(steps):
        squares = power**2
        total += observed @ (squares / squares.sum(axis=1, keepdims=True))
        power = W @ power
    return total


def privacy_distance(path: Path, n: int = 64, steps: int = 10, sigma: float = 5.0) -> dict:
    """The exact pairwise loss of gossip averaging against graph distance on a ring and an
    expander (random 4-regular): one noisy value per node (sensitivity 1), `steps` gossip steps,
    the observer's whole linear view with its own value known ("linear" accounting, exact for
    one round), beside the per-message sum of Muffliato's Theorem 1 as published.

    Parameters
    ----------
    path : the figure's path.
    n : nodes.
    steps : gossip steps.
    sigma : the noise's standard deviation.

    Returns
    -------
    dict {graph: {distance: (mean exact epsilon, mean per-message-sum epsilon)}} (delta 1e-5).
    """
    graphs = {"ring": T.ring(n), "expander (random 4-regular)": T.random_regular(n, 4, seed=0)}
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    found = {}
    for i, (name, G) in enumerate(graphs.items()):
        exact = pairwise_privacy(G, sigma, 1, delta=1e-5, steps=steps)
        summed = T.rdp_to_dp(per_message_sum(T.doubly_stochastic(G), steps) / (2 * sigma**2),
                             1e-5)
        hops = dict(nx.all_pairs_shortest_path_length(G))
        by: dict[int, list[tuple[float, float]]] = {}
        for a in range(n):
            for b in range(n):
                if a != b:
                    by.setdefault(hops[a][b], []).append((exact[a, b], summed[a, b]))
        found[name] = {d: tuple(float(x) for x in np.mean(v, axis=0))
                       for d, v in sorted(by.items())}
        style = series_style(i)
        for k, (kind, linestyle) in enumerate((("exact", "-"), ("per-message sum", "--"))):
            points = [(d, e[k]) for d, e in found[name].items() if e[k] > 0]
            ax.plot(*zip(*points, strict=True), label=f"{name}: {kind}",
                    **(style | {"linestyle": linestyle,
                                "markerfacecolor": "none" if k else style["color"]}))
    local = float(T.rdp_to_dp(1 / (2 * sigma**2), 1e-5))
    ax.axhline(local, color="grey", linestyle=":",
               label="one observation of the noisy value (local DP)")
    ax.set_yscale("log")
    reached = [d for f in found.values() for d, e in f.items() if e[0] > 0]
    ax.set_xlim(0, max(reached) + 1)  # beyond, the steps have not reached: epsilon 0
    ax.set_xlabel("graph distance between the observer and the data owner (hops)")
    ax.set_ylabel(f"epsilon (delta = 1e-5), sigma = {sigma:g}")
    ax.set_title(f"{n} nodes, one noisy value each, {steps} gossip steps; the observer knows "
                 "its own value\n(dashed: the per-message sum, not a bound; the exact ring lies "
                 "on the local-DP line)",
                 fontsize=9)
    ax.legend(fontsize=7)
    save(fig, path)
    return found


def main(argv: list[str] | None = None) -> None:
    """Command line: run a grid, print its table, write its figure.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).
    """
    parser = argparse.ArgumentParser(prog="python -m bench.robustness", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", required=True,
                        choices=("bar", "count", "dissensus", "privacy", "privacy_distance"))
    parser.add_argument("--out", default="runs/robustness")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--budget-s", type=float, default=float("inf"))
    parser.add_argument("--no-run", action="store_true", help="only summarise what is there")
    parser.add_argument("--figures", default=None, help="folder of the figure (default: OUT)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    figures = Path(args.figures) if args.figures else out
    if args.grid == "privacy_distance":
        found = privacy_distance(figures / "privacy_distance")
        for name, by in found.items():
            print(name + " (exact, per-message sum): "
                  + ", ".join(f"{d} hops {e:.3g}, {m:.3g}" for d, (e, m) in by.items()))
        return
    if not args.no_run:
        run_grid(args.grid, out, [int(s) for s in args.seeds.split(",")], args.rounds,
                 args.budget_s)
    table = summarize(args.grid, out)
    print_table(args.grid, table)
    if table:
        figure(args.grid, table, figures / f"robustness_{args.grid}")


if __name__ == "__main__":
    main()
