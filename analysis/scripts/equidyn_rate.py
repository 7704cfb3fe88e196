"""Consensus rate against n for EquiDyn and EquiStatic, with one-peer exponential, static
exponential and Base-2 graphs for comparison (docs/topology-research.md, section 2).

`python -m analysis.scripts.equidyn_rate [--out docs/figures] [--seeds 5]` (a few minutes)
writes equidyn_rate.png/.pdf and prints a Markdown table. Left panel: the mean one-round
contraction ||W x - x̄||^2 / ||x - x̄||^2 of OD-/OU-EquiDyn (eta = 1/2) measured along gossip runs
(the state renormalised every round), against the exact expectation (n - 1) / (2n) of
OD-EquiDyn, and ||W - J||_2^2 of the EquiStatic graphs. Right panel: rounds until the relative
error ||x(t) - x̄|| / ||x(0) - x̄|| (mean over seeds, x(0) ~ N(0, I)) is below 1e-8.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

import analysis as A
import topologies as T
from p2pfl.report.figures import legend_outside, log_axis, plt, save, series_style
from topologies.equitopo import default_m

NS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
ETA = 0.5
EPS = 1e-8
column = partial(T.column_stochastic, sparse=True)
symmetric = partial(T.doubly_stochastic, sparse=True)
Factory = Callable[[int, int], tuple[object, Callable]]  # (n, seed) -> (topology, builder)

FAMILIES: dict[str, Factory] = {
    "OD-EquiDyn (1 out-peer)": lambda n, s: (T.equi_dyn(n, True, ETA, seed=s), column),
    "OU-EquiDyn (<= 1 peer)": lambda n, s: (T.equi_dyn(n, False, ETA, seed=s), symmetric),
    "D-EquiStatic (m out-peers)": lambda n, s: (T.equi_static(n, seed=s), column),
    "U-EquiStatic (<= 2m peers)": lambda n, s: (T.equi_static(n, directed=False, seed=s),
                                                symmetric),
    "one-peer exponential (1 out-peer)": lambda n, s: (T.one_peer_exponential(n), column),
    "static exponential (log2 n out-peers)": lambda n, s: (T.exponential(n), column),
    "Base-2 graph (<= 1 peer)": lambda n, s: (T.base_graph(n, 1), symmetric),
}
DYNAMIC = ("OD-EquiDyn (1 out-peer)", "OU-EquiDyn (<= 1 peer)")
STATIC = ("D-EquiStatic (m out-peers)", "U-EquiStatic (<= 2m peers)")


def matrices(topology: object, build: Callable) -> Callable[[int], object]:
    """t -> W(t) of a topology; a periodic schedule's matrices are built once per phase.

    Parameters
    ----------
    topology : anything `T.as_schedule` takes.
    build : graph -> mixing matrix.

    Returns
    -------
    callable t -> W(t).
    """
    S = T.as_schedule(topology)
    if S.period is None:
        return lambda t: build(S.at(t))
    cache = [build(S.at(t)) for t in range(S.period)]
    return lambda t: cache[t % S.period]


def mean_contraction(topology: object, build: Callable, n: int, rounds: int,
                     seed: int) -> float:
    """Mean over rounds of ||W_t x_t - x̄||^2 / ||x_t - x̄||^2 along one run, x_t renormalised.

    Parameters
    ----------
    topology : anything `T.as_schedule` takes.
    build : graph -> mixing matrix.
    n : nodes.
    rounds : rounds averaged.
    seed : the seed of x_0 ~ N(0, I_n).

    Returns
    -------
    float.
    """
    W = matrices(topology, build)
    x = np.random.default_rng(seed).standard_normal(n)
    ratios = []
    for t in range(rounds):
        x = (x - x.mean()) / np.linalg.norm(x - x.mean())
        y = np.asarray(W(t) @ x)
        ratios.append(float(np.sum((y - y.mean()) ** 2)))
        x = y
    return float(np.mean(ratios))


def rounds_to_eps(topology: object, build: Callable, n: int, seeds: int, rounds: int,
                  seed_topology: Callable[[int], object] | None = None) -> int | None:
    """Rounds until the mean over seeds of the relative error is below EPS.

    Parameters
    ----------
    topology : anything `T.as_schedule` takes.
    build : graph -> mixing matrix.
    n : nodes.
    seeds : runs averaged.
    rounds : rounds simulated.
    seed_topology : s -> seed s's own draw of a random topology, or None.

    Returns
    -------
    int, or None if not within `rounds`.
    """
    curves = []
    for seed in range(seeds):
        W = matrices(seed_topology(seed) if seed_topology else topology, build)
        x0 = np.random.default_rng(1000 + seed).standard_normal(n)
        trajectory = A.gossip_consensus(None, x0, rounds, matrices=W)
        distance = A.consensus_distance(trajectory)
        curves.append(np.sqrt(distance / distance[0]))
    return A.rounds_to_consensus(np.mean(curves, axis=0), EPS)


def measure(seeds: int, rounds: int, contraction_rounds: int) -> list[dict[str, object]]:
    """Rounds to EPS and contraction rates of every family for every n of NS (printed as they come).

    Parameters
    ----------
    seeds : runs averaged.
    rounds : gossip rounds per run.
    contraction_rounds : rounds averaged in a dynamic family's mean contraction.

    Returns
    -------
    list of dict, one per n: n, m, rounds of each family, "rate <family>".
    """
    rows = []
    for n in NS:
        row: dict[str, object] = {"n": n, "m": default_m(n)}
        for name, factory in FAMILIES.items():
            topology, build = factory(n, 0)
            row[name] = rounds_to_eps(topology, build, n, seeds, rounds,
                                      lambda s, f=factory, n=n: f(n, s)[0])
            if name in DYNAMIC:
                row[f"rate {name}"] = float(np.mean([
                    mean_contraction(factory(n, s)[0], build, n, contraction_rounds, s)
                    for s in range(seeds)]))
            if name in STATIC:
                row[f"rate {name}"] = float(np.mean([
                    np.linalg.norm(build(factory(n, s)[0]).toarray() - 1 / n, 2) ** 2
                    for s in range(seeds)]))
        rows.append(row)
        print(row, flush=True)
    return rows


def figure(rows: list[dict[str, object]], path: Path) -> list[Path]:
    """The rates against n (left) and the rounds to EPS against n (right).

    Parameters
    ----------
    rows : `measure`'s rows.
    path : the figure's path (PNG; a PDF beside it).

    Returns
    -------
    list of the Paths written.
    """
    ns = np.array([r["n"] for r in rows])
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    for i, name in enumerate(DYNAMIC + STATIC):
        style = series_style(i)
        left.plot(ns, [r[f"rate {name}"] for r in rows], label=name, color=style["color"],
                  marker=style["marker"], linestyle="-" if name in DYNAMIC else "--")
    left.plot(ns, (ns - 1) / (2 * ns), color="black", linestyle=":", linewidth=1.2,
              label="(n - 1) / 2n: exact E for OD-EquiDyn")
    left.set_ylim(0, 1)
    left.set_ylabel("one-round contraction of ||x - x̄||²\n"
                    "(EquiDyn: measured mean; EquiStatic: ||W - J||²)")
    left.set_title(f"EquiTopo, eta = {ETA}, m = ⌊5 ln n⌋ offsets", fontsize=10)
    power = (ns & (ns - 1)) == 0  # n = 2^p: the one-peer exponential graph is exact
    for i, name in enumerate(FAMILIES):
        style = series_style(i)
        values = np.array([r[name] if r[name] is not None else np.nan for r in rows], float)
        line = "-" if i < 2 else "--" if i < 4 else "-."
        if name.startswith("one-peer"):
            right.plot(ns[power], values[power], label="one-peer exponential, n = 2^p (exact)",
                       color=style["color"], marker=style["marker"], linestyle=line)
            right.plot(ns[~power], values[~power], label="one-peer exponential, n = 1.5 * 2^p",
                       color=style["color"], marker="s", linestyle=":", fillstyle="none")
            continue
        right.plot(ns, values, label=name, color=style["color"], marker=style["marker"],
                   linestyle=line)
    bound = np.ceil(2 * np.log(EPS) / np.log((ns - 1) / (2 * ns)))
    right.plot(ns, bound, color="black", linestyle=":", linewidth=1.2,
               label="OD-EquiDyn bound: t with ((n-1)/2n)^t = 1e-16")
    right.set_ylabel(f"rounds until relative error < {EPS:g}")
    right.set_ylim(bottom=0)
    right.set_title("gossip from x(0) ~ N(0, I), mean error over seeds", fontsize=10)
    for ax in (left, right):
        log_axis(ax, "x", ns.min(), ns.max())
        ax.set_xticks(ns[::2], [str(n) for n in ns[::2]])
        ax.set_xlabel("number of nodes n")
        ax.grid(alpha=0.3, which="both")
    legend_outside(right)
    left.legend(fontsize=8, loc="upper right")
    return save(fig, path)


def table(rows: list[dict[str, object]]) -> str:
    """`measure`'s rows as a Markdown table.

    Parameters
    ----------
    rows : `measure`'s rows.

    Returns
    -------
    str.
    """
    names = list(FAMILIES)
    head = ("| n | m | " + " | ".join(f"rate {n.split(' (')[0]}" for n in DYNAMIC + STATIC)
            + " | " + " | ".join(f"rounds {n.split(' (')[0]}" for n in names) + " |")
    lines = [head, "|---" * (2 + len(DYNAMIC + STATIC) + len(names)) + "|"]
    for r in rows:
        rates = [f"{r[f'rate {n}']:.3f}" for n in DYNAMIC + STATIC]
        counts = [str(r[n]) if r[n] is not None else "-" for n in names]
        lines.append(f"| {r['n']} | {r['m']} | " + " | ".join(rates + counts) + " |")
    return "\n".join(lines)


def main() -> None:
    """Measure, draw and print the consensus rates against n."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/figures", help="output directory")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=150, help="gossip rounds per run")
    parser.add_argument("--contraction-rounds", type=int, default=200)
    args = parser.parse_args()
    rows = measure(args.seeds, args.rounds, args.contraction_rounds)
    for p in figure(rows, Path(args.out) / "equidyn_rate"):
        print(p)
    print(table(rows))


if __name__ == "__main__":
    main()
