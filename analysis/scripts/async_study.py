"""Synchronous against asynchronous learning on the simulated clock (docs/async.md).

Real Fashion-MNIST (Dirichlet 0.5 over the nodes), mnist_2NN, one local step of batch 32 a
round (a phase), lr 0.05, the default network (10 ms a step, 5 ms latency, 1 Gbit/s), with no
stragglers or 25 % of the nodes 10x slower:

- decentralized, N nodes: D-PSGD and AD-PSGD on the undirected exponential graph, SGP and async
  SGP on the directed one. The synchronous runs take `--rounds` rounds; the asynchronous ones
  run for as many nominal rounds as D-PSGD's simulated time (same seed and setting).
- on the star, 64 clients with 25 % stragglers, 5 local steps: FedAvg samples 16 clients a round;
  FedBuff keeps 16 training (concurrency) and steps after every 8 updates (buffer), for FedAvg's
  simulated time.

`python -m analysis.scripts.async_study --out runs/async [--nodes 16,64] [--seeds 0,1,2]
[--part decentralized,server] [--figure docs/figures/async.png]` runs what is missing (a run
with a summary.json is kept), prints the Markdown table (simulated seconds to the target, mean
over seeds, and the final accuracy) and draws accuracy against simulated time.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from p2pfl.config import Config, config_from_dict
from p2pfl.engine import run
from p2pfl.errors import DivergenceError
from p2pfl.report.figures import plt, save
from p2pfl.report.results import read_metrics

TARGET = 0.65
DECENTRALIZED = (("dpsgd", False, False), ("adpsgd", False, True), ("sgp", True, False),
                 ("async_sgp", True, True))  # (algorithm, directed graph, asynchronous)
SERVER = (("fedavg", False), ("fedbuff", True))
STRAGGLERS = (0.0, 0.25)
EVAL_POINTS = 40  # evaluations over a run
COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red")  # an algorithm's place: its colour
DIVERGED = "diverged.txt"  # in a run's folder: it diverged (the study keeps it and goes on)


def study_config(algorithm: str, nodes: int, stragglers: float, seed: int, rounds: int,
                 directed: bool = False) -> Config:
    """The config of one run of the study.

    Parameters
    ----------
    algorithm : its name.
    nodes : N (clients on the star).
    stragglers : the fraction of nodes 10x slower.
    seed : the seed.
    rounds : rounds (nominal rounds of an asynchronous run).
    directed : the directed exponential graph (Push-Sum), else the undirected one.

    Returns
    -------
    Config.
    """
    server = algorithm in ("fedavg", "fedbuff")
    options: dict[str, Any] = {"name": algorithm, "lr": 0.05, "lr_decay": 1.0,
                               "local_steps": 5 if server else 1, "local_epochs": 0,
                               "batch_size": 32}
    if algorithm == "fedavg":
        options |= {"participation": 0.25, "weights": "uniform"}
    if algorithm == "fedbuff":
        options |= {"concurrency": nodes // 4, "buffer_size": nodes // 8}
    network: dict[str, Any] = {"enabled": True}
    if stragglers:
        network |= {"stragglers": stragglers, "slow_factor": 10.0}
    return config_from_dict({
        "seed": seed, "rounds": rounds, "device": "cpu",
        "data": {"name": "fashion_mnist", "num_nodes": nodes, "partition": "dirichlet",
                 "alpha": 0.5},
        "model": {"name": "mlp"},
        "topology": {"name": "star"} if server else {"name": "exponential",
                                                    "directed": directed},
        "algorithm": options, "eval": {"every": max(1, rounds // EVAL_POINTS),
                                       "local_samples": 500},
        "network": network})


def run_once(cfg: Config, out: Path) -> list[dict[str, Any]]:
    """Run `cfg` into `out`, or read the run there if it finished or diverged.

    Parameters
    ----------
    cfg : the config.
    out : the run directory.

    Returns
    -------
    list of the run's metrics records; a run that diverged ends with its last record marked
    `diverged` (its records up to the divergence are kept, and a `diverged.txt` says why).
    """
    if (out / "summary.json").exists():
        return read_metrics(out / "metrics.jsonl")
    if (out / DIVERGED).exists():
        return _diverged(read_metrics(out / "metrics.jsonl"))
    if out.exists():  # an unfinished run: start it again
        for path in sorted(out.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
    try:
        history = run(cfg, out, figures=False)
    except DivergenceError as err:
        (out / DIVERGED).write_text(f"{err}\n")
        print(f"{out}: diverged ({err})", flush=True)
        return _diverged(read_metrics(out / "metrics.jsonl"))
    print(f"{out}: {history[-1]['sim_time_s']:.2f} s simulated, "
          f"{sum(r['wall_s'] + r.get('eval_s', 0) for r in history):.0f} s wall", flush=True)
    return history


def _diverged(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of a diverged run, the last one marked."""
    return history[:-1] + [{**history[-1], "diverged": True}] if history else \
        [{"round": 0, "sim_time_s": 0.0, "test_acc": float("nan"), "diverged": True}]


def nominal_rounds(sync: list[dict[str, Any]], cfg: Config) -> int:
    """Nominal rounds of an asynchronous run that cover a synchronous run's simulated time.

    Parameters
    ----------
    sync : the synchronous run's records.
    cfg : the asynchronous run's config (any rounds).

    Returns
    -------
    int.
    """
    from p2pfl.engine.builder import build

    ctx, algorithm = build(cfg)
    return math.ceil(sync[-1]["sim_time_s"] / ctx.clock.nominal_s(algorithm.transfers) - 1e-9)


def run_study(out: Path, nodes: list[int], seeds: list[int], rounds: int,
              parts: list[str]) -> dict[str, dict[str, list[list[dict[str, Any]]]]]:
    """Every run of the study (see the module docstring).

    Parameters
    ----------
    out : the folder of the runs.
    nodes : the decentralized sizes.
    seeds : the seeds.
    rounds : rounds of the synchronous runs.
    parts : "decentralized" and/or "server".

    Returns
    -------
    dict {setting: {algorithm: [records of each seed]}}.
    """
    results: dict[str, dict[str, list[list[dict[str, Any]]]]] = {}
    settings: list[tuple[str, int, float, tuple]] = []
    if "decentralized" in parts:
        settings += [(f"N={n}, stragglers {s:g}", n, s, DECENTRALIZED)
                     for n in nodes for s in STRAGGLERS]
    if "server" in parts:
        settings.append(("star, 64 clients, stragglers 0.25", 64, 0.25,
                         tuple((a, False, asy) for a, asy in SERVER)))
    for setting, n, s, algorithms in settings:
        results[setting] = {}
        for seed in seeds:
            reference = None
            for algorithm, directed, asynchronous in algorithms:
                cfg = study_config(algorithm, n, s, seed, rounds, directed)
                if asynchronous:
                    cfg = study_config(algorithm, n, s, seed, nominal_rounds(reference, cfg),
                                       directed)
                folder = out / setting.replace(", ", "_").replace(" ", "-") / algorithm
                history = run_once(cfg, folder / f"seed{seed}")
                reference = reference or history
                results[setting].setdefault(algorithm, []).append(history)
    return results


def seconds_to(history: list[dict[str, Any]], target: float) -> float | None:
    """Simulated seconds of the first evaluation at or above `target` (None: never).

    Parameters
    ----------
    history : a run's records.
    target : the accuracy.

    Returns
    -------
    float or None.
    """
    return next((r["sim_time_s"] for r in history if r.get("test_acc", -1) >= target), None)


def table(results: dict[str, dict[str, list[list[dict[str, Any]]]]], target: float) -> str:
    """Markdown: per setting and algorithm, seconds to the target and final accuracy.

    Parameters
    ----------
    results : `run_study`'s.
    target : the accuracy.

    Returns
    -------
    str.
    """
    at = f"{100 * target:g}%"
    lines = [f"| setting | algorithm | s to {at} (mean ± sd) | x D-PSGD / FedAvg | "
             "final acc | simulated s | local steps per node |", "|---|---|---|---|---|---|---|"]
    for setting, runs in results.items():
        first: float | None = None
        for i, (algorithm, histories) in enumerate(runs.items()):
            diverged = sum(bool(h[-1].get("diverged")) for h in histories)
            histories = [h for h in histories if not h[-1].get("diverged")]
            times = [seconds_to(h, target) for h in histories]
            reached = [t for t in times if t is not None]
            mean = float(np.mean(reached)) if reached else None
            first = mean if i == 0 else first  # the synchronous reference (D-PSGD, FedAvg)
            cell = (f"{mean:.2f} ± {np.std(reached):.2f}" if reached else "not reached")
            if reached and len(reached) < len(times):
                cell += f" ({len(reached)}/{len(times)} seeds)"
            if diverged:
                cell += f" ({diverged} of {diverged + len(histories)} seeds diverged)"
            if not histories:
                lines.append(f"| {setting} | {algorithm} | {cell} | | | | |")
                continue
            ratio = f"{mean / first:.2f}" if mean is not None and first else ""
            final = np.mean([h[-1]["test_acc"] for h in histories])
            steps = np.mean([h[-1].get("steps_mean", h[-1]["round"]) for h in histories])
            lines.append(f"| {setting} | {algorithm} | {cell} | {ratio} | {100 * final:.1f} % | "
                         f"{histories[0][-1]['sim_time_s']:.2f} | {steps:.0f} |")
    return "\n".join(lines) + "\n"


def figure(results: dict[str, dict[str, list[list[dict[str, Any]]]]], target: float,
           path: Path) -> None:
    """Test accuracy (mean over seeds) against simulated seconds, one panel per setting.

    Parameters
    ----------
    results : `run_study`'s.
    target : the accuracy drawn as a line.
    path : the figure's path without suffix.
    """
    cols = min(len(results), 3)
    rows = math.ceil(len(results) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.flat[len(results):]:
        ax.set_visible(False)
    for ax, (setting, runs) in zip(axes.flat, results.items()):
        for colour, (algorithm, histories) in zip(COLOURS, runs.items()):
            points = [[(r["sim_time_s"], r["test_acc"]) for r in h if "test_acc" in r]
                      for h in histories if not h[-1].get("diverged")]
            diverged = len(histories) - len(points)
            label = algorithm if not diverged else (
                f"{algorithm}: {diverged} of {len(histories)} seeds diverged"
                + ("" if points else " (not drawn)"))
            if not points:
                ax.plot([], [], color=colour, linestyle="--", label=label)
                continue
            length = min(len(p) for p in points)
            xs = np.mean([[p[i][0] for i in range(length)] for p in points], axis=0)
            ys = np.mean([[p[i][1] for i in range(length)] for p in points], axis=0)
            ax.plot(xs, 100 * ys, color=colour, label=label)
        ax.axhline(100 * target, color="0.5", linestyle=":")
        ax.text(ax.get_xlim()[1], 100 * target, f"{100 * target:g} % ", fontsize=7,
                color="0.4", ha="right", va="bottom")
        ax.set_title(setting, fontsize=9)
        ax.set_xlabel("simulated time (s)")
        ax.set_ylim(10, 90)
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("test accuracy (%)")
    for ax in axes.flat[:len(results)]:
        ax.legend(fontsize=7, loc="lower right")
    seeds = max(len(h) for runs in results.values() for h in runs.values())
    fig.suptitle(f"Fashion-MNIST (Dirichlet 0.5), mnist_2NN, simulated network (flow model); "
                 f"test accuracy of the average (server) model, mean of {seeds} seeds", fontsize=10)
    save(fig, path)


def main() -> None:
    """Run the study, print its table, draw its figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/async")
    parser.add_argument("--nodes", default="16,64")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=80, help="rounds of the synchronous runs")
    parser.add_argument("--part", default="decentralized,server")
    parser.add_argument("--target", type=float, default=TARGET)
    parser.add_argument("--figure", default="")
    args = parser.parse_args()
    results = run_study(Path(args.out), [int(n) for n in args.nodes.split(",")],
                        [int(s) for s in args.seeds.split(",")], args.rounds,
                        args.part.split(","))
    print(table(results, args.target), end="")
    if args.figure:
        figure(results, args.target, Path(args.figure))


if __name__ == "__main__":
    main()
