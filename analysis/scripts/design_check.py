"""The design command against an exhaustive study of the same candidates
(docs/topology-research.md, section 7).

    python -m analysis.scripts.design_check CONFIG --out runs/design_check/NAME \\
        [--budget 4] [--seeds 0,1,2] [--set key=value ...]

Runs `p2pfl design` (analysis.design) into OUT/design, then every candidate it did not leave
out (over the budget, or not usable by the algorithm) on every seed to the design's horizon into
OUT/exhaustive (`analysis.study.run`, each candidate its own rounds, as the design's last rung),
and prints a Markdown table: each candidate's simulated seconds to the design's target in the
exhaustive study (mean over the seeds that reached it), the design's rank, then the exhaustive
best, the design's pick and how much slower it is, and the compute of each (rounds trained and
wall seconds). A rerun continues what is there (the wall times then count only the new runs).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np


def exhaustive(cfg: Any, result: Any, out: Path, seeds: list[int]) -> dict[str, list[Any]]:
    """Every candidate of the design on every seed to its horizon: seconds to its target.

    Parameters
    ----------
    cfg : the experiment's config.
    result : the DesignResult.
    out : the study's folder.
    seeds : the seeds.

    Returns
    -------
    dict {label: [seconds to the target or None, per seed]}, and the study's rounds under
    the key "rounds_run" ([int]).
    """
    from analysis.design import fewest_rounds
    from analysis.halving import rounds_to, seconds_to
    from analysis.study import run as run_study

    cells = {label: replace(entry, overrides={**entry.overrides, "rounds": max(
        fewest_rounds(cfg, result.predictions[label]),
        rounds_to(result.horizon_s, result.predictions[label].fastest_round_s))})
        for label, entry in result.entries.items()}
    study = run_study(cfg, cells, out, seeds=seeds, target=result.target, progress=True)
    found: dict[str, list[Any]] = {
        label: [seconds_to(study.histories.get((cfg.algorithm.name, label, s), []),
                           result.target, result.horizon_s) for s in seeds] for label in cells}
    found["rounds_run"] = [sum(max((r["round"] for r in h), default=0)
                               for h in study.histories.values())]
    return found


def _mean(values: list[float | None]) -> tuple[float, str]:
    """(mean over the reached, inf if none; its text with how many reached)."""
    from analysis.design_report import mean_sd

    have = [v for v in values if v is not None]
    return (float(np.mean(have)) if have else math.inf,
            mean_sd(values) if have else "not reached")


def main() -> None:
    """Run the design and the exhaustive study, then print the comparison."""
    from analysis.design import design_topology
    from analysis.design_report import table
    from p2pfl.config import load_config, parse_overrides

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget", type=int)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    cfg = load_config(args.config, parse_overrides(args.overrides))
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out)
    began = time.perf_counter()
    result = design_topology(cfg, out / "design", budget=args.budget, seeds=seeds, progress=True)
    design_s = time.perf_counter() - began
    print(table(result))
    began = time.perf_counter()
    found = exhaustive(cfg, result, out / "exhaustive", seeds)
    exhaustive_s = time.perf_counter() - began
    rounds = found.pop("rounds_run")[0]
    # reached on more seeds first, then fewer mean seconds (the design's own order)
    means = {k: _mean(v) for k, v in found.items()}
    best_first = sorted(found, key=lambda k: (-sum(v is not None for v in found[k]),
                                              means[k][0]))
    print(f"\ntarget: {result.target_note}; horizon {result.horizon_s:.4g} simulated s\n")
    print("| candidate | exhaustive: s to target | design rank |")
    print("|---|---|---|")
    for label in best_first:
        rank = result.ranked.index(label) + 1 if label in result.ranked else "not run"
        print(f"| {label} | {means[label][1]} | {rank} |")
    best, pick = best_first[0], result.pick
    print(f"\nexhaustive best: {best} ({means[best][0]:.3g} s); design's pick: {pick} "
          f"({means[pick][0]:.3g} s in the exhaustive study, "
          f"{100 * (means[pick][0] / means[best][0] - 1):+.1f} %)")
    print(f"compute: design {result.rounds_run} rounds, {design_s:.0f} s wall; exhaustive "
          f"{rounds} rounds, {exhaustive_s:.0f} s wall; design / exhaustive "
          f"{result.rounds_run / rounds:.2f} in rounds")


if __name__ == "__main__":
    main()
