"""The personalised accuracy of finished server runs under other evaluation protocols.

A run with `algorithm.personal_fraction > 0` logs `test_acc_personal`: each client fine-tunes
the head (last layer) of the server model for the round's local epochs and is tested on its own
split (algorithms/personal.py). This reloads each run's last checkpoint and evaluates its final
models in the other ways one could read a personalised-FL paper's protocol, on the same splits:

    python -m bench.personal_protocols RUN_DIR [RUN_DIR ...] [--epochs 10]

prints one row per run: the server model without fine-tuning, the head fine-tuned as logged
(the same number as the last `test_acc_personal`), the head fine-tuned `--epochs` epochs, the
whole model fine-tuned for the logged epochs, and each client's own last local model (the
model a client holds after its last participation), in %.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from algorithms import Server
from algorithms.client_state import expand
from p2pfl.config import ConfigError
from p2pfl.context import RunContext
from p2pfl.engine import build
from p2pfl.engine.builder import resolve_device
from p2pfl.engine.checkpoint import load_checkpoint, load_population, read_run_config

COLUMNS = ("server model", "head, as logged", "head, {epochs} epochs", "whole model",
           "own local model")


def load_run(run_dir: str | Path) -> tuple[RunContext, Server, int]:
    """The run of `run_dir` rebuilt at its last checkpoint.

    Parameters
    ----------
    run_dir : a run directory with a checkpoint.

    Returns
    -------
    tuple (context, algorithm, rounds done).

    Raises
    ------
    ConfigError
        naming resume without a checkpoint, algorithm.personal_fraction for a run that is not a
        server algorithm with a personal split.
    """
    cfg = read_run_config(run_dir)
    state = load_checkpoint(Path(run_dir), resolve_device(cfg.device))
    if state is None:
        raise ConfigError("resume", f"{run_dir} holds no checkpoint")
    ctx, algorithm = build(cfg, chunks=state.get("chunks"))
    if not isinstance(algorithm, Server) or algorithm.personal is None:
        raise ConfigError("algorithm.personal_fraction", f"{run_dir} is not a server run with "
                          "a personal split (personal_fraction > 0)")
    load_population(Path(run_dir), state["population"], ctx.population)
    algorithm.load_state_dict(state["algorithm"])
    return ctx, algorithm, state["round"]


def protocols(ctx: RunContext, server: Server, rounds: int, epochs: int) -> dict[str, float]:
    """Mean over clients of the accuracy on their own splits (%) of the run's final models under
    each protocol of COLUMNS.

    The fine-tuning minibatches and lr are those of the last round's evaluation.

    Parameters
    ----------
    ctx : the rebuilt run.
    server : its server algorithm.
    rounds : rounds done.
    epochs : epochs of the longer head fine-tuning.

    Returns
    -------
    dict {protocol: accuracy (%)}.
    """
    p, t = server.personal, rounds - 1

    def mean(models: dict[str, torch.Tensor]) -> float:
        return 100 * p.own_accuracy(ctx, models).mean().item()

    return dict(zip([c.format(epochs=epochs) for c in COLUMNS], [
        mean(expand(server.server, ctx.num_nodes)),
        mean(p.tune(server, ctx, t)),
        mean(p.tune(server, ctx, t, epochs)),
        mean(p.tune(server, ctx, t, whole=True)),
        mean(ctx.population.params),
    ]))


def main(argv: list[str] | None = None) -> int:
    """Print the personalised accuracy of each run under every protocol, one table row per run.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status: 0, or 2 after a one-line error.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories (each with a checkpoint)")
    parser.add_argument("--epochs", type=int, default=10,
                        help="epochs of the longer head fine-tuning (default 10)")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error("--epochs must be at least 1")
    header = None
    for run_dir in args.runs:
        try:
            ctx, server, rounds = load_run(run_dir)
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        row = protocols(ctx, server, rounds, args.epochs)
        if header is None:
            header = ["run", "round", *row]
            print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
        print(f"| {run_dir} | {rounds} | " + " | ".join(f"{v:.2f}" for v in row.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
