"""Cost curves in the number of nodes N: `p2pfl bench --only scaling` (also `python -m
bench.scaling [--device cpu] [--linear 1000,10000] [--consensus 1000] [--rounds 3]`).

Two curves; every point runs in a fresh process (`--point KIND N`), so that its peak resident
memory is its own:

- **linear**: `logreg` (multinomial logistic regression, P = 7,850) on Fashion-MNIST (synthetic
  data of its shape when the files are not found; the work does not depend on the values). Every
  node holds PER_NODE samples (`p2pfl.data.subsample`: beyond 1,000 nodes the nodes share
  samples), Push-Sum with momentum 0.9 (`dfedsgpm`) over random_out(4), one local step of batch
  32 a round. Measured: the partition, the build (data, the topology check of 20 graphs, the
  population), per round the graph, the local phase (`trainer.train`) and the mixing products
  (`comm.mix`), the evaluation of the average model on the test set, and a checkpoint written,
  then restored into the scribbled population (checked bit for bit).
- **consensus**: Push-Sum averaging of DIM float32 values per node over random_out(4), no
  training: per round the graph, its column-stochastic matrix and the product.

Before a point, the memory check multiplies the growth per node measured at the previous point
(or a first estimate from the model's size) by N; a point that would not fit in the memory free
now, less HEADROOM, is reported as skipped with both numbers, not run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import topologies as T
from bench.capacity import available_bytes
from bench.flops import synchronize
from bench.memory import PeakMemory, release_memory
from p2pfl.config import Config, config_from_dict
from p2pfl.core.metrics import evaluate_sums
from p2pfl.core.mixing import LocalComm, diag_scale
from p2pfl.data import Dataset, DatasetNotFoundError, load_dataset, partition, subsample
from p2pfl.data.loaders import make_synthetic
from p2pfl.engine import build
from p2pfl.engine.checkpoint import load_checkpoint, restore, save_checkpoint
from p2pfl.engine.topology import CONNECTIVITY_WINDOW
from p2pfl.objects import Parts

SCALING = "scaling"
LINEAR_NODES = (1_000, 10_000, 100_000, 1_000_000)
CONSENSUS_NODES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_NODES = (200, 400)
PER_NODE = 60  # Fashion-MNIST's 60,000 training samples dealt to 1,000 nodes
OUT_DEGREE = 4
BATCH = 32
DIM = 1_000
ROUNDS = 3  # timed, after one warm-up round
GIB = 2**30
MIB = 2**20
HEADROOM = 2 * GIB  # left to the rest of the machine
FIRST_BYTES = {"linear": 3.0, "consensus": 3.0}  # the first point's bytes per value, a guess


def scaling_data(quick: bool = False) -> tuple[Dataset, str]:
    """Fashion-MNIST, or synthetic data of its shape (60,000 / 10,000) when it is not found.

    Parameters
    ----------
    quick : synthetic data of 2,000 / 500 samples (a smoke test).

    Returns
    -------
    tuple (Dataset, label).
    """
    if not quick:
        try:
            return load_dataset("fashion_mnist"), "fashion_mnist"
        except DatasetNotFoundError:
            pass
    n_train, n_test = (2_000, 500) if quick else (60_000, 10_000)
    return make_synthetic(n_train, n_test, seed=0), "synthetic 1x28x28"


def linear_config(num_nodes: int, device: str) -> Config:
    """The linear curve's run: logreg, dfedsgpm over random_out(4), one step of batch 32.

    Parameters
    ----------
    num_nodes : N.
    device : "cpu" or "cuda".

    Returns
    -------
    Config (rounds = the topology check's window, so that the union of its graphs is checked).
    """
    return config_from_dict({
        "seed": 0, "rounds": CONNECTIVITY_WINDOW, "device": device,
        "data": {"name": "fashion_mnist", "num_nodes": num_nodes, "allow_overlap": True},
        "model": {"name": "logreg"}, "topology": {"name": "random_out", "k": OUT_DEGREE},
        "algorithm": {"name": "dfedsgpm", "lr": 0.05, "local_steps": 1, "local_epochs": 0,
                      "batch_size": BATCH, "momentum": 0.9},
        "engine": {"mixing": "sparse"}})


class Timed:
    """`target` whose method `name` adds the seconds each call takes to `seconds` (the device
    synchronized around it); every other attribute is the target's."""

    def __init__(self, target: Any, name: str, device: torch.device) -> None:
        self.target, self.name, self.device, self.seconds = target, name, device, 0.0

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self.target, attr)
        if attr != self.name:
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            synchronize(self.device)
            start = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                synchronize(self.device)
                self.seconds += time.perf_counter() - start

        return timed


def _since(start: float, device: torch.device) -> float:
    synchronize(device)
    return time.perf_counter() - start


def _digest(t: torch.Tensor) -> str:
    """SHA-256 of a tensor's bytes (no copy on the CPU)."""
    array = t.detach().cpu().contiguous().view(torch.uint8).numpy()
    return hashlib.sha256(memoryview(array)).hexdigest()


def measure_linear(num_nodes: int, device: str, rounds: int = ROUNDS,
                   quick: bool = False) -> dict[str, Any]:
    """One point of the linear curve, in this process.

    Parameters
    ----------
    num_nodes : N.
    device : "cpu" or "cuda".
    rounds : rounds timed after one warm-up.
    quick : synthetic data (`scaling_data`).

    Returns
    -------
    dict: nodes, seconds of each stage (partition_s, build_s, and per round the medians graph_s,
    local_s, mix_s, round_s), us_per_node_step, mixing_share (comm.mix / round), graph_share,
    eval_s, checkpoint_s, checkpoint_mib, restore_s, restored_exactly, growth_bytes,
    mib_per_node (memory growth of the build and rounds / N), peak_rss_gib.
    """
    dev = torch.device(device)
    dataset, label = scaling_data(quick)
    cfg = linear_config(num_nodes, device)
    release_memory(dev)
    start = time.perf_counter()
    rows = partition(dataset.y_train.numpy(), num_nodes, subsample(min(PER_NODE, len(
        dataset.y_train))), seed=0, allow_overlap=True)
    partition_s = time.perf_counter() - start
    times: dict[str, list[float]] = {"graph_s": [], "local_s": [], "mix_s": [], "round_s": []}
    with PeakMemory(dev) as memory:
        start = time.perf_counter()
        ctx, algorithm = build(cfg, dataset, parts=Parts(partition=rows))
        build_s = _since(start, dev)
        ctx.trainer, ctx.comm = Timed(ctx.trainer, "train", dev), Timed(ctx.comm, "mix", dev)
        for t in range(rounds + 1):
            ctx.trainer.seconds = ctx.comm.seconds = 0.0
            synchronize(dev)
            start = time.perf_counter()
            graph = ctx.schedule.at(t)
            graph_s = time.perf_counter() - start
            algorithm.round(ctx, t, graph, ctx.faults(t, graph))
            if t:  # round 0 is the warm-up
                times["round_s"].append(_since(start, dev))
                times["graph_s"].append(graph_s)
                times["local_s"].append(ctx.trainer.seconds)
                times["mix_s"].append(ctx.comm.seconds)
    median = {k: statistics.median(v) for k, v in times.items()}
    start = time.perf_counter()
    average = algorithm.average_model(ctx)
    evaluate_sums(ctx.forward, {k: v.unsqueeze(0) for k, v in average.items()},
                  ctx.data.x_test, ctx.data.y_test, 1000, 1)
    eval_s = _since(start, dev)
    checkpoint = _checkpoint_round_trip(cfg, ctx, algorithm, dev)
    return {"kind": "linear", "nodes": num_nodes, "data": label, "device": device,
            "num_params": ctx.population.num_params, "local_steps": 1, "batch_size": BATCH,
            "out_degree": OUT_DEGREE, "samples_per_node": len(rows[0]), "rounds": rounds,
            "chunk_size": ctx.trainer.chunk_size, "partition_s": partition_s, "build_s": build_s,
            **median, "us_per_node_step": 1e6 * median["round_s"] / num_nodes,
            "mixing_share": median["mix_s"] / median["round_s"],
            "graph_share": median["graph_s"] / median["round_s"], "eval_s": eval_s,
            **checkpoint, "growth_bytes": memory.peak_bytes,
            "mib_per_node": memory.peak_bytes / MIB / num_nodes, "peak_rss_gib": _peak_rss()}


def _checkpoint_round_trip(cfg: Config, ctx: Any, algorithm: Any,
                           device: torch.device) -> dict[str, Any]:
    """Write the run's checkpoint, scribble over its population and Push-Sum weights, restore
    them from the file: the seconds of each, the file's size, and whether the restored
    population and weights are the saved ones bit for bit."""
    flat = ctx.population.flat
    before = _digest(flat), algorithm.state_dict()["weights"].clone()
    with tempfile.TemporaryDirectory(prefix="p2pfl-scaling-") as folder:
        start = time.perf_counter()
        save_checkpoint(Path(folder), cfg, {"flat": flat}, algorithm, [])
        save_s = time.perf_counter() - start
        size = (Path(folder) / "checkpoint.pt").stat().st_size
        flat.fill_(float("nan"))
        algorithm.weights.fill_(float("nan"))
        start = time.perf_counter()
        state = load_checkpoint(Path(folder), device)
        restore(state, ctx.population, algorithm, [], Path(folder))
        del state
        restore_s = _since(start, device)
    exact = _digest(flat) == before[0] and torch.equal(algorithm.weights, before[1])
    return {"checkpoint_s": save_s, "checkpoint_mib": size / MIB, "restore_s": restore_s,
            "restored_exactly": exact}


def measure_consensus(num_nodes: int, device: str, rounds: int = ROUNDS,
                      dim: int = DIM) -> dict[str, Any]:
    """One point of the consensus curve, in this process: Push-Sum averaging of `dim` float32
    values per node over random_out(4).

    Parameters
    ----------
    num_nodes : N.
    device : "cpu" or "cuda".
    rounds : rounds timed after one warm-up.
    dim : d, values per node.

    Returns
    -------
    dict: nodes, per round the medians graph_s, matrix_s, mix_s, round_s, us_per_node_round,
    mixing_share, graph_share, the error of the de-biased values against the average (first
    and last round, relative) and the drift of the network average (conservation_error),
    growth_bytes, mib_per_node, peak_rss_gib.
    """
    dev = torch.device(device)
    release_memory(dev)
    times: dict[str, list[float]] = {"graph_s": [], "matrix_s": [], "mix_s": [], "round_s": []}
    with PeakMemory(dev) as memory:
        schedule = T.random_out(num_nodes, OUT_DEGREE, seed=0)
        comm = LocalComm(dev, torch.float32, "sparse")
        x = torch.rand(num_nodes, dim, generator=torch.Generator().manual_seed(0)).to(dev)
        target = x.double().mean(dim=0)
        weights = torch.ones(num_nodes, dtype=torch.float64, device=dev)
        errors = [_spread(x, target)]
        for t in range(rounds + 1):
            synchronize(dev)
            start = time.perf_counter()
            graph = schedule.at(t)
            built = time.perf_counter()
            P = comm.matrix(T.column_stochastic(graph, sparse=True), dtype=torch.float64)
            new = P @ weights
            scaled = comm.matrix(diag_scale(P, weights, new))
            mixing = _since(start, dev)
            comm.mix(scaled, {"x": x})
            weights = new
            if t:
                times["round_s"].append(_since(start, dev))
                times["graph_s"].append(built - start)
                times["matrix_s"].append(mixing - (built - start))
                times["mix_s"].append(times["round_s"][-1] - mixing)
            errors.append(_spread(x, target))
        average = (weights.unsqueeze(1) * x.double()).sum(dim=0) / num_nodes
        drift = (average - target).abs().max().item()
    median = {k: statistics.median(v) for k, v in times.items()}
    return {"kind": "consensus", "nodes": num_nodes, "dim": dim, "device": device,
            "out_degree": OUT_DEGREE, "rounds": rounds, **median,
            "us_per_node_round": 1e6 * median["round_s"] / num_nodes,
            "mixing_share": median["mix_s"] / median["round_s"],
            "graph_share": median["graph_s"] / median["round_s"],
            "error_first": errors[1] / errors[0], "error_last": errors[-1] / errors[0],
            "conservation_error": drift, "growth_bytes": memory.peak_bytes,
            "mib_per_node": memory.peak_bytes / MIB / num_nodes, "peak_rss_gib": _peak_rss()}


def _spread(x: torch.Tensor, target: torch.Tensor) -> float:
    """max_i ||x_i - target||, in float64."""
    return max(torch.linalg.vector_norm(part.double() - target, dim=1).max().item()
               for part in x.split(1 << 16))


def _peak_rss() -> float:
    """This process's peak resident set (GiB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def measure_apart(kind: str, num_nodes: int, device: str, rounds: int,
                  quick: bool = False) -> dict[str, Any]:
    """One point in a fresh Python process (its peak memory its own).

    Parameters
    ----------
    kind : "linear" or "consensus".
    num_nodes : N.
    device : "cpu" or "cuda".
    rounds : rounds timed.
    quick : synthetic data for the linear curve.

    Returns
    -------
    dict, the point; {"nodes", "failed": its last line} when the process failed.
    """
    command = [sys.executable, "-m", "bench.scaling", "--point", kind, str(num_nodes),
               "--device", device, "--rounds", str(rounds)] + (["--quick"] if quick else [])
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        if done.returncode < 0:
            last = f"killed by signal {-done.returncode} ({last})"
        return {"kind": kind, "nodes": num_nodes, "failed": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


def first_bytes_per_node(kind: str, dim: int = DIM) -> float:
    """The memory check's guess for the first point, bytes per node: FIRST_BYTES per value held
    (the model or the vector, its mixing tile and the graph's share).

    Parameters
    ----------
    kind : "linear" or "consensus".
    dim : the consensus curve's d.

    Returns
    -------
    float.
    """
    values = 7_850 if kind == "linear" else dim
    return FIRST_BYTES[kind] * 4 * values + 4_000


def run_curve(kind: str, nodes: tuple[int, ...], device: str, rounds: int, quick: bool = False,
              apart: bool = True, echo: Any = print) -> list[dict[str, Any]]:
    """The points of one curve, smallest N first, each after the memory check.

    Parameters
    ----------
    kind : "linear" or "consensus".
    nodes : the N to measure.
    device : "cpu" or "cuda".
    rounds : rounds timed at each point.
    quick : synthetic data for the linear curve.
    apart : each point in a fresh process (False: in this one, for a smoke test).
    echo : prints each point as it comes.

    Returns
    -------
    list of dict, one per N: the point, or {"nodes", "skipped": why} / {"nodes", "failed"}.
    """
    points: list[dict[str, Any]] = []
    per_node, measured_at = first_bytes_per_node(kind), None
    for n in nodes:
        need, free = n * per_node, available_bytes(device) - HEADROOM
        if need > free:
            basis = (f"{per_node / MIB:.3f} MiB a node as measured at N = {measured_at:,}"
                     if measured_at else "the first estimate")
            point = {"kind": kind, "nodes": n, "skipped": f"needs about {need / GIB:.1f} GiB "
                     f"({basis}), {free / GIB:.1f} GiB free after {HEADROOM // GIB} GiB "
                     "headroom"}
        elif apart:
            point = measure_apart(kind, n, device, rounds, quick)
        else:
            point = (measure_linear(n, device, rounds, quick) if kind == "linear"
                     else measure_consensus(n, device, rounds, 64 if quick else DIM))
        if "growth_bytes" in point:
            per_node, measured_at = max(point["growth_bytes"] / n, 1.0), n
        points.append(point)
        echo(point_line(point))
    return points


def point_line(point: dict[str, Any]) -> str:
    """One point as a line of the table.

    Parameters
    ----------
    point : a point, skipped or failed ones included.

    Returns
    -------
    str.
    """
    head = f"{point['kind']:<9} N = {point['nodes']:>9,}"
    if "skipped" in point or "failed" in point:
        return f"{head}: {'not run' if 'skipped' in point else 'failed'}: " + (
            point.get("skipped") or point["failed"])
    per = ("us_per_node_step", "node-step") if point["kind"] == "linear" else (
        "us_per_node_round", "node-round")
    n = point["nodes"]
    line = (f"{head}: {point[per[0]]:8.2f} us/{per[1]} (graph {1e6 * point['graph_s'] / n:.2f},"
            f" mix {1e6 * point['mix_s'] / n:.2f}"
            + (f", local {1e6 * point['local_s'] / n:.2f}" if "local_s" in point else
               f", matrix {1e6 * point['matrix_s'] / n:.2f}")
            + f" us/node); mixing {100 * point['mixing_share']:.0f} % of the round; "
            f"{point['mib_per_node'] * 1024:.1f} KiB/node; peak RSS {point['peak_rss_gib']:.2f}"
            " GiB")
    if point["kind"] == "linear":
        line += (f"; partition {point['partition_s']:.2f} s, build {point['build_s']:.1f} s, "
                 f"eval {point['eval_s']:.2f} s, checkpoint {point['checkpoint_s']:.1f} s "
                 f"({point['checkpoint_mib']:.0f} MiB), restore {point['restore_s']:.1f} s"
                 f"{'' if point['restored_exactly'] else ' NOT EXACT'}")
    else:
        line += f"; error x{point['error_last']:.2g} after {point['rounds'] + 1} rounds"
    return line


def bends(points: list[dict[str, Any]]) -> str:
    """Where the curve's cost per node grew, stage by stage, from its smallest N to its largest.

    Parameters
    ----------
    points : one curve's points.

    Returns
    -------
    str.
    """
    done = [p for p in points if "round_s" in p]
    if len(done) < 2:
        return "fewer than two points measured"
    low, high = done[0], done[-1]
    stages = [k for k in ("round_s", "graph_s", "matrix_s", "local_s", "mix_s") if k in low]
    ratio = {k: (high[k] / high["nodes"]) / (low[k] / low["nodes"]) for k in stages
             if low[k] > 0}
    grown = ", ".join(f"{k[:-2]} x{r:.2f}" for k, r in ratio.items())
    return (f"{low['kind']}: per node from N = {low['nodes']:,} to {high['nodes']:,}: {grown}; "
            f"memory {high['mib_per_node'] / low['mib_per_node']:.2f}x per node")


def run_scaling(device: str, linear: tuple[int, ...] = LINEAR_NODES,
                consensus: tuple[int, ...] = CONSENSUS_NODES, rounds: int = ROUNDS,
                quick: bool = False, apart: bool = True, echo: Any = print) -> dict[str, Any]:
    """Both curves.

    Parameters
    ----------
    device : "cpu" or "cuda".
    linear, consensus : the N of each curve.
    rounds : rounds timed at each point.
    quick : synthetic data.
    apart : each point in a fresh process.
    echo : prints lines as they come.

    Returns
    -------
    dict {"workload": "scaling", "linear": points, "consensus": points, "bends": [str, str],
    "load_average": the machine's 1-minute load when it started}.
    """
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    echo(f"scaling on {device}: logreg (P = 7,850) with {PER_NODE} samples a node, dfedsgpm over "
         f"random_out({OUT_DEGREE}), 1 step of batch {BATCH}; consensus: Push-Sum of d = "
         f"{64 if quick else DIM}; median of {rounds} rounds after 1 warm-up; load average "
         f"{load}")
    result = {"workload": SCALING, "load_average": load,
              "linear": run_curve("linear", linear, device, rounds, quick, apart, echo),
              "consensus": run_curve("consensus", consensus, device, rounds, quick, apart, echo)}
    result["bends"] = [bends(result["linear"]), bends(result["consensus"])]
    for line in result["bends"]:
        echo(line)
    return result


def _counts(text: str) -> tuple[int, ...]:
    return tuple(int(n.replace("_", "")) for n in text.split(",") if n.strip())


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.scaling`: both curves (or one point, `--point KIND N`), as JSON.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--linear", default=",".join(map(str, LINEAR_NODES)))
    parser.add_argument("--consensus", default=",".join(map(str, CONSENSUS_NODES)))
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--quick", action="store_true", help="synthetic data, d = 64")
    parser.add_argument("--json-out", metavar="FILE")
    parser.add_argument("--point", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        kind, n = args.point[0], int(args.point[1])
        point = (measure_linear(n, args.device, args.rounds, args.quick) if kind == "linear"
                 else measure_consensus(n, args.device, args.rounds,
                                        64 if args.quick else DIM))
        print(json.dumps(point))
        return 0
    result = run_scaling(args.device, _counts(args.linear), _counts(args.consensus),
                         args.rounds, args.quick)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
