"""Stacked experiments against the same runs one after another (`p2pfl bench --only
stacked-seeds`; also `python -m bench.stacked [--device cpu|cuda] [--quick] [--seeds S]
[--rounds R] [--json-out FILE]`).

The study cell of configs/study_grid.toml: real Fashion-MNIST over 16 nodes (label-Dirichlet
alpha 0.3, unequal sizes), the mlp, SGP on a ring, 10 local steps of batch 32, evaluation every
round, for 8 seeds. Each side runs the 8 whole runs (build, rounds, evaluation, checkpoints,
figures) into fresh directories, after one warm-up run; `speedup` = one-after-another seconds /
stacked seconds. `max_diff` is the largest difference of any run's final test accuracy between
the two sides (float32: rounding may differ where the trainer's batches do).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from p2pfl.config import Config, config_from_dict
from p2pfl.engine import run, run_stacked
from p2pfl.report.results import write_json_atomic

STACKED = "stacked-seeds"  # the workload's name for --only
SEEDS = 8
NODES = 16
ROUNDS, QUICK_ROUNDS = 10, 3


def _config(seed: int, rounds: int, device: str) -> Config:
    return config_from_dict({
        "seed": seed, "rounds": rounds, "device": device,
        "data": {"name": "fashion_mnist", "num_nodes": NODES, "partition": "label_dirichlet",
                 "alpha": 0.3},
        "model": {"name": "mlp"}, "topology": {"name": "ring"},
        "algorithm": {"name": "osgp", "lr": 0.05, "local_epochs": 0, "local_steps": 10,
                      "batch_size": 32},
        "eval": {"local_samples": 1000}})


def run_stacked_bench(device: str, quick: bool = False, seeds: int = SEEDS,
                      rounds: int | None = None) -> dict[str, Any]:
    """Time `seeds` whole runs one after another against the same runs stacked.

    Parameters
    ----------
    device : "cpu" or "cuda".
    quick : fewer rounds (QUICK_ROUNDS instead of ROUNDS).
    seeds : the runs on each side (seeds 0 .. seeds - 1).
    rounds : rounds of each run; None: as `quick` says.

    Returns
    -------
    dict {"workload": "stacked-seeds", ..., "rows": [one row], "speedup"}.
    """
    rounds = rounds if rounds is not None else QUICK_ROUNDS if quick else ROUNDS
    cfgs = [_config(seed, rounds, device) for seed in range(seeds)]
    with tempfile.TemporaryDirectory(prefix="p2pfl-bench-") as tmp:
        root = Path(tmp)
        run(cfgs[0], root / "warm-up")
        start = time.perf_counter()
        alone = [run(cfg, root / f"alone{i}") for i, cfg in enumerate(cfgs)]
        sequential = time.perf_counter() - start
        start = time.perf_counter()
        together = run_stacked([{"cfg": cfg, "out_dir": root / f"stacked{i}"}
                                for i, cfg in enumerate(cfgs)])
        stacked = time.perf_counter() - start
    failed = [r for r in together if isinstance(r, BaseException)]
    if failed:
        raise failed[0]
    diff = max(abs(a[-1]["test_acc"] - b[-1]["test_acc"]) for a, b in zip(alone, together))
    row = {"experiments": seeds, "nodes": NODES, "rounds": rounds,
           "sequential_s": sequential, "stacked_s": stacked, "speedup": sequential / stacked,
           "rounds_per_s_sequential": seeds * rounds / sequential,
           "rounds_per_s_stacked": seeds * rounds / stacked, "max_diff": diff}
    return {"workload": STACKED, "rows": [row], "speedup": row["speedup"]}


def stacked_lines(result: dict[str, Any]) -> list[str]:
    """The table of `run_stacked_bench`'s result.

    Parameters
    ----------
    result : `run_stacked_bench`'s dict.

    Returns
    -------
    list of str.
    """
    row = result["rows"][0]
    return ["", f"stacked experiments: {row['experiments']} seeds of a {row['nodes']}-node mlp "
            f"study cell (SGP, ring, {row['rounds']} rounds, whole runs)",
            f"  one after another {row['sequential_s']:8.2f} s   "
            f"({row['rounds_per_s_sequential']:.1f} rounds/s)",
            f"  stacked           {row['stacked_s']:8.2f} s   "
            f"({row['rounds_per_s_stacked']:.1f} rounds/s)",
            f"  speedup {row['speedup']:.2f}x; largest final-accuracy difference "
            f"{row['max_diff']:.2g}"]


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.stacked`: the stacked-seeds measurement alone, its table and JSON.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status: 0, or 2 for a count below 1 (one line).
    """
    parser = argparse.ArgumentParser(prog="python -m bench.stacked", description=__doc__)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds a run")
    parser.add_argument("--seeds", type=int, default=SEEDS, help=f"runs a side (default {SEEDS})")
    parser.add_argument("--rounds", type=int, help=f"rounds a run (default {ROUNDS})")
    parser.add_argument("--json-out", metavar="FILE")
    args = parser.parse_args(argv)
    for name, value in (("--seeds", args.seeds), ("--rounds", args.rounds)):
        if value is not None and value < 1:
            parser.exit(2, f"python -m bench.stacked: error: {name} must be at least 1, "
                        f"got {value}\n")
    result = run_stacked_bench(args.device, args.quick, args.seeds, args.rounds)
    print("\n".join(stacked_lines(result)))
    if args.json_out:
        write_json_atomic(Path(args.json_out), result)
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
