"""The largest population that fits a memory budget, measured: `python -m bench.capacity
[--only mlp-100,cnn] [--budget-gb 16] [--device cpu]`.

For a workload's model and round (bench.workloads: SGD with momentum, batch 32, Push-Sum; over
the exponential graph, log2 N out-neighbours, since a random 10-out graph of many thousand nodes
is seldom strongly connected), each measurement builds N nodes and runs one round in a fresh process
and reports how far memory rose (bench.memory.PeakMemory: resident set on CPU, the allocator's
peak on CUDA): parameters, Push-Sum weights, momentum and mixing buffers, one chunk's
activations. The data (synthetic, of the workload's input shape, one batch a node) is made
before and not counted. One local step a round: a round's peak is reached in its first chunk,
whatever the number of steps. The search measures N and 2N, aims just under the budget along the
line through them, re-aims along the line through the largest N measured (at most 4 aims, until
a peak lands within 3 % under the budget), then measures 2 % more nodes than the largest that fit
when this machine has the memory for that; every N it reports was measured, none extrapolated.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace

import torch

from bench.workloads import CIFAR_SHAPE, WORKLOADS, select

GIB = 2**30
MIB = 2**20
SHAPES = {"fashion_mnist": (1, 28, 28), "cifar": CIFAR_SHAPE, "synthetic": (1, 28, 28)}
HEADROOM = 2 * GIB  # left to the rest of the machine when probing above the budget
AIMS = 4  # probes aimed at the budget


def measure(name: str, num_nodes: int, device: str) -> int:
    """Bytes the build and one round of `num_nodes` nodes of workload `name` raised memory by.

    Run in this process.

    Parameters
    ----------
    name : a workload's name.
    num_nodes : N.
    device : "cpu" or "cuda".

    Returns
    -------
    int, bytes.
    """
    from bench.memory import PeakMemory, release_memory
    from bench.runner import timed_round
    from bench.workloads import workload_config
    from p2pfl.config import with_overrides
    from p2pfl.data.loaders import make_synthetic
    from p2pfl.engine import build

    workload = replace(next(w for w in WORKLOADS if w.name == name), local_steps=1)
    dataset = make_synthetic(num_nodes * workload.batch_size, 10, seed=0,
                             shape=SHAPES[workload.data])
    cfg = workload_config(workload, "sgd", "vectorized", num_nodes, device, dataset.name)
    cfg = with_overrides(cfg, {"topology.name": "exponential"})
    release_memory(torch.device(device))
    with PeakMemory(torch.device(device)) as memory:
        ctx, algorithm = build(cfg, dataset)
        timed_round(ctx, algorithm, 0)
    return memory.peak_bytes


def measure_apart(name: str, num_nodes: int, device: str) -> int | None:
    """`measure` in a fresh Python process (so that no earlier allocation is reused).

    Parameters
    ----------
    name : a workload's name.
    num_nodes : N.
    device : "cpu" or "cuda".

    Returns
    -------
    int, bytes; None when it ran out of memory (killed by the kernel, or a MemoryError /
    out-of-memory error).

    Raises
    ------
    RuntimeError
        for any other failure (a crash included), with its last line.
    """
    done = subprocess.run([sys.executable, "-m", "bench.capacity", "--measure", name,
                           str(num_nodes), "--device", device], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        if done.returncode == -9 or "MemoryError" in last or "out of memory" in last.lower():
            return None
        if done.returncode < 0:
            last = f"crashed (signal {-done.returncode})"
        raise RuntimeError(f"{name} at N = {num_nodes}: {last}")
    return int(json.loads(done.stdout.strip().splitlines()[-1])["peak_bytes"])


def available_bytes(device: str) -> int:
    """Memory this machine has free for a probe: CUDA's free memory, or MemAvailable.

    Parameters
    ----------
    device : "cpu" or "cuda...".

    Returns
    -------
    int, bytes.
    """
    if device.startswith("cuda"):
        return torch.cuda.mem_get_info()[0]
    with open("/proc/meminfo") as f:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
    return info["MemAvailable"]


def search(name: str, budget: int, device: str,
           echo: Callable[[str], None] = print) -> dict[str, object]:
    """The measurements of one workload and the largest N measured to fit `budget` bytes.

    Parameters
    ----------
    name : a workload's name.
    budget : bytes.
    device : "cpu" or "cuda".
    echo : prints each measurement.

    Returns
    -------
    dict: workload, budget_bytes, largest_fitting, bytes_per_node, measured {N: bytes or None}.

    Raises
    ------
    RuntimeError
        when the workload's smallest population, or twice it, cannot be measured.
    """
    start = next(w for w in WORKLOADS if w.name == name).num_nodes
    points: dict[int, int | None] = {}

    def probe(n: int) -> int | None:
        points[n] = measure_apart(name, n, device)
        shown = "failed" if points[n] is None else f"{points[n] / GIB:.2f} GiB"
        echo(f"  {name}: N = {n:>7,}: {shown}")
        return points[n]

    low = probe(start)
    if low is None or low > budget:
        raise RuntimeError(f"{name}: no population measured fits {budget / GIB:g} GiB; the "
                           f"smallest, {start} nodes, took "
                           f"{'too much' if low is None else f'{low / GIB:.2f} GiB'}")
    high = probe(2 * start)
    if high is None:
        raise RuntimeError(f"{name}: a population of {2 * start} nodes could not be measured")
    slope = max((high - low) / start, 1.0)
    aim = max(start, 2 * start + int((0.96 * budget - high) / slope))
    for _ in range(AIMS):  # along the line through 2N and the largest N measured so far
        peak = probe(aim)
        if peak is not None and 0.97 * budget <= peak <= budget:
            break
        if peak is None:
            aim = aim * 19 // 20
            continue
        if aim <= 2 * start:  # the budget is reached within the first two measurements
            break
        slope = max((peak - high) / (aim - 2 * start), 1.0)
        aim = max(start, 2 * start + int((0.985 * budget - high) / slope))
    fitting = max(n for n, b in points.items() if b is not None and b <= budget)  # start fits
    over = math.ceil(fitting * 1.02)
    workload = next(w for w in WORKLOADS if w.name == name)
    data = over * workload.batch_size * math.prod(SHAPES[workload.data]) * 4
    if (over not in points and high + slope * (over - 2 * start) + data
            < available_bytes(device) - HEADROOM):
        probe(over)
    fits = max(n for n, b in points.items() if b is not None and b <= budget)
    return {"workload": name, "budget_bytes": budget, "largest_fitting": fits,
            "bytes_per_node": slope, "measured": {str(n): b for n, b in sorted(points.items())}}


def main(argv: list[str] | None = None) -> int:
    """The `python -m bench.capacity` command: the largest population that fits a memory budget.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status: 0, or 2 after a one-line error.
    """
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__)
    parser.add_argument("--only", default="mlp-100,cnn", help="workloads (default mlp-100,cnn)")
    parser.add_argument("--budget-gb", type=float, default=16.0, help="GiB (default 16)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--measure", nargs=2, metavar=("WORKLOAD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps({"peak_bytes": measure(args.measure[0], int(args.measure[1]),
                                                args.device)}))
        return 0
    budget = int(args.budget_gb * GIB)
    try:
        if not budget > 0:
            raise ValueError(f"--budget-gb must be positive, got {args.budget_gb:g}")
        chosen = select(WORKLOADS, args.only)
        print(f"device {args.device}, budget {args.budget_gb:g} GiB, torch {torch.__version__}; "
              "one round of SGD with momentum, data not counted")
        results = [search(w.name, budget, args.device) for w in chosen]
    except (ValueError, RuntimeError) as err:
        print(f"python -m bench.capacity: error: {err}", file=sys.stderr)
        return 2
    print(f"\n{'workload':<10} {'MiB/node':>9} {'largest N that fits':>20} {'its peak GiB':>13}"
          f" {'next N measured':>16}")
    for r in results:
        fits, measured = r["largest_fitting"], r["measured"]
        above = [int(n) for n, b in measured.items() if int(n) > fits]
        nxt = (f"{min(above):,}: " + ("failed" if measured[str(min(above))] is None else
                                      f"{measured[str(min(above))] / GIB:.2f} GiB")
               if above else "not run (RAM)")
        print(f"{r['workload']:<10} {r['bytes_per_node'] / MIB:>9.2f} {fits:>20,} "
              f"{measured[str(fits)] / GIB:>13.2f} {nxt:>16}")
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
