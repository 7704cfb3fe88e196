"""Where a benchmark round's time goes: `python -m bench.profile [--only mlp-100] [--solver sgd]
[--rounds 3] [--device cpu] [--top 12]`.

Runs the workload's round (bench.workloads) under torch.profiler after one warm-up round and
sorts the operators' own time into parts: the batched products of the local phase (bmm,
baddbmm), the mixing (addmm and mm: an mlp round's only plain matrix products, the sparse and
the dense mix), the step's elementwise passes, gathering the minibatches (index_select), the loss,
allocation, and the rest of the operators. The rounds are first timed without the profiler
(whose own cost is large for many small operators); what the operators' times leave of that
plain round is Python, dispatch and the rest. Prints ms per round and the share of the plain
round for each part, then the top operators.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict

from torch.profiler import ProfilerActivity, profile

from bench.runner import timed_round
from bench.workloads import WORKLOADS, load_workload_data, workload_config
from p2pfl.engine import build

PARTS = {
    "products (bmm, baddbmm)": ("aten::bmm", "aten::baddbmm"),
    "mixing (addmm, mm)": ("aten::addmm", "aten::mm"),
    "step (elementwise passes)": ("aten::addcmul_", "aten::add_", "aten::mul_", "aten::sub_",
                                  "aten::lerp_", "aten::div_", "aten::addcdiv_"),
    "minibatch gathering": ("aten::index_select", "aten::index", "aten::take"),
    "loss (softmax, pick)": ("aten::_log_softmax", "aten::gather", "aten::scatter_add_",
                             "aten::exp_", "aten::mean", "aten::neg_"),
    "allocation": ("aten::empty", "aten::empty_strided", "aten::zeros", "aten::zero_",
                   "aten::fill_", "aten::resize_"),
}


def part_of(name: str) -> str:
    """The part an operator's time belongs to.

    Parameters
    ----------
    name : the operator's name.

    Returns
    -------
    str, a key of PARTS, or "other operators".
    """
    return next((part for part, ops in PARTS.items() if name in ops), "other operators")


def breakdown(workload_name: str, solver: str, rounds: int, device: str, top: int) -> list[str]:
    """Where a benchmark round's time goes.

    Parameters
    ----------
    workload_name : a workload's name.
    solver : "sgd" or "sam".
    rounds : rounds profiled.
    device : "cpu" or "cuda".
    top : operators listed.

    Returns
    -------
    list of the printed lines: each part's ms per round and share, then the `top` operators.
    """
    workload = next(w for w in WORKLOADS if w.name == workload_name)
    dataset, _ = load_workload_data(workload.data)
    cfg = workload_config(workload, solver, "vectorized", workload.num_nodes, device,
                          dataset.name)
    ctx, algorithm = build(cfg, dataset)
    timed_round(ctx, algorithm, 0)
    plain = 1e3 * statistics.median(timed_round(ctx, algorithm, t) for t in range(1, rounds + 1))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        for t in range(rounds + 1, 2 * rounds + 1):
            timed_round(ctx, algorithm, t)
    profiled = (time.perf_counter() - start) / rounds * 1e3
    parts: dict[str, float] = defaultdict(float)
    ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    for event in ops:
        parts[part_of(event.key)] += event.self_cpu_time_total / 1e3 / rounds
    covered = sum(parts.values())
    parts["Python, dispatch and the rest"] = max(plain - covered, 0.0)
    wall = max(plain, covered)
    lines = [f"{workload_name} {solver} on {device}: {plain:.1f} ms a round (median of {rounds}), "
             f"{profiled:.1f} ms under the profiler; the operators' own times are the "
             "profiler's, the rest is the plain round's time they leave",
             f"{'part':<40} {'ms/round':>9} {'share':>6}"]
    lines += [f"{part:<40} {ms:>9.1f} {100 * ms / wall:>5.1f}%"
              for part, ms in sorted(parts.items(), key=lambda kv: -kv[1])]
    lines.append(f"\n{'operator':<40} {'ms/round':>9} {'calls/round':>11}")
    lines += [f"{e.key:<40} {e.self_cpu_time_total / 1e3 / rounds:>9.1f} "
              f"{e.count / rounds:>11.0f}" for e in ops[:top]]
    return lines


def main(argv: list[str] | None = None) -> int:
    """The `python -m bench.profile` command: where a benchmark round's time goes.

    Parameters
    ----------
    argv : the arguments (default: sys.argv[1:]).

    Returns
    -------
    int, the exit status: 0, or 2 after a one-line error.
    """
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("--only", default="mlp-100", help="one workload (default mlp-100)")
    parser.add_argument("--solver", default="sgd", choices=("sgd", "sam"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        print(f"python -m bench.profile: error: --rounds must be at least 1, got {args.rounds}",
              file=sys.stderr)
        return 2
    if args.only not in {w.name for w in WORKLOADS}:
        print(f"python -m bench.profile: error: --only: unknown workload {args.only!r}; allowed: "
              f"{', '.join(w.name for w in WORKLOADS)}", file=sys.stderr)
        return 2
    print("\n".join(breakdown(args.only, args.solver, args.rounds, args.device, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
