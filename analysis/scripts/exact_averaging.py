"""Consensus error against rounds for n = 25: the Base-(k+1) graphs average exactly in a finite
number of rounds; ring, torus, static and one-peer exponential graphs do not (docs/topology-
research.md, section 1).

`python -m analysis.scripts.exact_averaging [--out docs/figures] [--n 25] [--seeds 5]`
(about a second) writes base_graph_consensus.png/.pdf and prints a Markdown table.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np

import analysis as A
import topologies as T
from p2pfl.report.figures import legend_outside, log_axis, plt, round_axis, save, series_style

Build = Callable[..., np.ndarray]
FLOOR = 1e-16  # float64 rounding: a relative error below it is exact consensus


def families(n: int) -> dict[str, tuple[object, Build]]:
    """The topologies compared, with their matrix builders: gossip with the graph's natural weights.

    Parameters
    ----------
    n : nodes.

    Returns
    -------
    dict {name: (graph or schedule, matrix builder)}.
    """
    side = round(n**0.5)
    rows = {"Base-2 graph (k = 1)": (T.base_graph(n, 1), T.doubly_stochastic),
            "Base-3 graph (k = 2)": (T.base_graph(n, 2), T.doubly_stochastic),
            "ring": (T.ring(n), T.doubly_stochastic)}
    if side * side == n and side >= 3:
        rows[f"torus {side}x{side}"] = (T.torus(side, side), T.doubly_stochastic)
    rows["static exponential (directed)"] = (T.exponential(n), T.column_stochastic)
    rows["one-peer exponential (directed)"] = (T.one_peer_exponential(n), T.column_stochastic)
    return rows


def max_degree(topology: object, rounds: int) -> int:
    """Largest number of neighbours of a node in one round (out-neighbours if directed).

    Parameters
    ----------
    topology : anything `T.as_schedule` takes.
    rounds : rounds looked at (at most one period).

    Returns
    -------
    int.
    """
    S = T.as_schedule(topology)
    degrees = [G.out_degree() if G.is_directed() else G.degree()
               for G in (S.at(t) for t in range(min(rounds, S.period or rounds)))]
    return max(d for degree in degrees for _, d in degree)


def relative_error(topology: object, build: Build, n: int, rounds: int,
                   seeds: int) -> np.ndarray:
    """Mean over seeds of ||x(t) - xbar|| / ||x(0) - xbar|| with x(0) ~ N(0, I_n).

    Parameters
    ----------
    topology : anything `T.as_schedule` takes.
    build : graph -> mixing matrix.
    n : nodes.
    rounds : rounds simulated.
    seeds : runs averaged.

    Returns
    -------
    [rounds + 1] array.
    """
    S = T.as_schedule(topology)
    curves = []
    for seed in range(seeds):
        x0 = np.random.default_rng(seed).standard_normal(n)
        trajectory = A.gossip_consensus(None, x0, rounds, matrices=lambda t: build(S.at(t)))
        distance = A.consensus_distance(trajectory)
        curves.append(np.sqrt(distance / distance[0]))
    return np.mean(curves, axis=0)


def figure(curves: dict[str, np.ndarray], n: int, seeds: int, path: Path) -> list[Path]:
    """Relative error against round, log y; errors under FLOOR drawn on it.

    Parameters
    ----------
    curves : {topology name: [rounds + 1] errors}.
    n : nodes (for the title).
    seeds : runs averaged (for the title).
    path : the figure's path (PNG; a PDF beside it).

    Returns
    -------
    list of the Paths written.
    """
    fig, ax = plt.subplots(figsize=(11, 4.8))
    for i, (label, error) in enumerate(curves.items()):
        style = series_style(i)
        ax.plot(np.arange(len(error)), np.maximum(error, FLOOR), label=label,
                color=style["color"], linestyle=("--" if i == 1 else "-"),
                marker=("o", "s")[i] if i < 2 else None, markersize=4, markevery=(i, 2))
    log_axis(ax, "y", FLOOR, 1.0)
    ax.axhline(FLOOR, color="0.6", linewidth=0.8, linestyle=":")
    ax.text(0.99, FLOOR * 3, "float64 rounding (exact average)", transform=ax.get_yaxis_transform(),
            ha="right", va="bottom", fontsize=7, color="0.3")
    ax.set_xlabel("round")
    round_axis(ax)
    ax.set_ylabel("relative consensus error ||x(t) - x̄|| / ||x(0) - x̄||")
    ax.set_title(f"gossip averaging, n = {n}, x(0) ~ N(0, I), mean of {seeds} seeds", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    legend_outside(ax)
    return save(fig, path)


def table(rows: list[dict[str, object]], rounds: int) -> str:
    """The families' degrees, periods, rounds to 1e-4 and 1e-8 and errors at rounds 10 and 20.

    Parameters
    ----------
    rows : one dict per topology.
    rounds : rounds simulated (a count not reached shows as "> rounds").

    Returns
    -------
    str, a Markdown table.
    """
    head = ("| topology | max neighbours per round | period | rounds to 1e-4 | rounds to 1e-8 "
            "| error at round 10 | error at round 20 |")
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["name"], r["degree"], r["period"] or "-", r["to_1e-4"] or f"> {rounds}",
                 r["to_1e-8"] or f"> {rounds}", f"{r['at10']:.1e}", f"{r['at20']:.1e}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    """Simulate, draw and print the consensus error of every family."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/figures", help="output directory")
    parser.add_argument("--n", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    curves, rows = {}, []
    for name, (topology, build) in families(args.n).items():
        S = T.as_schedule(topology)
        error = relative_error(topology, build, args.n, args.rounds, args.seeds)
        degree = max_degree(topology, args.rounds)
        period = S.period if S.period and S.period > 1 else None
        kind = "out-neighbour" if S.directed else "neighbour"
        label = (f"{name}: {degree} {kind}{'s' if degree > 1 else ''}/round"
                 + (f", period {period}" if period else ""))
        curves[label] = error
        rows.append({"name": name, "degree": degree, "period": period,
                     "to_1e-4": A.rounds_to_consensus(error, 1e-4),
                     "to_1e-8": A.rounds_to_consensus(error, 1e-8),
                     "at10": error[10], "at20": error[20]})
    for p in figure(curves, args.n, args.seeds, Path(args.out) / "base_graph_consensus"):
        print(p)
    print(table(rows, args.rounds))


if __name__ == "__main__":
    main()
