"""Sizing a sharded run before buying the GPUs for it: `python -m bench.sizing [N] [MODEL]
[--gpus 8,16] [--per-machine 8] [--steps K] [--batch B]`.

For N nodes of MODEL on R GPUs (ranks, `per_machine` to a machine), one round of local SGD
with momentum (K steps of batch B, CIFAR-shaped input) and one Push-Sum mixing, it prints:

- FLOPs per round: N K B G, where G = the gradient FLOPs of one sample (bench.flops; SAM doubles
  them), and per GPU N K B G / R;
- memory per GPU: rows = ceil(N / R) nodes of P parameters, 4 bytes each, times 2 (parameters and
  momentum) plus the mixing's own buffers (the rows received, and one parameter block's output),
  before activations (one chunk of nodes at a time: p2pfl.core.memory sizes them);
- bytes per round: what the engine's exchange plan (p2pfl.scale.distributed.ExchangePlan) sends for
  the round's graph: each row once per receiving rank, 4 P bytes a row. The busiest rank's
  bytes in the busiest round of the graph's period, split into those to GPUs of its own
  machine (NVLink) and to other machines (network), and the time they take at the stated link
  rates.

The numbers are computed, not measured: a model to size a job, whose link rates are nominal.
"""

from __future__ import annotations

import argparse
import math
import sys

import scipy.sparse as sp
import torch

import topologies as T
from bench.flops import gradient_flops_per_sample
from p2pfl.core.models import build_model
from p2pfl.scale.distributed import ExchangePlan, Shard

NVLINK_GBPS = 450.0  # GB/s one way per GPU (H100 SXM, NVLink 4: 900 GB/s both ways)
NETWORK_GBPS = 50.0  # GB/s one way per GPU (one 400 Gb/s InfiniBand NIC per GPU)
CIFAR = (3, 32, 32)
TOPOLOGIES = {  # the graphs of one period; the table shows the busiest round
    "ring": lambda n: [T.ring(n)],
    "exponential": lambda n: [T.exponential(n)],
    "one-peer exponential": lambda n: [T.one_peer_exponential(n).at(t)
                                       for t in range(math.ceil(math.log2(n)))],
    "complete": lambda n: [T.complete(n)],
}


def seconds(near: int, far: int) -> float:
    """Time to send `near` bytes over NVLink and `far` bytes over the network.

    Parameters
    ----------
    near : bytes within a machine.
    far : bytes to other machines.

    Returns
    -------
    float, seconds.
    """
    return near / (NVLINK_GBPS * 1e9) + far / (NETWORK_GBPS * 1e9)


def busiest_rank_bytes(W: sp.csr_array, world: int, per_machine: int,
                       row_bytes: int) -> tuple[int, int, int]:
    """The traffic of the rank whose sends take longest, under the engine's exchange plan for W.

    Parameters
    ----------
    W : [N, N] mixing matrix.
    world : ranks.
    per_machine : ranks (GPUs) a machine.
    row_bytes : bytes of one node's row.

    Returns
    -------
    tuple (rows received, bytes sent to its own machine, to other machines).
    """
    worst = (0, 0, 0)
    dense = torch.from_numpy(W.toarray())
    for rank in range(world):
        plan = ExchangePlan(dense, Shard(rank, world, W.shape[0]), torch.float32,
                            torch.device("cpu"))
        near = far = 0
        for peer, rows in plan.send.items():
            same = peer // per_machine == rank // per_machine
            near += len(rows) * row_bytes if same else 0
            far += 0 if same else len(rows) * row_bytes
        if seconds(near, far) > seconds(*worst[1:]):
            worst = (plan.needed, near, far)
    return worst


def sizing(num_nodes: int, model_name: str, gpus: list[int], per_machine: int, steps: int,
           batch: int) -> str:
    """The sizing of a sharded run: model, compute and the exchange's time for each GPU count.

    Parameters
    ----------
    num_nodes : N.
    model_name : the model.
    gpus : GPU counts (ranks).
    per_machine : GPUs a machine.
    steps : local steps a round.
    batch : batch size.

    Returns
    -------
    str, the printed lines.
    """
    model = build_model(model_name, CIFAR, 10)
    params = sum(p.numel() for p in model.parameters())
    grad = gradient_flops_per_sample(model, CIFAR)
    flops = num_nodes * steps * batch * grad
    lines = [f"{num_nodes} nodes of {model_name}: P = {params / 1e6:.2f} M parameters "
             f"({4 * params / 1e6:.1f} MB a row in float32); gradient of one sample "
             f"G = {grad / 1e9:.2f} GFLOP; a round of {steps} steps of batch {batch}: "
             f"N K B G = {flops / 1e12:.1f} TFLOP (SAM: twice)",
             f"links: NVLink {NVLINK_GBPS:g} GB/s, network {NETWORK_GBPS:g} GB/s per GPU, one "
             f"way; {per_machine} GPUs a machine", "",
             "| GPUs | topology | TFLOP/GPU | memory/GPU GB | rows received | NVLink MB | "
             "network MB | comm ms (NVLink + network) |", "|---|---|---|---|---|---|---|---|"]
    for world in gpus:
        rows = math.ceil(num_nodes / world)
        for name, graphs in TOPOLOGIES.items():
            needed, near, far = max(
                (busiest_rank_bytes(sp.csr_array(T.column_stochastic(g, sparse=True)), world,
                                    per_machine, 4 * params) for g in graphs(num_nodes)),
                key=lambda sent: seconds(*sent[1:]))
            largest = max(p.numel() for p in model.parameters())
            memory = 4 * (2 * rows * params + needed * params + rows * largest)
            ms = 1e3 * seconds(near, far)
            lines.append(f"| {world} | {name} | {flops / world / 1e12:.1f} | {memory / 1e9:.1f} |"
                         f" {needed} | {near / 1e6:.0f} | {far / 1e6:.0f} | {ms:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The `python -m bench.sizing` command: sizing a sharded run before buying the GPUs for it.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status (0).
    """
    p = argparse.ArgumentParser(prog="python -m bench.sizing", description=__doc__.split("\n")[0])
    p.add_argument("num_nodes", nargs="?", type=int, default=1000)
    p.add_argument("model", nargs="?", default="resnet18_gn")
    p.add_argument("--gpus", default="8,16", help="GPU counts (ranks), comma-separated")
    p.add_argument("--per-machine", type=int, default=8)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    args = p.parse_args(argv)
    gpus = [int(g) for g in args.gpus.split(",")]
    print(sizing(args.num_nodes, args.model, gpus, args.per_machine, args.steps, args.batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
