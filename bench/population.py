"""Benchmark: one round of 100 nodes, per-node loop executor vs vectorized population.

Workload (perf-notes.md): real Fashion-MNIST, Dirichlet(0.3) over 100 nodes, mnist_2NN, 5 local
SGD-momentum steps at batch 32 (and the SAM variant), then Push-Sum mixing over 10 random
out-neighbours. Prints a table and ends with one JSON line. Run on an otherwise idle machine:
`python -m bench.population [--rounds R] [--device cpu|cuda]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

from p2pfl.config import config_from_dict
from p2pfl.engine import build
from p2pfl.models import build_model


def forward_flops_per_sample(model: nn.Module, input_shape: tuple[int, ...]) -> float:
    """Multiply-adds x 2 of one forward pass, counted over Linear and Conv2d layers."""
    total = 0.0

    def count(module: nn.Module, _inputs: tuple, output: torch.Tensor) -> None:
        nonlocal total
        if isinstance(module, nn.Linear):
            total += 2 * module.in_features * module.out_features
        elif isinstance(module, nn.Conv2d):
            k = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
            total += 2 * k * output[0].numel()

    hooks = [m.register_forward_hook(count) for m in model.modules()]
    with torch.no_grad():
        model(torch.zeros(1, *input_shape))
    for h in hooks:
        h.remove()
    return total


def matmul_gflops(device: torch.device, size: int = 2048, repeats: int = 10) -> float:
    """The machine's float32 matmul rate, measured now."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    a @ b
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e9


def workload(executor: str, rho: float, device: str) -> dict:
    return {
        "seed": 0, "rounds": 1, "device": device,
        "data": {"name": "fashion_mnist", "num_nodes": 100, "partition": "dirichlet",
                 "alpha": 0.3},
        "model": {"name": "mlp"},
        "topology": {"name": "random_out", "out_degree": 10},
        "algorithm": {"name": "dfedsgpsm" if rho > 0 else "dfedsgpm", "lr": 0.05,
                      "local_steps": 5, "local_epochs": 0,
                      "batch_size": 32, "momentum": 0.9, "rho": rho},
        "engine": {"executor": executor},
    }


def time_rounds(executor: str, rho: float, device: str, rounds: int) -> tuple[float, object]:
    """Median seconds per round (after one warm-up round) and the run context."""
    ctx, algorithm = build(config_from_dict(workload(executor, rho, device)))
    times = []
    for t in range(rounds + 1):
        if ctx.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        algorithm.round(ctx, t, ctx.schedule.at(t))
        if ctx.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]), ctx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per executor")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    device = torch.device(args.device)
    peak = matmul_gflops(device)
    result = {"device": str(device), "threads": torch.get_num_threads(),
              "matmul_gflops": round(peak, 1)}
    header = f"{'solver':<6} {'executor':<11} {'s/round':>9} {'node-steps/s':>13} " \
             f"{'GFLOP/s':>8} {'% of matmul':>11} {'speed-up':>9}"
    print(f"device {device}, {result['threads']} threads, measured matmul {peak:.0f} GFLOP/s")
    print("workload: 100 nodes, mlp, 5 local steps, batch 32, momentum 0.9, push-sum mixing")
    print(header)
    print("-" * len(header))
    for solver, rho in (("sgd", 0.0), ("sam", 0.05)):
        seconds = {}
        for executor in ("loop", "vectorized"):
            seconds[executor], ctx = time_rounds(executor, rho, args.device, args.rounds)
            model = build_model("mlp", ctx.data.input_shape, ctx.data.num_classes)
            flops_sample = forward_flops_per_sample(model, ctx.data.input_shape)
            node_steps = ctx.num_nodes * 5
            passes = 3 * (2 if rho > 0 else 1)  # forward + backward (2x) per gradient
            gflops = node_steps * 32 * flops_sample * passes / seconds[executor] / 1e9
            ratio = seconds["loop"] / seconds[executor]
            print(f"{solver:<6} {executor:<11} {seconds[executor]:>9.3f} "
                  f"{node_steps / seconds[executor]:>13.0f} {gflops:>8.1f} "
                  f"{100 * gflops / peak:>10.0f}% {ratio:>8.2f}x")
            result[f"{solver}_{executor}_s_per_round"] = round(seconds[executor], 4)
            result[f"{solver}_{executor}_gflops"] = round(gflops, 1)
        result[f"{solver}_speedup"] = round(seconds["loop"] / seconds["vectorized"], 2)
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
