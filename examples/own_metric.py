"""Round callbacks of one's own on real Fashion-MNIST: a metric (the spread of the nodes' model
norms) and a stop (end the run once the average model reaches a target accuracy).

    python examples/own_metric.py [OUT] [--rounds R] [--target A]   # 15 seconds, 2 CPU cores

A callback's `after_round` returns metrics for the round's record (metrics.jsonl) or raises
`p2pfl.StopRun`; state it keeps across rounds goes into the checkpoint (`state_dict`).
callbacks.json records the callbacks, so `python examples/own_metric.py OUT --resume` continues
the run and a resume with other callbacks (or another target) is refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import p2pfl
from p2pfl.config import config_from_dict


class NormSpread(p2pfl.Callback):
    """max / min over nodes of the L2 norm of each node's own model, on evaluation rounds."""

    def after_round(self, end: p2pfl.RoundEnd) -> dict[str, float] | None:
        if not end.evaluating:
            return None
        local = end.local_models()
        norms = sum(v.flatten(1).square().sum(dim=1) for v in local.values()).sqrt()
        return {"norm_spread": (norms.max() / norms.min()).item()}


class StopAtTarget(p2pfl.Callback):
    """Ends the run after the first evaluation at or above `target` test accuracy; records
    the round it was reached (`target_round`, kept across a resume)."""

    def __init__(self, target: float) -> None:
        self.target = target
        self.reached: int | None = None

    def after_round(self, end: p2pfl.RoundEnd) -> dict[str, float] | None:
        if self.reached is None and end.record.get("test_acc", 0.0) >= self.target:
            self.reached = end.t + 1
            raise p2pfl.StopRun(f"test accuracy {end.record['test_acc']:.4f} >= {self.target}")
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"reached": self.reached}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reached = state["reached"]


def config(data: str, rounds: int) -> p2pfl.Config:
    return config_from_dict({
        "seed": 0, "rounds": rounds, "device": "auto",
        "data": {"name": data, "num_nodes": 16, "partition": "dirichlet", "alpha": 0.3},
        "topology": {"name": "exponential"},
        "algorithm": {"name": "osgp", "lr": 0.05, "local_epochs": 0, "local_steps": 20,
                      "batch_size": 32},
        "eval": {"local_samples": 500},
    })


def main(out: Path, rounds: int = 40, data: str = "fashion_mnist", resume: bool = False,
         other: bool = False, target: float = 0.8) -> dict[str, float]:
    """Run (or continue) into `out`; `other` resumes with another target."""
    stop = StopAtTarget(target + 0.01 if other else target)
    history = p2pfl.run(config(data, rounds), out, resume=resume,
                        callbacks=[NormSpread(), stop])
    return {"test_acc": history[-1]["test_acc"], "rounds": len(history),
            "norm_spread": history[-1]["norm_spread"], "reached": stop.reached or 0}


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("out", nargs="?", type=Path, default=Path("runs/own_metric"))
    cli.add_argument("--rounds", type=int, default=40)
    cli.add_argument("--target", type=float, default=0.8)
    cli.add_argument("--data", default="fashion_mnist", help="'synthetic' for a quick check")
    cli.add_argument("--resume", action="store_true", help="continue the run in OUT")
    args = cli.parse_args()
    result = main(args.out, args.rounds, args.data, args.resume, target=args.target)
    how = f"reached {args.target} in round {result['reached']}" if result["reached"] else \
        f"did not reach {args.target}"
    print(f"{how}: test accuracy {result['test_acc']:.4f} after {result['rounds']} rounds; "
          f"node norms spread {result['norm_spread']:.3f} ({args.out})")
