"""Benchmark: mixing alone, in GB/s against the machine's copy bandwidth measured in the same run.

One mix is `LocalComm.mix` of a float32 population [N, P] (one block) with the column-stochastic
Push-Sum matrix of a random `out_degree`-out digraph. Byte model: an in-place mix must at least
read X and write X once, so bytes = 2 * N * P * 4 (the operator's own bytes are ignored); the copy
bandwidth counts the same way (read the source, write the destination). Run on an otherwise idle
machine: `python -m bench.mixing [--device cpu|cuda] [--repeats R]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch

import topologies as T
from p2pfl.core.mixing import LocalComm

PARAMS_MLP = 199_210  # mnist_2NN (784-200-200-10)
DTYPE = torch.float32


def _seconds(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median wall time of fn() over `repeats` runs after one warm-up, synchronised on CUDA."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def copy_bandwidth(num_bytes: int, device: str | torch.device, repeats: int = 5) -> float:
    """GB/s of copying a `num_bytes` tensor into a preallocated one (read + write counted).

    Parameters
    ----------
    num_bytes : bytes copied.
    device : the device.
    repeats : copies timed (median).

    Returns
    -------
    float, GB/s.
    """
    device = torch.device(device)
    src = torch.ones(num_bytes // 4, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    seconds = _seconds(lambda: dst.copy_(src), device, repeats)
    return 2 * src.numel() * 4 / seconds / 1e9


def mixing_throughput(num_nodes: int, num_params: int, out_degree: int, layout: str,
                      device: str | torch.device, repeats: int = 5) -> dict:
    """Time `comm.mix` of an [N, P] float32 population over a random out-degree graph.

    Parameters
    ----------
    num_nodes : N.
    num_params : P.
    out_degree : the graph's out-degree (at most N - 1).
    layout : "auto" | "dense" | "sparse" (`engine.mixing`).
    device : the device.
    repeats : mixes timed.

    Returns
    -------
    dict: the median seconds per mix, the layout actually used, the operator's nonzeros, bytes
    moved (2 N P 4: read X, write X) and GB/s = bytes / seconds.
    """
    device = torch.device(device)
    graph = T.random_out(num_nodes, min(out_degree, num_nodes - 1), seed=0).at(0)
    comm = LocalComm(device, DTYPE, layout)
    P = T.column_stochastic(graph, sparse=True)
    W = comm.matrix(P)
    params = {"x": torch.randn(num_nodes, num_params, device=device, dtype=DTYPE)}
    seconds = _seconds(lambda: comm.mix(W, params), device, repeats)
    moved = 2 * num_nodes * num_params * params["x"].element_size()
    return {"num_nodes": num_nodes, "num_params": num_params, "out_degree": out_degree,
            "layout": "sparse" if W.layout == torch.sparse_csr else "dense",
            "requested": layout, "nnz": int(P.nnz),
            "seconds": seconds, "bytes": moved, "gb_per_s": moved / seconds / 1e9,
            "device": str(device)}


def main() -> None:
    """Time mixing against the copy bandwidth and print the lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out-degree", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    copy = copy_bandwidth(1000 * PARAMS_MLP * 4, args.device, args.repeats)
    print(f"copy bandwidth: {copy:.1f} GB/s (read + write of {1000 * PARAMS_MLP * 4 / 1e9:.2f} GB)")
    print(f"{'N':>6} {'layout':>7} {'auto':>6} {'ms/mix':>9} {'GB/s':>7} {'of copy':>8}")
    rows = []
    for n in (10, 100, 1000):
        auto = LocalComm(torch.device(args.device), DTYPE).sparse_for(
            n, n * (min(args.out_degree, n - 1) + 1))
        for layout in ("dense", "sparse"):
            r = mixing_throughput(n, PARAMS_MLP, args.out_degree, layout, args.device,
                                  args.repeats if n < 1000 or layout == "sparse" else 2)
            r["auto_picks"] = "sparse" if auto else "dense"
            r["copy_gb_per_s"] = copy
            rows.append(r)
            print(f"{n:>6} {layout:>7} {r['auto_picks']:>6} {r['seconds'] * 1e3:>9.1f} "
                  f"{r['gb_per_s']:>7.1f} {r['gb_per_s'] / copy:>8.0%}")
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
