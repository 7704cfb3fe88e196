"""Time one workload: the vectorized population against the per-node loop executor.

A timed round is the algorithm's round as the engine runs it (local phase of every node, then
Push-Sum mixing), without evaluation or logging; the device is synchronized around each round.
One warm-up round is run first and not counted; s/round is the median of the timed rounds, which
alternate between the vectorized population and the loop executor.

Per solver and precision (engine.precision: the vectorized population in float32 or bf16 mixed
precision; the loop is always float32) a row holds (units in the names):
- s_per_round, node_steps_per_s (N K / s), samples_per_s (N K B / s);
- gflops: FLOPs of the local phase (`bench.flops` rule; a SAM step counts two gradients) over
  the whole round's time (mixing included), and pct_of_matmul against the matmul rate measured
  in the row's precision (matmul_gflops);
- peak_mem_mb: rise of memory while building the vectorized population and running its warm-up
  round, and
  chunk_size: the nodes it trains in one batched step;
- loop_s_per_round: the loop executor's s/round, timed on `loop_nodes` nodes and multiplied by
  N / loop_nodes when fewer (loop_scaled); speedup = loop_s_per_round / s_per_round;
- s_range and loop_s_range: the fastest and slowest timed round of each side (the loop's
  scaled like its median), which show a machine whose speed moved during the run;
- products_gflops and pct_of_products: the rate of the round's batched products alone
  (bench.flops.products_gflops: the ceiling at the bench's sizes; None for convolutions);
- mem_per_node_mb: peak_mem_mb / N;
- bf16_off (on the fp32 row, with `bf16_auto`): why no bf16 row was timed: the device has no
  fast bf16 products, or a probe round in bf16 was slower than in float32.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import torch

from algorithms import Algorithm
from bench.flops import gradient_flops_per_sample, products_gflops, synchronize
from bench.memory import PeakMemory, release_memory
from bench.workloads import SOLVERS, Workload, workload_config
from p2pfl.context import RunContext
from p2pfl.core.models import build_model
from p2pfl.data import Dataset
from p2pfl.engine import build

MIB = 2**20


def timed_round(ctx: RunContext, algorithm: Algorithm, t: int) -> float:
    """Seconds of round t of the algorithm, the device synchronized before and after.

    Parameters
    ----------
    ctx : the run.
    algorithm : its algorithm.
    t : round, from 0.

    Returns
    -------
    float.
    """
    synchronize(ctx.device)
    start = time.perf_counter()
    graph = ctx.schedule.at(t)
    algorithm.round(ctx, t, graph, ctx.faults(t, graph))
    synchronize(ctx.device)
    return time.perf_counter() - start


def time_rounds(ctx: RunContext, algorithm: Algorithm, rounds: int) -> list[float]:
    """Seconds of each of `rounds` timed rounds, after one untimed warm-up round.

    Parameters
    ----------
    ctx : the run.
    algorithm : its algorithm.
    rounds : rounds timed.

    Returns
    -------
    list of float.
    """
    return [timed_round(ctx, algorithm, t) for t in range(rounds + 1)][1:]


PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}  # engine.precision -> matmul dtype
PROBE_ROUNDS = 2


def bf16_support(device: torch.device) -> tuple[bool, str]:
    """Whether the device multiplies bf16 natively, and what it has for it.

    Parameters
    ----------
    device : the device.

    Returns
    -------
    tuple (bool, str).
    """
    if device.type == "cuda":
        native = torch.cuda.is_bf16_supported(including_emulation=False)
        return native, "bf16 tensor cores" if native else "no native bf16 on this GPU"
    if torch.cpu._is_amx_tile_supported():
        return True, "AMX"
    if torch.cpu._is_avx512_bf16_supported():
        return True, "AVX512-BF16 without AMX"
    return False, "neither AMX nor AVX512-BF16 on this CPU (bf16 products are emulated)"


def probe_bf16(fp32: tuple[RunContext, Algorithm, int], bf16: tuple[RunContext, Algorithm, int],
               device: torch.device) -> str | None:
    """Why bf16 should not be timed.

    The device's support, then PROBE_ROUNDS rounds of each precision, alternating; bf16 is off
    when its median round is slower.

    Parameters
    ----------
    fp32, bf16 : (context, algorithm, peak bytes) of each precision's population.
    device : the device.

    Returns
    -------
    str, the reason; None when bf16 pays.
    """
    native, what = bf16_support(device)
    if not native:
        return what
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for t in range(1, PROBE_ROUNDS + 1):
        for name, (ctx, algorithm, _) in (("fp32", fp32), ("bf16", bf16)):
            times[name].append(timed_round(ctx, algorithm, t))
    slow, fast = statistics.median(times["bf16"]), statistics.median(times["fp32"])
    if slow <= fast:
        return None
    return (f"a probe round took {slow:.3f} s in bf16 against {fast:.3f} s in fp32 "
            f"({what})")


def _built(workload: Workload, solver: str, executor: str, num_nodes: int, dataset: Dataset,
           device: str, compile: bool, precision: str = "fp32"
           ) -> tuple[RunContext, Algorithm, int]:
    """A built population after its untimed warm-up round (which absorbs any compilation), and
    how far memory rose (bytes) while building it and running that round."""
    cfg = workload_config(workload, solver, executor, num_nodes, device, dataset.name, compile,
                          precision)
    release_memory(torch.device(device))
    with PeakMemory(torch.device(device)) as memory:
        ctx, algorithm = build(cfg, dataset)
        timed_round(ctx, algorithm, 0)
    return ctx, algorithm, memory.peak_bytes


def run_solver(workload: Workload, solver: str, dataset: Dataset, device: str, rounds: int,
               matmul_gflops: dict[str, float], compile: bool = False,
               precisions: tuple[str, ...] = ("fp32",), bf16_auto: bool = False
               ) -> list[dict[str, Any]]:
    """Time `solver` on `workload`, vectorized in each of `precisions` and with the float32 loop
    executor.

    The round's products alone are timed at the vectorized population's chunk size
    (bench.flops.products_gflops) just before its rounds. The timed rounds alternate between the
    populations (vectorized fp32 round t, vectorized bf16 round t, loop round t, ...), so that a
    slow spell of a shared machine weighs on all alike; each side's s/round is the median of its
    rounds.

    Parameters
    ----------
    workload : the workload.
    solver : "sgd" or "sam".
    dataset : the data.
    device : "cpu" or "cuda".
    rounds : rounds timed.
    matmul_gflops : the measured matmul rate of each precision, for "% matmul".
    compile : torch.compile the vectorized populations.
    precisions : "fp32", "bf16".
    bf16_auto : bf16 is timed beside fp32 only where `probe_bf16` finds that it pays.

    Returns
    -------
    list of dict, one row per precision.
    """
    n, k, b = workload.num_nodes, workload.local_steps, workload.batch_size
    loop_nodes = min(max(workload.loop_nodes, 2), n)  # a Push-Sum graph needs 2 nodes
    vectorized = {p: _built(workload, solver, "vectorized", n, dataset, device, compile, p)
                  for p in precisions}
    bf16_off = None
    if bf16_auto and {"fp32", "bf16"} <= set(vectorized):
        bf16_off = probe_bf16(vectorized["fp32"], vectorized["bf16"], torch.device(device))
        if bf16_off is not None:
            del vectorized["bf16"]
    loop_ctx, loop_alg, _ = _built(workload, solver, "loop", loop_nodes, dataset, device, False)
    model = build_model(workload.model, dataset.input_shape, dataset.num_classes)
    first = next(iter(vectorized.values()))[0]
    products = products_gflops(model, dataset.input_shape, n, first.trainer.chunk_size, k, b,
                               first.device)
    times: dict[str, list[float]] = {p: [] for p in precisions}
    loop_times = []
    for t in range(1, rounds + 1):
        for p, (ctx, algorithm, _) in vectorized.items():
            times[p].append(timed_round(ctx, algorithm, t))
        loop_times.append(timed_round(loop_ctx, loop_alg, t))
    scale = n / loop_nodes
    loop_seconds = statistics.median(loop_times) * scale
    gradients = 2 if "rho" in SOLVERS[solver][1] else 1
    flops = n * k * b * gradients * gradient_flops_per_sample(model, dataset.input_shape)
    rows = []
    for p, (ctx, _, peak_bytes) in vectorized.items():
        seconds = statistics.median(times[p])
        gflops = flops / seconds / 1e9
        matmul = matmul_gflops[p]
        rows.append({
            "solver": solver,
            "precision": p,
            "algorithm": SOLVERS[solver][0],
            "s_per_round": seconds,
            "node_steps_per_s": n * k / seconds,
            "samples_per_s": n * k * b / seconds,
            "flops_per_round": flops,
            "gflops": gflops,
            "matmul_gflops": matmul,
            "pct_of_matmul": 100 * gflops / matmul if matmul > 0 else math.nan,
            "products_gflops": products if p == "fp32" else None,
            "pct_of_products": 100 * gflops / products if products and p == "fp32" else None,
            "peak_mem_mb": peak_bytes / MIB,
            "mem_per_node_mb": peak_bytes / MIB / n,
            "num_params": ctx.population.num_params,
            "chunk_size": ctx.trainer.chunk_size,
            "s_range": [min(times[p]), max(times[p])],
            "loop_s_per_round": loop_seconds,
            "loop_s_range": [min(loop_times) * scale, max(loop_times) * scale],
            "loop_nodes": loop_nodes,
            "loop_scaled": loop_nodes < n,
            "speedup": loop_seconds / seconds,
        } | ({"bf16_off": bf16_off} if bf16_off is not None and p == "fp32" else {}))
    return rows


def run_workload(workload: Workload, dataset: Dataset, data_label: str, device: str,
                 rounds: int, matmul_gflops: dict[str, float],
                 solvers: tuple[str, ...] = tuple(SOLVERS), compile: bool = False,
                 precisions: tuple[str, ...] = ("fp32",), bf16_auto: bool = False
                 ) -> dict[str, Any]:
    """Every solver and precision of one workload.

    Parameters
    ----------
    workload : the workload.
    dataset : the data.
    data_label : how the table names the data.
    device : "cpu" or "cuda".
    rounds : rounds timed.
    matmul_gflops : the measured matmul rate of each precision.
    solvers : "sgd", "sam".
    compile : torch.compile the vectorized populations.
    precisions : "fp32", "bf16".
    bf16_auto : as in `run_solver`.

    Returns
    -------
    dict {"workload", "model", "data", "num_nodes", ..., "rows": [run_solver(...) rows of every
    solver]}.

    Raises
    ------
    ValueError
        when a node would hold fewer samples than the batch size.
    """
    per_node = len(dataset.y_train) // workload.num_nodes
    if per_node < workload.batch_size:
        raise ValueError(f"{workload.name}: {per_node} samples per node, fewer than the batch "
                         f"size {workload.batch_size}")
    model = build_model(workload.model, dataset.input_shape, dataset.num_classes)
    return {
        "workload": workload.name,
        "model": workload.model,
        "data": data_label,
        "num_nodes": workload.num_nodes,
        "local_steps": workload.local_steps,
        "batch_size": workload.batch_size,
        "num_params": sum(p.numel() for p in model.parameters()),
        "gradient_flops_per_sample": gradient_flops_per_sample(model, dataset.input_shape),
        "rounds": rounds,
        "compile": compile,
        "rows": [row for s in solvers for row in run_solver(
            workload, s, dataset, device, rounds, matmul_gflops, compile, precisions, bf16_auto)],
    }
