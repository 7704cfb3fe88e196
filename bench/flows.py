"""Benchmark: what the "flow" network model adds to a synchronous round's clock.

One round of mnist_2NN messages (6.37 Mbit) on a graph of degree 10, timed by `Clock.plan_round`
in the "ideal" model (each message alone on its link) and in the "flow" model (max-min sharing
of each node's uplink and downlink, p2pfl/scale/flows.py), with 10 % stragglers; without jitter
every node of a regular graph sends at one of two times, with jitter (0.1) each node at its own,
so every node's messages start and end at distinct events. Run on an otherwise idle machine:

    python -m bench.flows [--nodes 1000,10000] [--budget-s 600]

A case that would start after `--budget-s` seconds of the whole run is skipped and named.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import topologies as T
from p2pfl.config import NetworkConfig
from p2pfl.scale.network import Clock

MLP_BYTES = 796_840


def round_cost(n: int, graph_name: str, model: str, jitter: float) -> dict:
    """Seconds of one `plan_round` and the round's simulated seconds.

    Parameters
    ----------
    n : nodes.
    graph_name : "regular" (random 10-regular) or "out" (10 random out-neighbours a node,
        in-degrees unequal).
    model : "ideal" or "flow".
    jitter : the lognormal sigma of compute and transfer times.

    Returns
    -------
    dict: wall_s, sim_s, messages.
    """
    graph = (T.random_regular(n, 10, seed=0) if graph_name == "regular"
             else T.random_out_graph(n, 10, seed=0))
    config = NetworkConfig(enabled=True, step_s=0.02, latency_s=0.005, stragglers=0.1,
                           jitter=jitter, model=model)
    clock = Clock(config, n, seed=0, steps=10, message_bytes=MLP_BYTES)
    begin = time.perf_counter()
    timing = clock.plan_round(0, graph, T.Faults.none(n))
    return {"wall_s": time.perf_counter() - begin, "sim_s": float(timing.start.max()),
            "messages": graph.number_of_edges() * (1 if graph.is_directed() else 2)}


def main(argv: list[str] | None = None) -> None:
    """Print the table.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).
    """
    parser = argparse.ArgumentParser(prog="python -m bench.flows", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1000,10000")
    parser.add_argument("--budget-s", type=float, default=600.0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print("| nodes | graph | jitter | messages | ideal ms | flow s | simulated s ideal | "
          "simulated s flow |")
    print("|---|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.nodes.split(",")):
        for graph_name in ("regular", "out"):
            for jitter in (0.0, 0.1):
                if time.perf_counter() - start > args.budget_s:
                    print(f"| {n} | {graph_name} | {jitter} | skipped: past --budget-s |")
                    continue
                ideal = round_cost(n, graph_name, "ideal", jitter)
                flow = round_cost(n, graph_name, "flow", jitter)
                print(f"| {n:,} | {graph_name} | {jitter} | {flow['messages']:,} | "
                      f"{1e3 * ideal['wall_s']:.1f} | {flow['wall_s']:.2f} | "
                      f"{ideal['sim_s']:.3f} | {flow['sim_s']:.3f} |", flush=True)
    print(f"(round: 10 local steps of 0.02 s, 10 % stragglers x10, latency 5 ms, 1 Gbit/s; "
          f"total {time.perf_counter() - start:.0f} s; {np.__name__} {np.__version__})")


if __name__ == "__main__":
    main()
