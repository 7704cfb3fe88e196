"""Run SGP with a model of one's own: a small CNN with GroupNorm, given as a torch.nn.Module, on
real Fashion-MNIST (16 nodes, one-peer exponential graph).

    python examples/own_model.py [OUT] [--rounds R]        # 45 seconds on 2 CPU cores

The engine runs the module as one vectorized population (torch.func), so any module without
BatchNorm running statistics works. model.json records its class, parameter shapes and a
fingerprint of its initial state; `python examples/own_model.py OUT --resume` continues the run
(after a kill, say), and a resume with another model (or other initial parameters) is refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn

import p2pfl
from p2pfl.config import config_from_dict


class SmallCNN(nn.Module):
    """conv 8 - GroupNorm - pool - conv 16 - GroupNorm - pool - linear; about 6,000 parameters."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(), nn.MaxPool2d(4))
        self.head = nn.Linear(16 * 3 * 3, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def model(seed: int = 0) -> SmallCNN:
    """The model every node starts from (its initial parameters are part of the experiment)."""
    torch.manual_seed(seed)
    return SmallCNN()


def config(data: str, rounds: int) -> p2pfl.Config:
    return config_from_dict({
        "seed": 0, "rounds": rounds, "device": "auto",
        "data": {"name": data, "num_nodes": 16, "partition": "dirichlet", "alpha": 0.3},
        "topology": {"name": "one_peer_exponential"},
        "algorithm": {"name": "osgp", "lr": 0.05, "local_epochs": 0, "local_steps": 20,
                      "batch_size": 32},
        "eval": {"local_samples": 500},
    })


def main(out: Path, rounds: int = 20, data: str = "fashion_mnist", resume: bool = False,
         other: bool = False) -> dict[str, float]:
    """Run (or continue) into `out`; `other` passes a model with other initial parameters."""
    history = p2pfl.run(config(data, rounds), out, resume=resume,
                        model=model(seed=1 if other else 0))
    return {"test_acc": history[-1]["test_acc"]}


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("out", nargs="?", type=Path, default=Path("runs/own_model"))
    cli.add_argument("--rounds", type=int, default=20)
    cli.add_argument("--data", default="fashion_mnist", help="'synthetic' for a quick check")
    cli.add_argument("--resume", action="store_true", help="continue the run in OUT")
    args = cli.parse_args()
    result = main(args.out, args.rounds, args.data, args.resume)
    print(f"test accuracy {result['test_acc']:.4f} after {args.rounds} rounds ({args.out})")
