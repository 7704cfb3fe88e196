"""Training on the throughput overlays of an underlay, on the engine's simulated clock
(docs/topology-research.md, "Overlays for throughput").

The silos are the underlay's nodes (`--underlay`, default gaia: 11 AWS regions; its links' own
capacities), each
holding a Dirichlet(0.5) share of real Fashion-MNIST; mnist_2NN, D-PSGD adapt-then-combine with 10
local steps of batch 32 a round (lr 0.05); every message 5 ms plus its path's latency, silos'
access links of 1 Gbit/s, the flow network (a message shares its sender's uplink, its receiver's
downlink and every underlay link of its path). Overlays: the MST, the delta-MBST, the
Christofides ring (undirected here, so that D-PSGD runs on every overlay), MATCHA (budget 0.5;
its rounds' graphs with Metropolis-Hastings weights: MATCHA's own weight alpha gives a node with
many active matchings a negative self-weight, which D-PSGD's doubly-stochastic check refuses),
the star's silo graph (every silo to the center, gossip on it) and the centralized star:
FedAvg (every client each round, the same 10 local steps), its server a node of its own beside
the center silo (an underlay object: gaia plus a link of no latency and ample capacity),
predicted as the paper's star (the center a silo).

For each: its predicted cycle time (the max-plus model on the same links, `T.cycle_time`; MATCHA
its mean round, `T.mean_round_time`), the engine's mean simulated round, and the simulated
seconds to the target accuracy of the average model.

`python -m analysis.scripts.overlay_training --out runs/overlays [--underlay gaia] [--rounds 60]
[--seeds 0]`
runs what is missing and prints the Markdown table (a few minutes a run on a 2-core CPU).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

import topologies as T
from p2pfl.config import config_from_dict
from p2pfl.engine import run
from p2pfl.report.results import read_metrics

UNDERLAY = "gaia"
TARGET = 0.7
LATENCY_S = 0.005  # [network] latency_s, every message
ACCESS_GBPS = 1.0
STEP_S = 0.01  # [network] step_s
LOCAL_STEPS = 10
BUDGET = 0.5  # MATCHA


def base_config(seed: int, rounds: int, underlay: str = UNDERLAY) -> dict[str, Any]:
    """The runs' shared config (the topology is given as an object).

    Parameters
    ----------
    seed : the run's seed.
    rounds : its rounds.
    underlay : the underlay's name (T.UNDERLAYS).

    Returns
    -------
    dict, a config as `config_from_dict` reads it.
    """
    return {
        "seed": seed, "rounds": rounds, "device": "cpu",
        "data": {"name": "fashion_mnist", "num_nodes": T.underlay(underlay).number_of_nodes(),
                 "partition": "dirichlet", "alpha": 0.5},
        "model": {"name": "mlp"},
        "algorithm": {"name": "dpsgd", "order": "atc", "lr": 0.05, "lr_decay": 1.0,
                      "local_epochs": 0, "local_steps": LOCAL_STEPS, "batch_size": 32},
        "eval": {"every": 2, "local_samples": 500},
        "network": {"enabled": True, "model": "flow", "underlay": underlay,
                    "latency_s": LATENCY_S, "step_s": STEP_S, "uplink_gbps": ACCESS_GBPS,
                    "downlink_gbps": ACCESS_GBPS},
    }


def _unweighted(graph: nx.Graph) -> nx.Graph:
    """The same nodes and edges without the edge weights (Metropolis-Hastings weights then)."""
    out = nx.empty_graph(graph.number_of_nodes())
    out.add_edges_from(graph.edges())
    return out


def server_underlay(center: int, underlay: str = UNDERLAY) -> nx.Graph:
    """The underlay with a server beside silo `center`: the server is node 0 (the engine's star
    puts its server at graph node 0), silo i is node i + 1, the server's link has no latency and
    ample capacity.

    Parameters
    ----------
    center : the silo the server sits beside.
    underlay : the underlay's name.

    Returns
    -------
    nx.Graph, an underlay (p2pfl.objects.underlay).
    """
    graph = nx.relabel_nodes(T.underlay(underlay), lambda v: v + 1)
    graph.add_edge(0, center + 1, capacity_gbps=1e6, latency_s=0.0)
    return nx.convert_node_labels_to_integers(graph, ordering="sorted")


def overlays(model_bits: float, seed: int, rounds: int, name: str = UNDERLAY
             ) -> dict[str, tuple[dict[str, Any], float]]:
    """The overlays trained, on the underlay's links.

    Parameters
    ----------
    model_bits : the model's size in bits.
    seed : MATCHA's seed.
    rounds : the rounds run (MATCHA's prediction averages the same draws).
    name : the underlay's name.

    Returns
    -------
    dict {name: (what `run` is given besides the config: topology or algorithm and underlay,
    its predicted seconds per round)}.
    """
    underlay = T.underlay(name)
    links = T.silo_links(underlay, latency_s=LATENCY_S)
    compute = LOCAL_STEPS * STEP_S

    def cycle(g: nx.Graph) -> float:
        return T.cycle_time(g, links, model_bits, compute, ACCESS_GBPS)

    mst = T.mst_overlay(links, model_bits, compute)
    mbst = T.mbst_overlay(links, model_bits, compute, ACCESS_GBPS)
    ring = T.ring_overlay(links, model_bits, compute, ACCESS_GBPS).to_undirected()
    star = T.star_overlay(links)
    matcha = T.matcha(nx.Graph(underlay.edges), BUDGET, seed=seed)
    matcha_mh = T.from_function(lambda t: _unweighted(matcha.at(t)))
    center = star.graph["center"]
    return {"mst": ({"topology": mst}, cycle(mst)),
            "delta-mbst": ({"topology": mbst}, cycle(mbst)),
            "ring": ({"topology": ring}, cycle(ring)),
            "star-gossip": ({"topology": star}, cycle(star)),
            "matcha-mh": ({"topology": matcha_mh}, T.mean_round_time(
                matcha, links, model_bits, compute, ACCESS_GBPS, rounds)),
            "star-fedavg": ({"underlay": server_underlay(center, name), "fedavg": True},
                            T.cycle_time(star, links, model_bits, compute, ACCESS_GBPS,
                                         server=center))}


def fedavg_config(raw: dict[str, Any]) -> dict[str, Any]:
    """The shared config with FedAvg on the star: every client each round, the same local steps.

    Parameters
    ----------
    raw : `base_config`'s dict.

    Returns
    -------
    dict.
    """
    options = {k: v for k, v in raw["algorithm"].items() if k != "order"}
    network = {k: v for k, v in raw["network"].items() if k != "underlay"}
    return {**raw, "topology": {"name": "star"}, "network": network,
            "algorithm": {**options, "name": "fedavg", "participation": 1.0}}


def summary(history: list[dict[str, Any]]) -> dict[str, float | None]:
    """The numbers of one run.

    Parameters
    ----------
    history : its metrics records.

    Returns
    -------
    dict: round_s (mean simulated round), final (accuracy), rounds and seconds (simulated) of
    the first evaluation at the target, None if never.
    """
    times = [r["sim_time_s"] for r in history]
    reached = next((r for r in history if r.get("test_acc", 0.0) >= TARGET), None)
    return {"round_s": times[-1] / len(times),
            "final": next(r["test_acc"] for r in reversed(history) if "test_acc" in r),
            "rounds": reached["round"] if reached else None,
            "seconds": reached["sim_time_s"] if reached else None}


def _mean(summaries: list[dict[str, float | None]], key: str) -> str:
    """The mean of `key` over the seeds that have it, or "not reached"."""
    values = [s[key] for s in summaries if s[key] is not None]
    return f"{np.mean(values):.3g}" if values else "not reached"


def main() -> None:
    """Run the overlays that are missing under --out, then print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/overlays")
    parser.add_argument("--underlay", default=UNDERLAY, choices=T.UNDERLAYS)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--seeds", default="0")
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, dict[str, float | None]]]] = {}
    for seed in map(int, args.seeds.split(",")):
        raw = base_config(seed, args.rounds, args.underlay)
        bits = 32 * (784 * 200 + 200 + 200 * 200 + 200 + 200 * 10 + 10)  # mnist_2NN, float32
        for name, (given, predicted) in overlays(bits, seed, args.rounds, args.underlay).items():
            out = Path(args.out) / name / f"seed{seed}"
            cfg = config_from_dict(fedavg_config(raw) if given.pop("fedavg", False) else raw)
            if not (out / "summary.json").exists():
                run(cfg, out, figures=False, resume=(out / "config.json").exists(), **given)
            rows.setdefault(name, []).append((predicted, summary(read_metrics(
                out / "metrics.jsonl"))))
    print(f"| overlay | predicted s/round | engine s/round | final acc % | rounds to "
          f"{100 * TARGET:g}% | simulated s to {100 * TARGET:g}% |")
    print("|---|---|---|---|---|---|")
    for name, found in rows.items():
        summaries = [s for _, s in found]
        print(f"| {name} | {np.mean([p for p, _ in found]):.3f} | {_mean(summaries, 'round_s')} | "
              f"{100 * np.mean([s['final'] for s in summaries]):.2f} | "
              f"{_mean(summaries, 'rounds')} | {_mean(summaries, 'seconds')} |")


if __name__ == "__main__":
    main()
