"""Stacked experiments against the same runs one after another (`p2pfl bench --only
stacked-seeds`).

The study cell of configs/study_grid.toml: real Fashion-MNIST over 16 nodes (label-Dirichlet
alpha 0.3, unequal sizes), the mlp, SGP on a ring, 10 local steps of batch 32, evaluation every
round, for 8 seeds. Each side runs the 8 whole runs (build, rounds, evaluation, checkpoints,
figures) into fresh directories, after one warm-up run; `speedup` = one-after-another seconds /
stacked seconds. `max_diff` is the largest difference of any run's final test accuracy between
the two sides (float32: rounding may differ where the trainer's batches do).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from p2pfl.config import Config, config_from_dict
from p2pfl.engine import run, run_stacked

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


def run_stacked_bench(device: str, quick: bool = False) -> dict[str, Any]:
    """Time SEEDS whole runs one after another against the same runs stacked.

    Parameters
    ----------
    device : "cpu" or "cuda".
    quick : fewer rounds.

    Returns
    -------
    dict {"workload": "stacked-seeds", ..., "rows": [one row], "speedup"}.
    """
    rounds = QUICK_ROUNDS if quick else ROUNDS
    cfgs = [_config(seed, rounds, device) for seed in range(SEEDS)]
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
    row = {"experiments": SEEDS, "nodes": NODES, "rounds": rounds,
           "sequential_s": sequential, "stacked_s": stacked, "speedup": sequential / stacked,
           "rounds_per_s_sequential": SEEDS * rounds / sequential,
           "rounds_per_s_stacked": SEEDS * rounds / stacked, "max_diff": diff}
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
