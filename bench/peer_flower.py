"""Benchmark: the same FedAvg run in p2pfl and in Flower's simulation engine, side by side.

Workload (defaults): real Fashion-MNIST, Dirichlet(0.3) over 100 clients (p2pfl's partition,
seed 0), mnist_2NN (`mlp`), 10% of the clients per round, 5 local steps of plain SGD (lr 0.05,
batch 32), FedAvg weighted by sample count (every client holds the same number, so this is
p2pfl's plain mean), 20 rounds, the global model evaluated on the whole test set after the last
round. Both engines start from the same model and train the same clients on the same minibatches
in every round (`bench.peer_match`), so they should end at the same model up to float rounding:
the script reports the largest parameter difference as a check that the work was the same.

Threads: p2pfl uses `--cpus` torch threads in one process; Flower gets `--cpus` Ray CPUs and
`--client-cpus` per virtual client (cpus // client_cpus clients train at once, each with
client_cpus torch threads), plus its server in the driver process. Both default to all cores and
one CPU per client.

Prints a table and ends with one JSON line. Needs `flwr[simulation]` (kept out of the main venv):
`make bench-flower`, or `.venv-flower/bin/python -m bench.peer_flower [--rounds R] [--clients N]
[--participation r]`. Without flwr it prints why it skipped and exits 0. Run on an idle machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import torch

from bench import peer_match as M
from p2pfl.config import Config, ConfigError
from p2pfl.engine import Runner, build

SKIP = "skipped: flwr is not installed (make bench-flower)"
BARE_ROUNDS = 10


def run_p2pfl(cfg: Config, threads: int) -> dict[str, Any]:
    """`cfg` through p2pfl's engine (build, then the Runner's rounds) with `threads` torch threads.

    Then, outside those numbers, up to BARE_ROUNDS more rounds of `algorithm.round` alone (no
    divergence guard, no record), to show what the Runner adds.

    Parameters
    ----------
    cfg : the FedAvg config.
    threads : torch threads.

    Returns
    -------
    dict: setup_s (build: data, partition, model), per-round seconds (the Runner's wall_s,
    evaluation excluded), eval_s, total_s, final_test_acc, the final server model, and
    bare_rounds_s.
    """
    torch.set_num_threads(threads)
    start = time.perf_counter()
    ctx, algorithm = build(cfg)
    setup = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as out:  # the Runner's rounds write nothing there
        runner = Runner(cfg, Path(out), ctx, algorithm)
        rounds = [runner.round(t)["wall_s"] for t in range(cfg.rounds)]
    eval_start = time.perf_counter()
    model = M.initial_model(cfg, ctx.data)
    model.load_state_dict(algorithm.average_model(ctx))
    acc = M.accuracy(model, ctx.data)
    end = time.perf_counter()
    bare = []  # after the measured run: a few more rounds of the algorithm alone, no Runner
    for t in range(cfg.rounds, cfg.rounds + min(BARE_ROUNDS, cfg.rounds)):
        bare_start = time.perf_counter()
        graph = ctx.schedule.at(t)
        algorithm.round(ctx, t, graph, ctx.faults(t, graph))
        bare.append(time.perf_counter() - bare_start)
    return {"setup_s": setup, "rounds_s": rounds, "eval_s": end - eval_start,
            "total_s": end - start, "final_test_acc": acc, "bare_rounds_s": bare,
            "model": {k: v.clone() for k, v in model.state_dict().items()}}


def summary(result: dict[str, Any]) -> dict[str, float]:
    """The headline numbers of one engine's result, rounded.

    Parameters
    ----------
    result : `run_p2pfl`'s or `flower_app.run`'s dict.

    Returns
    -------
    dict: setup_s, median_s_per_round, first_round_s, total_s, final_test_acc.
    """
    return {"setup_s": round(result["setup_s"], 3),
            "median_s_per_round": round(statistics.median(result["rounds_s"]), 4),
            "first_round_s": round(result["rounds_s"][0], 4),
            "total_s": round(result["total_s"], 2),
            "final_test_acc": round(result["final_test_acc"], 4)}


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Largest absolute difference between two models' parameters.

    Parameters
    ----------
    a, b : name -> tensor, the same names and shapes.

    Returns
    -------
    float.
    """
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


def main(argv: list[str] | None = None) -> int:
    """The same FedAvg run in p2pfl and in Flower's simulation, side by side (skipped without
    Flower).

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status (0).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--participation", type=float, default=0.1)
    parser.add_argument("--local-steps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1,
                        help="cores for each engine: p2pfl torch threads, Flower's Ray CPUs")
    parser.add_argument("--client-cpus", type=int, default=1,
                        help="Ray CPUs (= torch threads) per Flower virtual client")
    parser.add_argument("--verbose", action="store_true", help="show Flower's and Ray's logs")
    args = parser.parse_args(argv)
    if args.cpus < 1:
        parser.error(f"--cpus must be >= 1, got {args.cpus}")
    if not 1 <= args.client_cpus <= args.cpus:
        parser.error(f"--client-cpus must be in [1, --cpus = {args.cpus}], "
                     f"got {args.client_cpus}")
    try:
        cfg = M.fedavg_config(args.rounds, args.clients, args.participation, args.local_steps,
                              args.batch_size, args.lr, args.seed)
    except ConfigError as err:
        parser.error(str(err))
    if importlib.util.find_spec("flwr") is None or importlib.util.find_spec("ray") is None:
        print(SKIP)
        return 0
    ours = run_p2pfl(cfg, args.cpus)

    from bench import flower_app  # imports flwr

    theirs = flower_app.run(cfg, args.cpus, args.client_cpus, args.verbose)
    parallel = args.cpus // args.client_cpus
    sides = {
        "p2pfl": (f"p2pfl {version('p2pfl')}", f"1 process, {args.cpus} torch threads",
                  summary(ours)),
        "flower": (f"flwr {flower_app.VERSION}",
                   f"{parallel} Ray actors x {args.client_cpus} torch thread(s)",
                   summary(theirs)),
    }
    a, d = cfg.algorithm, cfg.data
    m = len(M.sampled_clients(cfg, 0))
    print(f"FedAvg, {d.name} Dirichlet({d.alpha}) over {d.num_nodes}"
          f" clients, {m} per round, {cfg.model.name}, {a.local_steps} local SGD steps of "
          f"batch {a.batch_size}, lr {a.lr}, {cfg.rounds} rounds, CPU, {args.cpus} cores")
    header = (f"{'engine':<13} {'parallelism':<32} {'setup s':>8} {'s/round':>9} "
              f"{'round 1 s':>9} {'total s':>8} {'final acc':>9}")
    print(header)
    print("-" * len(header))
    for name, parallelism, s in sides.values():
        print(f"{name:<13} {parallelism:<32} {s['setup_s']:>8.2f} "
              f"{s['median_s_per_round']:>9.4f} {s['first_round_s']:>9.3f} "
              f"{s['total_s']:>8.1f} {s['final_test_acc']:>9.4f}")
    ratio = sides["flower"][2]["median_s_per_round"] / sides["p2pfl"][2]["median_s_per_round"]
    diff = max_difference(ours["model"], theirs["model"])
    bare = statistics.median(ours["bare_rounds_s"])
    print(f"p2pfl's algorithm round alone (no Runner: no divergence guard, no record): median "
          f"{bare:.4f} s over {len(ours['bare_rounds_s'])} more rounds")
    print(f"Flower / p2pfl median time per round: {ratio:.1f}x; total: "
          f"{theirs['total_s'] / ours['total_s']:.1f}x; largest difference between the final "
          f"global models: {diff:.2e} (same clients and minibatches every round)")
    result = {"workload": {"dataset": d.name, "partition": f"dirichlet({d.alpha})",
                           "clients": d.num_nodes, "per_round": m, "model": cfg.model.name,
                           "local_steps": a.local_steps, "batch_size": a.batch_size,
                           "lr": a.lr, "rounds": cfg.rounds, "seed": cfg.seed},
              "cpus": args.cpus, "client_cpus": args.client_cpus,
              "flwr": flower_app.VERSION, "torch": torch.__version__,
              "p2pfl": {**sides["p2pfl"][2], "threads": args.cpus,
                        "algorithm_round_median_s": round(bare, 4)},
              "flower": {**sides["flower"][2], "partition_query_s": round(theirs["query_s"], 3),
                         "parallel_clients": parallel,
                         "threads_per_client": args.client_cpus},
              "ratio_s_per_round": round(ratio, 2),
              "max_param_difference": float(f"{diff:.3e}")}
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
