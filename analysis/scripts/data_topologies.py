"""Topologies built from the data on real Fashion-MNIST (docs/topology-research.md).

`python -m analysis.scripts.data_topologies edges`: edges and messages of D-Cliques against the
complete graph at 100 and 1,000 nodes (no training).

`python -m analysis.scripts.data_topologies dcliques --seeds 0,1,2`: D-SGD (dpsgd, adapt then
combine, one step a round) on the complete graph, on D-Cliques (with and without clique averaging
and momentum, fully or ring inter-clique, with and without the greedy swaps) and on a random
graph with D-Cliques' edge count, over the config's partition (configs/topology_data.toml: one
class a node). Prints a Markdown table and writes `dcliques.png` / `.pdf` under `--out`.

`python -m analysis.scripts.data_topologies stlfw --set rounds=200 --seeds 0,1,2`: D-SGD with the
STL-FW matrix against a random connected d-regular graph (weights 1 / (d + 1), the authors'
baseline) for several degree budgets d and three partitions from IID to one class a node; both
run as SGP (Push-Sum with one step a round is D-SGD on a doubly-stochastic W). Prints a table and
writes `stl_fw.png` / `.pdf`.

Each seed changes the partition, the topologies, the initial model and the minibatches; tables
and figures show means over the seeds. Each finished run is stored in `--runs` (a JSON file per
experiment and config) and not run again, so an interrupted sweep continues where it stopped and
a second call only redraws.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

import topologies as T
from p2pfl.config import Config, load_config, parse_overrides, with_overrides
from p2pfl.engine import run
from p2pfl.engine.builder import federated_data
from p2pfl.report.figures import plt, save

MOMENTUM = 0.9  # D-Cliques' momentum; its runs take lr * (1 - MOMENTUM), the same long-run step
STL_LAM = 0.1  # lambda of STL-FW
BUDGETS = (2, 3, 5, 9)
UNSHARDED = {"data.shards_per_node": 2}  # back to its default: other partitions refuse it set
HETEROGENEITY = (  # label, partition overrides: from IID to one class a node
    ("IID", {"data.partition": "iid", **UNSHARDED}),
    ("Dirichlet 0.1", {"data.partition": "dirichlet", "data.alpha": 0.1, **UNSHARDED}),
    ("one class a node", {}),
)
SGP = {"algorithm.name": "sgp", "algorithm.order": ""}  # sgp has no order: its default


def first_connected(draw: Callable[[int], nx.Graph], seed: int, what: str) -> nx.Graph:
    """The first connected graph of `draw(seed)`, `draw(seed + 1)`, ... (redrawn until
    connected, as the authors' code).

    Parameters
    ----------
    draw : seed -> a random graph.
    seed : the first draw's seed (draw k uses seed + k).
    what : the graph, for the error.

    Returns
    -------
    nx.Graph.

    Raises
    ------
    RuntimeError
        when no draw in 1000 is connected.
    """
    for attempt in range(1000):
        G = draw(seed + attempt)
        if nx.is_connected(G):
            return G
    raise RuntimeError(f"no connected {what} in 1000 draws")


def second_singular_value(W: np.ndarray) -> float:
    """sigma_2(W) = ||W - J||_2 for a doubly-stochastic W: the contraction of one averaging.

    Parameters
    ----------
    W : [n, n] doubly-stochastic matrix.

    Returns
    -------
    float.
    """
    return float(np.linalg.svd(W, compute_uv=False)[1])


def train(cfg: Config, topology: object, overrides: dict[str, Any]) -> dict[str, Any]:
    """One run of `cfg` with `overrides` on `topology`.

    Parameters
    ----------
    cfg : the experiment's config.
    topology : the topology object.
    overrides : {dotted key: value}.

    Returns
    -------
    dict: test_acc (final), curve [(round, test_acc)], messages a round and wall_s.
    """
    start = time.perf_counter()
    history = run(with_overrides(cfg, overrides), topology=topology, figures=False)
    curve = [(r["round"], r["test_acc"]) for r in history if "test_acc" in r]
    return {"test_acc": history[-1]["test_acc"], "curve": curve,
            "messages": history[-1]["messages"], "wall_s": time.perf_counter() - start}


def cached(path: Path, key: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`compute()` stored under `key` in the JSON file `path` (read back if it is there).

    Parameters
    ----------
    path : the JSON file of results.
    key : the result's key.
    compute : makes the result when it is not stored.

    Returns
    -------
    dict, the result.
    """
    results = json.loads(path.read_text()) if path.exists() else {}
    if key not in results:
        results[key] = compute()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1))
        print(key, {k: v for k, v in results[key].items() if k != "curve"}, flush=True)
    return results[key]


def dcliques(cfg: Config, store: Path) -> list[dict[str, Any]]:
    """The D-Cliques comparison: one row per variant.

    Parameters
    ----------
    cfg : the experiment's config (its seed picks the draws).
    store : the JSON file caching the runs.

    Returns
    -------
    list of dict, one per variant.
    """
    counts = federated_data(cfg).label_counts()
    n = counts.shape[0]
    G = T.d_cliques(counts, clique_size=10, inter="fully", seed=cfg.seed)
    ring = T.d_cliques(counts, clique_size=10, inter="ring", seed=cfg.seed)
    unswapped = T.d_cliques(counts, clique_size=10, inter="fully", steps=0, seed=cfg.seed)
    m = G.number_of_edges()
    random = first_connected(lambda k: nx.gnm_random_graph(n, m, seed=k), cfg.seed,
                             f"G({n}, {m})")
    slow = {"algorithm.lr": cfg.algorithm.lr * (1 - MOMENTUM),
            "algorithm.persistent_momentum": MOMENTUM}
    average = {"algorithm.clique_averaging": True}
    variants = [
        ("complete", T.complete(n), {}),
        ("complete, momentum", T.complete(n), slow),
        ("random graph, same edges", random, {}),
        ("D-Cliques", G, {}),
        ("D-Cliques, momentum", G, slow),
        ("D-Cliques + clique avg", G, average),
        ("D-Cliques + clique avg, momentum", G, {**average, **slow}),
        ("D-Cliques ring + clique avg", ring, average),
        ("random cliques (no swap) + clique avg", unswapped, average),
    ]
    rows = []
    for label, topology, overrides in variants:
        result = cached(store, label, lambda t=topology, o=overrides: train(cfg, t, o))
        cliques = nx.get_node_attributes(topology, "clique")
        skew = (T.clique_skews(counts, np.array([cliques[i] for i in range(n)])).mean()
                if cliques else None)
        rows.append({"label": label, "edges": topology.number_of_edges(), "skew": skew,
                     **result})
    return rows


def edges_table(sizes: tuple[int, ...] = (100, 1000), classes: int = 10) -> str:
    """Edges and messages of D-Cliques against the complete graph, for each network size.

    Cliques of `classes` nodes, one class a node, as many nodes of each class.

    Parameters
    ----------
    sizes : network sizes.
    classes : classes (and clique size).

    Returns
    -------
    str, a Markdown table.
    """
    lines = ["| nodes | topology | edges | model messages / round | with clique averaging | "
             "edges saved vs complete |", "|---|---|---|---|---|---|"]
    for n in sizes:
        counts = np.repeat(np.eye(classes, dtype=np.int64), n // classes, axis=0)
        complete = n * (n - 1) // 2
        lines.append(f"| {n} | complete | {complete} | {2 * complete} | - | - |")
        for inter in T.INTER_CLIQUE:
            G = T.d_cliques(counts, classes, inter, seed=0)
            intra = (n // classes) * classes * (classes - 1) // 2
            m = G.number_of_edges()
            lines.append(f"| {n} | D-Cliques, {inter} | {m} | {2 * m} | {2 * m + 2 * intra} | "
                         f"{1 - m / complete:.1%} |")
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Rows of several seeds merged by `keys` (in first-seen order).

    The numbers are means over the seeds, `acc_sd` the standard deviation of the final accuracy
    and `seeds` their count (a seed whose graph was not connected, test_acc None, is left out of
    the accuracy).

    Parameters
    ----------
    rows : per-seed rows.
    keys : the columns that identify a row.

    Returns
    -------
    list of dict, one per distinct key.
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    merged = []
    for group in groups.values():
        ran = [r for r in group if r["test_acc"] is not None]
        row = {k: group[0][k] for k in keys}
        for k in ("edges", "skew", "tau", "sigma2", "in_degree", "messages", "wall_s"):
            values = [r[k] for r in (ran or group) if r.get(k) is not None]
            row[k] = float(np.mean(values)) if values else None
        accs = [r["test_acc"] for r in ran]
        row |= {"test_acc": float(np.mean(accs)) if accs else None,
                "acc_sd": float(np.std(accs)) if accs else None, "seeds": len(accs),
                "of": len(group)}
        if ran and "curve" in ran[0]:
            rounds = [t for t, _ in ran[0]["curve"]]
            curves = np.array([[a for _, a in r["curve"]] for r in ran])
            row |= {"rounds": rounds, "acc_mean": curves.mean(axis=0).tolist(),
                    "acc_min": curves.min(axis=0).tolist(), "acc_max": curves.max(axis=0).tolist()}
        merged.append(row)
    return merged


def accuracy(r: dict[str, Any]) -> str:
    """A merged row's final accuracy as text.

    Parameters
    ----------
    r : a merged row (`summary`).

    Returns
    -------
    str, '0.834 ± 0.003 (3 seeds)': mean final accuracy, its standard deviation over the seeds,
    seeds; "not connected" without a run.
    """
    if r["test_acc"] is None:
        return "not connected"
    spread = f" ± {r['acc_sd']:.3f}" if r["seeds"] > 1 else ""
    unconnected = f", {r['of'] - r['seeds']} not connected" if r["of"] > r["seeds"] else ""
    return f"{r['test_acc']:.3f}{spread} ({r['seeds']} seed{'s' * (r['seeds'] > 1)}{unconnected})"


def dcliques_table(rows: list[dict[str, Any]]) -> str:
    """The D-Cliques comparison as a Markdown table (messages saved against the complete graph).

    Parameters
    ----------
    rows : merged rows (`summary`), one labelled "complete".

    Returns
    -------
    str.
    """
    complete = next(r for r in rows if r["label"] == "complete")
    lines = ["| topology | edges | mean clique skew | messages / round | saved vs complete | "
             "final test acc | wall s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        saved = 1 - r["messages"] / complete["messages"]
        skew = "-" if r["skew"] is None else f"{r['skew']:.3f}"
        lines.append(f"| {r['label']} | {r['edges']:.0f} | {skew} | {r['messages']:.0f} | "
                     f"{saved:.0%} | {accuracy(r)} | {r['wall_s']:.0f} |")
    return "\n".join(lines)


def dcliques_figure(rows: list[dict[str, Any]], lr: float, out: Path) -> None:
    """Accuracy curves (mean over the seeds, band min to max), without momentum (left) and with it
    (right).

    Parameters
    ----------
    rows : merged rows with their curves.
    lr : the step without momentum.
    out : the figure folder.
    """
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, momentum in zip(axes, (False, True)):
        for r in rows:
            if ("momentum" in r["label"]) != momentum:
                continue
            line, = ax.plot(r["rounds"], r["acc_mean"], marker="o", markersize=3,
                            label=r["label"])
            ax.fill_between(r["rounds"], r["acc_min"], r["acc_max"], color=line.get_color(),
                            alpha=0.15, linewidth=0)
        ax.set_xlabel("round (one local step each)")
        ax.set_title(f"lr {lr * (1 - MOMENTUM):g}, momentum {MOMENTUM} kept across rounds"
                     if momentum else f"lr {lr:g}, no momentum", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("test accuracy of the average model")
    seeds = max(r["seeds"] for r in rows)
    fig.suptitle("D-SGD on 100 Fashion-MNIST nodes of one class each (mlp); mean of "
                 f"{seeds} seed{'s' * (seeds > 1)}, band: min to max", fontsize=10)
    save(fig, out / "dcliques")


def stlfw(cfg: Config, store: Path) -> list[dict[str, Any]]:
    """STL-FW against random d-regular graphs: one row per (partition, budget, topology).

    Parameters
    ----------
    cfg : the experiment's config.
    store : the JSON file caching the runs.

    Returns
    -------
    list of dict.
    """
    rows = []
    for name, partition in HETEROGENEITY:
        part_cfg = with_overrides(cfg, partition)
        counts = federated_data(part_cfg).label_counts()
        pi = counts / counts.sum(axis=1, keepdims=True)
        n = len(pi)
        for budget in BUDGETS:
            W = T.stl_fw(pi, budget, lam=STL_LAM, connected=False)  # recorded, not run
            R = T.column_stochastic(first_connected(
                lambda k, n=n, d=budget: T.random_regular(n, d, seed=k), cfg.seed,
                f"{budget}-regular graph on {n} nodes"))
            for kind, M in (("STL-FW", W), ("random regular", R)):
                row = {"partition": name, "budget": budget, "kind": kind,
                       "tau": T.neighborhood_heterogeneity(M, pi),
                       "sigma2": second_singular_value(M),
                       "in_degree": int(((M > 0).sum(axis=1) - 1).max())}
                if not T.is_strongly_connected(T.from_adjacency(M.T)):
                    rows.append({**row, "test_acc": None, "messages": None, "wall_s": None})
                    continue
                result = cached(store, f"{name} | d={budget} | {kind}",
                                lambda M=M, c=part_cfg: train(c, M, SGP))
                rows.append({**row, **result})
    return rows


def stlfw_table(rows: list[dict[str, Any]]) -> str:
    """The STL-FW comparison as a Markdown table.

    Parameters
    ----------
    rows : merged rows (`summary`).

    Returns
    -------
    str.
    """
    lines = ["| partition | budget d | topology | tau(W) | sigma_2(W) | max in-degree | "
             "messages / round | final test acc | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        messages = "-" if r["messages"] is None else f"{r['messages']:.0f}"
        wall = "-" if r["wall_s"] is None else f"{r['wall_s']:.0f}"
        lines.append(f"| {r['partition']} | {r['budget']} | {r['kind']} | {r['tau']:.4f} | "
                     f"{r['sigma2']:.3f} | {r['in_degree']:.0f} | {messages} | {accuracy(r)} | "
                     f"{wall} |")
    return "\n".join(lines)


def stlfw_gains(rows: list[dict[str, Any]]) -> dict[tuple[str, int], list[float]]:
    """The accuracy of STL-FW minus that of the random regular graph, per (partition, budget).

    Parameters
    ----------
    rows : per-seed rows, each with a "seed".

    Returns
    -------
    dict {(partition, budget): one gain per seed where both ran}.
    """
    acc = {(r["partition"], r["budget"], r["kind"], r["seed"]): r["test_acc"] for r in rows}
    gains: dict[tuple[str, int], list[float]] = {}
    for (name, budget, kind, seed), value in acc.items():
        other = acc.get((name, budget, "random regular", seed))
        if kind == "STL-FW" and value is not None and other is not None:
            gains.setdefault((name, budget), []).append(value - other)
    return gains


def stlfw_figure(merged: list[dict[str, Any]], rows: list[dict[str, Any]], out: Path) -> None:
    """Final accuracy against the budget (mean over the seeds), the gain of STL-FW over the random
    regular graph (mean, error bar one standard deviation over the seeds) and tau(W).

    Parameters
    ----------
    merged : merged rows (`summary`).
    rows : per-seed rows (for the gains).
    out : the figure folder.
    """
    names = [name for name, _ in HETEROGENEITY]
    colors = dict(zip(names, ("tab:gray", "tab:orange", "tab:purple")))
    styles = {"STL-FW": "-", "random regular": ":"}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for name in names:
        for kind, style in styles.items():
            cells = [r for r in merged if r["partition"] == name and r["kind"] == kind
                     and r["test_acc"] is not None]
            axes[0].plot([r["budget"] for r in cells], [r["test_acc"] for r in cells],
                         marker="o", linestyle=style, color=colors[name], label=f"{kind}, {name}")
            cells = [r for r in merged if r["partition"] == name and r["kind"] == kind]
            axes[2].plot([r["budget"] for r in cells], [r["tau"] for r in cells], marker="o",
                         linestyle=style, color=colors[name], label=f"{kind}, {name}")
        gains = stlfw_gains(rows)
        budgets = [b for b in BUDGETS if (name, b) in gains]
        axes[1].errorbar(budgets, [100 * np.mean(gains[name, b]) for b in budgets],
                         yerr=[100 * np.std(gains[name, b]) for b in budgets], marker="o",
                         capsize=3, color=colors[name], label=name)
    axes[1].axhline(0, color="black", linewidth=0.8)
    titles = ("final test accuracy (solid: STL-FW, dotted: random regular)",
              "STL-FW minus random regular, accuracy points", "neighbourhood heterogeneity tau(W)")
    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("degree budget d")
        ax.set_xticks(BUDGETS)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=6)
    axes[1].legend(fontsize=7)
    axes[2].legend(fontsize=6)
    seeds = max(r["of"] for r in merged)
    fig.suptitle(f"D-SGD (SGP, one step a round) on 100 Fashion-MNIST nodes, mlp; mean of {seeds} "
                 f"seed{'s' * (seeds > 1)}", fontsize=10)
    save(fig, out / "stl_fw")


def main() -> None:
    """Run one experiment of the module (edges, dcliques or stlfw): print its table and, but
    for edges, draw its figure (runs cached in --runs, one JSON file per seed and config)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=("edges", "dcliques", "stlfw"))
    parser.add_argument("--config", default="configs/topology_data.toml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override, e.g. --set rounds=50 (repeatable)")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    parser.add_argument("--runs", default="runs/data_topologies", help="folder of the results")
    parser.add_argument("--out", default="docs/figures", help="figure folder")
    args = parser.parse_args()
    if args.experiment == "edges":
        print(edges_table())
        return
    cfg = load_config(args.config, parse_overrides(args.set))
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        seeded = with_overrides(cfg, {"seed": seed})
        digest = hashlib.sha256(json.dumps(seeded.to_dict(), sort_keys=True).encode())
        store = Path(args.runs) / f"{args.experiment}-{digest.hexdigest()[:12]}.json"
        experiment = dcliques if args.experiment == "dcliques" else stlfw
        rows += [{**r, "seed": seed} for r in experiment(seeded, store)]
    if args.experiment == "dcliques":
        merged = summary(rows, ("label",))
        print(dcliques_table(merged))
        dcliques_figure(merged, cfg.algorithm.lr, Path(args.out))
    else:
        merged = summary(rows, ("partition", "budget", "kind"))
        print(stlfw_table(merged))
        stlfw_figure(merged, rows, Path(args.out))


if __name__ == "__main__":
    main()
