"""Run DFedSGPSM on topologies built in Python: a hand-made directed graph, then a time-varying
schedule of one's own (a function of the round), on real Fashion-MNIST.

    python examples/own_topology.py [OUT]        # about a minute on 2 CPU cores

Each run directory records the topology (config.json: topology.name = "object"; topology.json:
the graphs or their fingerprint), so `p2pfl resume OUT/static` rebuilds the static graph, and a
resume of the schedule refuses to go on unless it is passed again, unchanged.
"""

from __future__ import annotations

import sys
from pathlib import Path

import networkx as nx

import p2pfl
from p2pfl.config import config_from_dict

N = 16


def hand_built() -> nx.DiGraph:
    """A directed ring with four chords across it: strongly connected, diameter 5."""
    G = nx.DiGraph([(i, (i + 1) % N) for i in range(N)])
    G.add_edges_from([(0, 8), (4, 12), (8, 0), (12, 4)])
    return G


def shifting_ring(t: int) -> nx.DiGraph:
    """Round t: every node sends to the node 2**(t mod 4) ahead (one-peer exponential)."""
    hop = 2 ** (t % 4)
    return nx.DiGraph([(i, (i + hop) % N) for i in range(N)])


def config(data: str = "fashion_mnist", rounds: int = 10) -> p2pfl.Config:
    return config_from_dict({
        "seed": 0, "rounds": rounds, "device": "auto",
        "data": {"name": data, "num_nodes": N, "partition": "dirichlet", "alpha": 0.3},
        "algorithm": {"name": "dfedsgpsm", "lr": 0.05, "momentum": 0.9, "rho": 0.05,
                      "local_epochs": 1, "batch_size": 64},
        "eval": {"local_samples": 500},
    })


def main(out: Path, data: str = "fashion_mnist", rounds: int = 10) -> dict[str, float]:
    """Run both topologies into out/static and out/schedule; their final test accuracies."""
    cfg = config(data, rounds)
    final = {}
    for name, topology in (("static", hand_built()), ("schedule", shifting_ring)):
        history = p2pfl.run(cfg, out / name, topology=topology)
        final[name] = history[-1]["test_acc"]
    return final


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("runs/own_topology")
    for name, acc in main(out).items():
        print(f"{name}: test accuracy {acc:.4f} after 10 rounds ({out / name})")
