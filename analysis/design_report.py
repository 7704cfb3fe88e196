"""The design command's table and files: OUT/design.md (the ranked table with its evidence) and
OUT/design.json (everything the design found: predictions, rungs, evidence, compute)."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np


def mean_sd(values: list[float | None], scale: float = 1.0, digits: int = 3) -> str:
    """'mean ± sd' over the values that are not None, with how many of how many where some are
    None; '-' for none.

    Parameters
    ----------
    values : the values, None where missing.
    scale : each value times this (100: percent).
    digits : significant digits of the mean.

    Returns
    -------
    str.
    """
    have = [scale * v for v in values if v is not None]
    if not have:
        return "-"
    text = f"{np.mean(have):.{digits}g}"
    if len(have) > 1:
        text += f" ± {np.std(have, ddof=1):.2g}"
    if len(have) < len(values):
        text += f" ({len(have)} of {len(values)})"
    return text


def _seeds(count: int) -> str:
    return f"{count} seed" + ("s" if count != 1 else "")


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def table(result: Any) -> str:
    """The ranked table (Markdown), the pick's confidence and the compute.

    Parameters
    ----------
    result : a DesignResult.

    Returns
    -------
    str.
    """
    fastest = min(p.time_factor for p in result.predictions.values())
    rows = ["| rank | candidate | degree | n_eff | tau | s a round | predicted time (x best) | "
            "ran to (simulated s) | acc at that time % | s to target |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for i, label in enumerate(result.ranked):
        p, e = result.predictions[label], result.evidence[label]
        neff = {"simulated": f"{_number(p.effective_neighbors)} (sim.)",
                "median of the others": "- (median)"}.get(p.neff_note,
                                                         _number(p.effective_neighbors))
        rows.append(f"| {i + 1} | {label} | {p.degree} | {neff} | {_number(p.heterogeneity, 2)} | "
                    f"{p.round_s:.4g} | {p.time_factor / fastest:.2f} | {e.horizon_s:.4g} "
                    f"({_seeds(len(e.seeds))}) | {mean_sd(e.accuracy, 100)} | "
                    f"{mean_sd(e.seconds)} |")
    lines = [f"target: {result.target_note}", "", *rows, ""]
    v = result.versus
    if v["runner_up"] is not None:
        measure = (f"faster to {100 * v['target']:.2f} %" if v["target"] is not None
                   else "more accurate")
        lines.append(f"pick: {result.pick}; {measure} than {v['runner_up']} in "
                     f"{100 * v['confidence']:.0f} % of seed pairs ({_seeds(len(v['seeds']))} "
                     f"each, to {v['horizon_s']:.4g} simulated s)"
                     + ("; clearly best" if v["clearly_best"] else "; not clearly best"))
    else:
        lines.append(f"pick: {result.pick}")
    lines.append(f"compute: {result.rounds_run} rounds trained, "
                 f"{result.rounds_run / result.exhaustive_rounds:.0%} of the "
                 f"{result.exhaustive_rounds} of every candidate on every seed to "
                 f"{result.horizon_s:.4g} simulated s; {result.wall_s:.0f} s wall")
    lines += [f"left out: {label}: {why}" for label, why in result.skipped.items()]
    return "\n".join(lines)


def write_design(out: Path, result: Any) -> list[Path]:
    """Write OUT/design.md (`table`) and OUT/design.json.

    Parameters
    ----------
    out : the design's folder.
    result : a DesignResult.

    Returns
    -------
    list of the two files.
    """
    from p2pfl.report.results import atomic_file, write_json_atomic

    def finite(value: Any) -> Any:
        return None if isinstance(value, float) and not math.isfinite(value) else value

    md, js = out / "design.md", out / "design.json"
    with atomic_file(md) as f:
        f.write(table(result) + "\n")
    write_json_atomic(js, {
        "pick": result.pick, "ranked": result.ranked, "target": finite(result.target),
        "target_note": result.target_note, "horizon_s": result.horizon_s,
        "versus": result.versus,
        "rounds_run": result.rounds_run, "exhaustive_rounds": result.exhaustive_rounds,
        "wall_s": result.wall_s, "skipped": result.skipped,
        "predictions": {k: {f: finite(v) for f, v in asdict(p).items()}
                        for k, p in result.predictions.items()},
        "evidence": {k: asdict(e) for k, e in result.evidence.items()},
        "rungs": result.rungs,
        "files": [str(p) for p in result.files]})
    return [md, js]
