"""An algorithm of one's own: lazy Metropolis gossip, x <- ((1 - beta) I + beta W) y after the
local phase, with its own option `beta`, registered by name and run on real Fashion-MNIST beside
DFedAvg (beta = 1).

    python examples/own_algorithm.py [OUT] [--rounds R]        # 15 seconds on 2 CPU cores

`@register` makes "lazy_gossip" a config name with the option `beta` (checked against its limits;
refused for any other algorithm). algorithm.json records the class and a fingerprint of its
source, so `python examples/own_algorithm.py OUT --resume` continues the runs (after a kill, say),
and a resume with another class, or this one edited, is refused.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import p2pfl
import topologies as T
from algorithms import Gossip, register
from p2pfl.config import config_from_dict
from p2pfl.options import option


@register
class LazyGossip(Gossip):
    """DFedAvg's local phase, then a lazy gossip step: each node keeps 1 - beta of its model."""

    name = "lazy_gossip"

    @dataclass
    class Options(Gossip.Options):
        beta: float = option(0.5, low=0, high=1, low_open=True,
                             doc="weight of the Metropolis mix (1: plain gossip)")

    def gossip_matrix(self, ctx, graph, faults):
        W = T.doubly_stochastic(graph, faults=faults)
        lazy = (1 - self.cfg.beta) * np.eye(len(W)) + self.cfg.beta * W
        return ctx.comm.matrix(torch.as_tensor(lazy)), 1


@register
class HalfLazyGossip(LazyGossip):
    """Another class under its own name (to show that a resume checks the class)."""

    name = "half_lazy_gossip"


def config(data: str, rounds: int) -> p2pfl.Config:
    return config_from_dict({
        "seed": 0, "rounds": rounds, "device": "auto",
        "data": {"name": data, "num_nodes": 16, "partition": "dirichlet", "alpha": 0.3},
        "topology": {"name": "ring"},
        "algorithm": {"name": "lazy_gossip", "lr": 0.05, "local_epochs": 0, "local_steps": 20,
                      "batch_size": 32},
        "eval": {"local_samples": 500},
        "compare": [{"label": "lazy, beta 0.5", "algorithm.beta": 0.5},
                    {"label": "DFedAvg (beta 1)", "algorithm.beta": 1.0}],
    })


def main(out: Path, rounds: int = 20, data: str = "fashion_mnist", resume: bool = False,
         other: bool = False) -> dict[str, float]:
    """Run (or continue) both variants into `out`; `other` resumes with another class."""
    if other:
        return {"test_acc": p2pfl.run(p2pfl.with_overrides(config(data, rounds),
                                                           {"compare": None}),
                                      out / "lazy-beta-0.5" / "seed0", resume=True,
                                      algorithm=HalfLazyGossip)[-1]["test_acc"]}
    histories = p2pfl.run_compare(config(data, rounds), out, resume=resume)
    return {label: h[-1]["test_acc"] for label, h in histories.items()}


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("out", nargs="?", type=Path, default=Path("runs/own_algorithm"))
    cli.add_argument("--rounds", type=int, default=20)
    cli.add_argument("--data", default="fashion_mnist", help="'synthetic' for a quick check")
    cli.add_argument("--resume", action="store_true", help="continue the runs in OUT")
    args = cli.parse_args()
    for label, acc in main(args.out, args.rounds, args.data, args.resume).items():
        print(f"{label}: test accuracy {acc:.4f} after {args.rounds} rounds")
