"""Benchmark: the mixing of one Push-Sum round, synchronous against overlap (messages in flight).

Both mix a float32 population [N, P] (one block) over a random out-degree digraph. Synchronous:
`PushSum.mix` (one product). Overlap: `InFlight.mix` with every message late by a random 0..3
rounds, timed in steady state (the buffers of the next rounds already hold mass): one product per
delay class plus the buffer additions. Run on an otherwise idle machine:
`python -m bench.overlap [--device cpu|cuda] [--nodes N]`; `p2pfl bench` prints its line.
"""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import torch

import topologies as T
from algorithms.decentralized import PushSum
from algorithms.delayed import InFlight
from bench.mixing import PARAMS_MLP, _seconds
from p2pfl.core.mixing import LocalComm

MAX_DELAY = 3
WARM_ROUNDS = 2 * MAX_DELAY  # rounds mixed before timing: the in-flight buffers are full


def overlap_cost(num_nodes: int, num_params: int, out_degree: int,
                 device: str | torch.device, repeats: int = 5) -> dict:
    """Median seconds of one synchronous Push-Sum mix and of one overlapped mix (steady state).

    Parameters
    ----------
    num_nodes : N.
    num_params : P.
    out_degree : the graph's out-degree (at most N - 1).
    device : the device.
    repeats : mixes timed.

    Returns
    -------
    dict: nodes, num_params, out_degree, max_delay, sync_s, overlap_s and their ratio.
    """
    device = torch.device(device)
    gen = torch.Generator().manual_seed(0)
    params = {"w": torch.randn(num_nodes, num_params, generator=gen).to(device)}
    ctx = SimpleNamespace(comm=LocalComm(device, torch.float32), dtype=torch.float32,
                          population=SimpleNamespace(params=params), num_nodes=num_nodes)
    graph = T.random_out(num_nodes, min(out_degree, num_nodes - 1), seed=0).at(0)
    P = T.column_stochastic(graph, sparse=True)
    src, dst, _ = T.messages(graph)
    rng = np.random.default_rng(0)
    weights = torch.ones(num_nodes, device=device, dtype=torch.float64)

    sync = object.__new__(PushSum)  # its mix reads only the weights: no run is built
    sync.weights = weights.clone()
    sync_s = _seconds(lambda: sync.mix(ctx, P), device, repeats)

    in_flight, state = InFlight(), {"t": 0, "w": weights.clone()}

    def delayed() -> None:
        late = rng.integers(0, MAX_DELAY + 1, size=len(src))
        state["w"] = in_flight.mix(ctx, state["t"], P, (src, dst, late), state["w"])
        state["t"] += 1

    for _ in range(WARM_ROUNDS):
        delayed()
    overlap_s = _seconds(delayed, device, repeats)
    return {"nodes": num_nodes, "num_params": num_params, "out_degree": out_degree,
            "max_delay": MAX_DELAY, "sync_s": sync_s, "overlap_s": overlap_s,
            "ratio": overlap_s / sync_s}


def overlap_line(result: dict) -> str:
    """The line of `overlap_cost`'s result.

    Parameters
    ----------
    result : `overlap_cost`'s dict.

    Returns
    -------
    str.
    """
    return (f"overlap Push-Sum mix, N = {result['nodes']}, P = {result['num_params']}, "
            f"delays 0..{result['max_delay']} rounds: {1e3 * result['overlap_s']:.1f} ms against "
            f"{1e3 * result['sync_s']:.1f} ms synchronous ({result['ratio']:.1f}x)")


def main() -> None:
    """Time one synchronous and one overlapped Push-Sum mix; print the line and the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    result = overlap_cost(args.nodes, PARAMS_MLP, 10, args.device)
    print(overlap_line(result))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
