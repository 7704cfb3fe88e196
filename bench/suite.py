"""Benchmark suite: `p2pfl bench [--quick] [--device cpu|cuda|auto] [--only W,..] [--rounds R]
[--precision auto|fp32|bf16|fp32,bf16] [--compile] [--json-out FILE]` (also
`python -m bench.suite`);
`p2pfl bench --nproc 1,2` times a workload on local processes instead (bench.scaleout).

Workloads (`bench.workloads`): mlp on Fashion-MNIST with N = 10, 100, 1000; cnn with N = 100
and resnet18_gn with N = 10 on CIFAR-shaped data; each with SGD-momentum (dfedsgpm) and SAM
(dfedsgpsm), 5 local steps of batch 32, Push-Sum mixing. Prints the device, threads, torch
version and date, one table row per workload, solver and precision (`bench.runner` defines the
columns), the mixing rate of each workload's population when `bench.mixing` is present, the cost
of an overlap Push-Sum mix against a synchronous one at N = 100 (`bench.overlap`), then one JSON
line per workload. Timings mean something only on an otherwise idle machine.
`--only scaling` runs the cost curves in N instead (`bench.scaling`: the linear model to 100,000
nodes and consensus to 1,000,000, each point in its own process; never part of the default run).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.flops import matmul_gflops
from bench.mixing import PARAMS_MLP
from bench.overlap import overlap_cost, overlap_line
from bench.ragged import RAGGED, ragged_lines, run_ragged
from bench.repeats import repeat_lines
from bench.runner import PRECISIONS, run_workload
from bench.scaleout import scaleout
from bench.scaleout import table as scaleout_table
from bench.scaling import QUICK_NODES, SCALING, run_scaling
from bench.stacked import STACKED, run_stacked_bench, stacked_lines
from bench.workloads import (
    BATCH_SIZE,
    LOCAL_STEPS,
    MOMENTUM,
    OUT_DEGREE,
    QUICK_WORKLOADS,
    SAM_RHO,
    WORKLOADS,
    Workload,
    load_workload_data,
    select,
)
from p2pfl.config import ConfigError
from p2pfl.data import Dataset
from p2pfl.engine import resolve_device
from p2pfl.report.results import write_json_atomic

DEFAULT_ROUNDS = 3
QUICK_ROUNDS = 1
MIXING_REPEATS = 5
SPREAD_FLAG = 1.3  # a row is marked when its slowest round took this many times its fastest
COLUMNS = (("workload", 12, "s"), ("data", 18, "s"), ("N", 5, "d"), ("solver", 6, "s"),
           ("precision", 9, "s"), ("s/round", 9, ".3f"), ("node-steps/s", 12, ".0f"),
           ("samples/s", 10, ".0f"),
           ("GFLOP/s", 8, ".1f"), ("matmul", 7, ".0f"), ("% matmul", 8, ".0f"),
           ("% products", 10, ".0f"), ("peak MiB", 9, ".0f"), ("MiB/node", 8, ".2f"),
           ("loop s/round", 12, ".3f"), ("vs loop", 8, ".2f"))


def _cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo where present) and its logical core count."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")), name)
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} logical cores"


def environment(device: torch.device) -> dict[str, Any]:
    """What the numbers were measured on.

    Parameters
    ----------
    device : the device.

    Returns
    -------
    dict: device, its name, threads, library versions, date.
    """
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name()
    cuda = {"cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "nccl": ".".join(map(str, torch.cuda.nccl.version()))} if device.type == "cuda" else {}
    return {"device": str(device), "device_name": name, "threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(),
            "numpy": np.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            **cuda, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def mixing_rate(workload: Workload, num_params: int, device: torch.device) -> dict[str, Any] | str:
    """`bench.mixing`'s throughput of mixing this workload's population, with the copy bandwidth of
    the same bytes.

    Parameters
    ----------
    workload : the workload.
    num_params : P.
    device : the device.

    Returns
    -------
    dict, or a one-line reason string where it cannot be measured.
    """
    try:
        from bench.mixing import copy_bandwidth, mixing_throughput
    except ImportError:
        return "bench.mixing not present"
    n = workload.num_nodes
    try:
        mixing = dict(mixing_throughput(n, num_params, min(OUT_DEGREE, n - 1), "auto", device,
                                        MIXING_REPEATS))
        copy = copy_bandwidth(n * num_params * 4, device)
    except (TypeError, ValueError) as err:
        return f"bench.mixing failed: {err}"
    mixing["copy_gb_per_s"] = copy
    return mixing


def _row(values: tuple[Any, ...]) -> str:
    cells = []
    for (_, width, spec), value in zip(COLUMNS, values):
        if value is None or isinstance(value, float) and not math.isfinite(value):
            text = "n/a"
        else:
            text = format(value, spec)
        cells.append(text.ljust(width) if spec == "s" else text.rjust(width))
    return " ".join(cells)


def table_header() -> str:
    """Column names and a rule.

    Returns
    -------
    str, two lines.
    """
    header = " ".join(name.ljust(w) if s == "s" else name.rjust(w) for name, w, s in COLUMNS)
    return header + "\n" + "-" * len(header)


def table_rows(result: dict[str, Any]) -> list[str]:
    """One table row per solver and precision of a `run_workload` result.

    `!` marks a row whose vectorized or loop rounds ranged over more than SPREAD_FLAG x.

    Parameters
    ----------
    result : a `run_workload` dict.

    Returns
    -------
    list of str.
    """
    rows = []
    for r in result["rows"]:
        row = _row((result["workload"], result["data"], result["num_nodes"], r["solver"],
                    r["precision"], r["s_per_round"], r["node_steps_per_s"], r["samples_per_s"],
                    r["gflops"], r["matmul_gflops"], r["pct_of_matmul"], r["pct_of_products"],
                    r["peak_mem_mb"], r["mem_per_node_mb"], r["loop_s_per_round"],
                    r["speedup"]))
        if r["loop_scaled"]:
            row += f"  * loop on {r['loop_nodes']} nodes, scaled"
        (low, high), (loop_low, loop_high) = r["s_range"], r["loop_s_range"]
        if high > SPREAD_FLAG * low or loop_high > SPREAD_FLAG * loop_low:
            row += (f"  ! rounds ranged {low:.3g}-{high:.3g} s, loop {loop_low:.3g}-"
                    f"{loop_high:.3g} s")
        rows.append(row)
        if "bf16_off" in r:
            rows.append(f"  bf16 off for {result['workload']} {r['solver']}: {r['bf16_off']}")
    return rows


def mixing_line(result: dict[str, Any]) -> str:
    """The mixing measurement of one workload, or why there is none.

    Parameters
    ----------
    result : a `run_workload` dict with its "mixing".

    Returns
    -------
    str.
    """
    mixing = result["mixing"]
    prefix = f"mixing {result['workload']} (N={result['num_nodes']}, P={result['num_params']:,})"
    if isinstance(mixing, str):
        return f"{prefix}: n/a ({mixing})"
    gbps, copy = mixing.get("gb_per_s", math.nan), mixing.get("copy_gb_per_s", math.nan)
    share = f", {100 * gbps / copy:.0f}% of copy" if copy and math.isfinite(copy) else ""
    layout = f" {mixing['layout']}" if "layout" in mixing else ""
    return (f"{prefix}:{layout} {mixing.get('seconds', math.nan):.4f} s, {gbps:.1f} GB/s "
            f"(copy {copy:.1f} GB/s{share})")


def parser() -> argparse.ArgumentParser:
    """The suite's options (`p2pfl bench ...`, `python -m bench.suite ...`).

    Returns
    -------
    argparse.ArgumentParser.
    """
    b = argparse.ArgumentParser(prog="p2pfl bench", description="benchmark suite: vectorized "
                                "population against the per-node loop (docs/performance.md)")
    b.add_argument("--quick", action="store_true",
                   help="1 timed round, smaller N for cnn and resnet18_gn, loop timed on a few "
                        "nodes (about 2.5 minutes on a 2-core CPU)")
    b.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto")
    b.add_argument("--only", metavar="WORKLOAD[,..]",
                   help="mlp-10, mlp-100, mlp-1000, cnn, resnet18_gn, ragged (unequal local "
                   "datasets against balanced ones), stacked-seeds (8 runs stacked against one "
                   "after another), scaling (the cost curves in N, bench.scaling), or a model name")
    b.add_argument("--rounds", type=int, help="timed rounds after one warm-up (default 3, "
                   "--quick 1)")
    b.add_argument("--repeats", type=int, default=1, help="run each workload this many times "
                   "and print each row's median and range over the repeats (default 1)")
    b.add_argument("--json-out", metavar="FILE", help="also write all results as JSON")
    b.add_argument("--compile", action="store_true",
                   help="torch.compile the vectorized population (engine.compile)")
    b.add_argument("--precision", default="auto", metavar="P[,..]",
                   help="engine.precision of the vectorized rows: fp32, bf16, both, or auto "
                   "(default: fp32, and bf16 where the device has native bf16 products and a "
                   "probe round is faster; the reason is printed where it is off; the loop is "
                   "float32)")
    b.add_argument("--nproc", metavar="R[,..]",
                   help="instead of the suite: the workload (default mlp-100) as R local "
                   "processes (gloo) against one, e.g. 1,2: s/round and bytes across processes")
    return b


def _nprocs(text: str) -> list[int]:
    """'1,2' -> [1, 2]; anything else is a ConfigError."""
    try:
        chosen = list(dict.fromkeys(int(p) for p in text.split(",") if p.strip()))
    except ValueError:
        chosen = []
    if not chosen or min(chosen) < 1:
        raise ConfigError("--nproc", f"must be comma-separated process counts >= 1, got {text!r}")
    return chosen


def run_scaleout(args: argparse.Namespace) -> int:
    """`--nproc`: the scale-out table of the chosen workloads (mlp ones: Fashion-MNIST).

    Parameters
    ----------
    args : the parsed options.

    Returns
    -------
    int, the exit status (0).

    Raises
    ------
    ConfigError
        naming --nproc on CUDA, --only for a workload that is unknown or not an mlp one,
        --rounds below 1.
    """
    nprocs = _nprocs(args.nproc)
    if args.device == "cuda":
        raise ConfigError("--nproc", "the scale-out benchmark runs gloo on CPU")
    try:
        chosen = select(QUICK_WORKLOADS if args.quick else WORKLOADS, args.only or "mlp-100")
    except ValueError as err:
        raise ConfigError("--only", str(err)) from None
    if any(w.data != "fashion_mnist" for w in chosen):
        raise ConfigError("--only", "the scale-out benchmark runs the mlp workloads")
    rounds = args.rounds if args.rounds is not None else DEFAULT_ROUNDS
    if rounds < 1:
        raise ConfigError("--rounds", f"must be at least 1, got {rounds}")
    env = environment(torch.device("cpu"))
    print(f"p2pfl bench --nproc {args.nproc}: {env['date']}; {env['device_name']}, torch "
          f"{env['torch']}; round = {LOCAL_STEPS} steps of batch {BATCH_SIZE} (SGD, momentum "
          f"{MOMENTUM}) + Push-Sum over random_out({OUT_DEGREE}); median of {rounds} rounds "
          "after 1 warm-up; OMP threads = cores / processes")
    rows = [row for w in chosen for row in scaleout(w, "fashion_mnist", nprocs, rounds)]
    print(scaleout_table(rows))
    if args.json_out:
        write_json_atomic(Path(args.json_out), rows)
    return 0


def _precisions(text: str) -> tuple[str, ...]:
    """'fp32,bf16' -> ("fp32", "bf16"), 'auto' -> the same (bf16 then probed); an unknown name
    is a ConfigError."""
    if text.strip() == "auto":
        return tuple(PRECISIONS)
    chosen = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    unknown = [p for p in chosen if p not in PRECISIONS]
    if unknown or not chosen:
        raise ConfigError("--precision", f"unknown precision {', '.join(unknown) or repr(text)}"
                          f" (allowed: auto, {', '.join(PRECISIONS)})")
    return chosen


def run_suite(args: argparse.Namespace) -> int:
    """Run the selected workloads, print the tables and the JSON lines.

    Parameters
    ----------
    args : the parsed options.

    Returns
    -------
    int, the exit status: 0 on success.

    Raises
    ------
    ConfigError
        naming the option that is refused.
    """
    if args.nproc is not None:
        return run_scaleout(args)
    device = resolve_device(args.device)
    workloads = QUICK_WORKLOADS if args.quick else WORKLOADS
    wanted = [w.strip() for w in (args.only or "").split(",") if w.strip()]
    ragged = RAGGED in wanted or not (args.only or args.quick)
    stacking = STACKED in wanted or not (args.only or args.quick)
    scaling = SCALING in wanted  # minutes and tens of GiB: only when named
    others = ",".join(w for w in wanted if w not in (RAGGED, STACKED, SCALING))
    try:
        chosen = select(workloads, others) if others or not wanted else []
    except ValueError as err:
        raise ConfigError("--only", f"{err}, {RAGGED}, {STACKED}, {SCALING}") from None
    rounds = args.rounds if args.rounds is not None else (
        QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS)
    if rounds < 1:
        raise ConfigError("--rounds", f"must be at least 1, got {rounds}")
    if args.repeats < 1:
        raise ConfigError("--repeats", f"must be at least 1, got {args.repeats}")
    precisions = _precisions(args.precision)
    env = environment(device)
    env["quick"] = bool(args.quick)
    print(f"p2pfl bench{' --quick' if args.quick else ''}: {env['date']}")
    print(f"device {env['device']} ({env['device_name']}), {env['threads']} threads, "
          f"torch {env['torch']}")
    print(f"round = local phase ({LOCAL_STEPS} steps of batch {BATCH_SIZE}, momentum {MOMENTUM}; "
          f"SAM rho {SAM_RHO}) + Push-Sum mixing{'; vectorized compiled' if args.compile else ''}"
          f"; median of {rounds} timed round(s) after 1 "
          "warm-up; matmul = matmul GFLOP/s in the row's precision, measured just before the "
          "workload; % products = of the round's batched products alone (its ceiling at these "
          "sizes; n/a for convolutions); MiB/node = peak MiB / N; the loop runs float32; "
          "meaningful only on an otherwise idle machine; "
          f"! = a side's rounds ranged over more than {SPREAD_FLAG}x: the machine's speed moved, "
          "read that row's ratio with care")
    if chosen:
        print(table_header(), flush=True)
    data: dict[str, tuple[Dataset, str]] = {}
    results = []
    for workload in chosen:
        if workload.data not in data:
            data[workload.data] = load_workload_data(workload.data, args.quick)
        dataset, label = data[workload.data]
        repeated = []
        for repeat in range(args.repeats):
            matmul = {p: matmul_gflops(device, dtype=PRECISIONS[p])  # the machine as it is now
                      for p in precisions}
            result = run_workload(workload, dataset, label, str(device), rounds, matmul,
                                  compile=args.compile, precisions=precisions,
                                  bf16_auto=args.precision.strip() == "auto")
            result["mixing"] = mixing_rate(workload, result["num_params"], device)
            result.update(env, repeat=repeat)
            repeated.append(result)
            print("\n".join(table_rows(result)), flush=True)
        results += repeated
        if args.repeats > 1:
            print("\n".join(repeat_lines(repeated)), flush=True)
    if ragged:
        if "fashion_mnist" not in data:
            data["fashion_mnist"] = load_workload_data("fashion_mnist", args.quick)
        ragged_result = run_ragged(data["fashion_mnist"][0], str(device), rounds)
        ragged_result.update(env)
        print("\n".join(ragged_lines(ragged_result)), flush=True)
    if stacking:
        stacked_result = run_stacked_bench(str(device), args.quick) | env
        print("\n".join(stacked_lines(stacked_result)), flush=True)
    if scaling:
        sizes = {"linear": QUICK_NODES, "consensus": QUICK_NODES} if args.quick else {}
        scaling_result = run_scaling(str(device), rounds=rounds, quick=args.quick,
                                     **sizes) | env
    print()
    for result in results:
        print(mixing_line(result))
    overlap = overlap_cost(100, PARAMS_MLP, OUT_DEGREE, device)
    print(overlap_line(overlap))
    if ragged:
        results.append(ragged_result)
    if stacking:
        results.append(stacked_result)
    if scaling:
        results.append(scaling_result)
    if args.json_out:
        write_json_atomic(Path(args.json_out), results)
    for result in results:
        print(json.dumps(result, sort_keys=True, default=str))
    print(json.dumps({"overlap": overlap}, sort_keys=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.suite ARGS` = `p2pfl bench ARGS` (one-line errors, exit 2).

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status.
    """
    try:
        return run_suite(parser().parse_args(sys.argv[1:] if argv is None else argv))
    except ConfigError as err:
        print(f"p2pfl: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
