"""The cost of unequal local datasets: a ragged population against a balanced one of the same
total node-steps (`p2pfl bench --only ragged`).

Ragged: real Fashion-MNIST over 100 nodes by the label-Dirichlet partition (alpha 0.3, every
sample dealt, sizes from about 90 to 1,600), one local epoch of batch 32, so node i takes
K_i = ceil(n_i / 32) steps and the last batch of each node is partial. Balanced: the IID split
(600 samples a node) with the same total node-steps, sum K_i / N steps each. Both run the mlp
with SGD and heavy-ball momentum, then Push-Sum over random_out(10); the timed rounds alternate.
A row's `s_per_node_step` is s/round / total node-steps; `ratio` = ragged / balanced per
node-step (the goal: at most 1.3).
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from bench.runner import timed_round
from bench.workloads import BATCH_SIZE, MOMENTUM, OUT_DEGREE
from p2pfl.config import config_from_dict
from p2pfl.core.federated import steps_per_node
from p2pfl.data import Dataset
from p2pfl.engine import build

RAGGED = "ragged"  # the workload's name for --only
NODES = 100
ALPHA = 0.3


def _config(partition: dict[str, Any], algorithm: dict[str, Any], device: str):
    return config_from_dict({
        "seed": 0, "rounds": 1, "device": device,
        "data": {"name": "fashion_mnist", "num_nodes": NODES, **partition},
        "model": {"name": "mlp"},
        "topology": {"name": "random_out", "k": OUT_DEGREE},
        "algorithm": {"name": "dfedsgpm", "lr": 0.05, "momentum": MOMENTUM,
                      "batch_size": BATCH_SIZE, **algorithm}})


def run_ragged(dataset: Dataset, device: str, rounds: int) -> dict[str, Any]:
    """Time a ragged population (unequal local datasets) against a balanced one of equal
    node-steps.

    Parameters
    ----------
    dataset : the data.
    device : "cpu" or "cuda".
    rounds : rounds timed.

    Returns
    -------
    dict {"workload": "ragged", ..., "rows": [ragged, balanced], "ratio"}.
    """
    ragged_cfg = _config({"partition": "label_dirichlet", "alpha": ALPHA},
                         {"local_epochs": 1, "local_steps": 0}, device)
    ragged_ctx, ragged_alg = build(ragged_cfg, dataset)
    steps = steps_per_node(ragged_ctx.data.sizes, BATCH_SIZE, 1, 0)
    total = int(steps.sum())
    balanced_cfg = _config({"partition": "iid"},
                           {"local_epochs": 0, "local_steps": round(total / NODES)}, device)
    balanced_ctx, balanced_alg = build(balanced_cfg, dataset)
    populations = {"ragged": (ragged_ctx, ragged_alg, total),
                   "balanced": (balanced_ctx, balanced_alg, NODES * round(total / NODES))}
    times: dict[str, list[float]] = {name: [] for name in populations}
    for t in range(rounds + 1):  # round 0 warms up
        for name, (ctx, algorithm, _) in populations.items():
            seconds = timed_round(ctx, algorithm, t)
            if t:
                times[name].append(seconds)
    rows = []
    for name, (ctx, _, node_steps) in populations.items():
        seconds = statistics.median(times[name])
        sizes = ctx.data.sizes
        rows.append({"population": name, "s_per_round": seconds, "node_steps": node_steps,
                     "s_per_node_step": seconds / node_steps,
                     "s_range": [min(times[name]), max(times[name])],
                     "size_min": int(sizes.min()), "size_max": int(sizes.max()),
                     "steps_min": int(np.min(steps if name == "ragged" else node_steps // NODES)),
                     "steps_max": int(np.max(steps if name == "ragged" else node_steps // NODES)),
                     "chunk_size": ctx.trainer.chunk_size})
    ratio = rows[0]["s_per_node_step"] / rows[1]["s_per_node_step"]
    return {"workload": "ragged", "model": "mlp", "data": "fashion_mnist", "num_nodes": NODES,
            "partition": f"label_dirichlet({ALPHA})", "batch_size": BATCH_SIZE,
            "rounds": rounds, "rows": rows, "ratio": ratio}


def ragged_lines(result: dict[str, Any]) -> list[str]:
    """The table lines of `run_ragged`'s result.

    Parameters
    ----------
    result : `run_ragged`'s dict.

    Returns
    -------
    list of str.
    """
    lines = [f"ragged population ({result['num_nodes']} nodes, mlp, {result['partition']}, "
             f"1 epoch of batch {result['batch_size']}) against a balanced one of equal "
             "node-steps:"]
    for row in result["rows"]:
        lines.append(f"  {row['population']:<9} {row['size_min']:>5}-{row['size_max']:<5} "
                     f"samples  {row['steps_min']:>3}-{row['steps_max']:<3} steps  "
                     f"{row['node_steps']:>5} node-steps  {row['s_per_round']:.3f} s/round  "
                     f"{1e6 * row['s_per_node_step']:.0f} us/node-step")
    lines.append(f"  ratio (ragged / balanced per node-step): {result['ratio']:.2f} "
                 "(goal <= 1.3)")
    return lines
