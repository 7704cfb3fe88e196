"""Run DFedAvg on data and a partition of one's own: Fashion-MNIST with feature skew, each node's
images rotated by its group's angle (0, 90, 180 or 270 degrees), given as tensors with one index
list per node.

    python examples/own_data.py [OUT] [--rounds R]        # about 10 seconds on 2 CPU cores

The tensors are (x_train, y_train, x_test, y_test); the partition gives node i the images of
rotation group i mod 4 only. data.json records their shapes and a fingerprint, so
`python examples/own_data.py OUT --resume` continues the run and a resume with other data or
another partition is refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import p2pfl
from p2pfl.config import config_from_dict
from p2pfl.data import load_dataset

NODES, GROUPS = 16, 4
PER_GROUP_TRAIN, PER_GROUP_TEST = 3000, 500  # images of each rotation group


def rotated(data: str) -> tuple[torch.Tensor, ...]:
    """Four rotated copies of a slice of `data` (group g: rotated by g * 90 degrees); the
    training set is group-major: group g holds rows g * PER_GROUP_TRAIN onwards."""
    base = load_dataset(data, synthetic_train=PER_GROUP_TRAIN, synthetic_test=PER_GROUP_TEST)
    xs, xt = base.x_train[:PER_GROUP_TRAIN], base.x_test[:PER_GROUP_TEST]
    ys, yt = base.y_train[:PER_GROUP_TRAIN], base.y_test[:PER_GROUP_TEST]
    x_train = torch.cat([torch.rot90(xs, g, dims=(2, 3)) for g in range(GROUPS)])
    x_test = torch.cat([torch.rot90(xt, g, dims=(2, 3)) for g in range(GROUPS)])
    return x_train, ys.repeat(GROUPS), x_test, yt.repeat(GROUPS)


def by_rotation(swap: bool = False) -> list[list[int]]:
    """Node i gets an equal share of the rotation group i mod 4 (i div 4 with `swap`)."""
    per_node = PER_GROUP_TRAIN * GROUPS // NODES
    shares = []
    for i in range(NODES):
        group, k = (i // GROUPS, i % GROUPS) if swap else (i % GROUPS, i // GROUPS)
        start = group * PER_GROUP_TRAIN + k * per_node
        shares.append(list(range(start, start + per_node)))
    return shares


def config(rounds: int) -> p2pfl.Config:
    return config_from_dict({
        "seed": 0, "rounds": rounds, "device": "auto",
        "data": {"num_nodes": NODES},
        "topology": {"name": "exponential", "directed": False},
        "algorithm": {"name": "dfedavg", "lr": 0.05, "local_epochs": 0, "local_steps": 20,
                      "batch_size": 32},
        "eval": {"local_samples": 500},
    })


def main(out: Path, rounds: int = 20, data: str = "fashion_mnist", resume: bool = False,
         other: bool = False) -> dict[str, float]:
    """Run (or continue) into `out`; `other` passes another partition of the same tensors."""
    history = p2pfl.run(config(rounds), out, resume=resume, data=rotated(data),
                        partition=by_rotation(swap=other))
    return {"test_acc": history[-1]["test_acc"]}


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("out", nargs="?", type=Path, default=Path("runs/own_data"))
    cli.add_argument("--rounds", type=int, default=20)
    cli.add_argument("--data", default="fashion_mnist", help="'synthetic' for a quick check")
    cli.add_argument("--resume", action="store_true", help="continue the run in OUT")
    args = cli.parse_args()
    result = main(args.out, args.rounds, args.data, args.resume)
    print(f"test accuracy {result['test_acc']:.4f} after {args.rounds} rounds ({args.out})")
