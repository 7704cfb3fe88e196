"""The convergence-vs-topology study: one run per topology, same seed and data, one table.

``run_study(cfg, ["ring", "exponential", "complete"], "runs/study")`` runs ``p2pfl.run`` once
per topology (overriding only ``topology.*``), measures each topology with `summary` on the
mixing matrix the algorithm actually uses, and writes into the output directory:

- ``<label>/``: the run directory of each topology;
- ``study.csv``, ``study.json``: one row per topology (diameter, spectral gap, final accuracy,
  rounds to the target accuracy, ...);
- ``convergence_vs_topology.png/.pdf`` and ``curves.png/.pdf``.

An unknown topology or parameter stops the study before its first run. A topology the algorithm
cannot use (wrong mixing, not connected) is skipped with a one-line message; a diverging run is
recorded as such; neither stops the study.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.plots import plot_convergence_vs_topology
from analysis.summary import summary

COLUMNS = ("label", "status", "diameter", "spectral_gap", "min_B", "final_acc", "best_acc",
           "rounds_to_target", "seconds_to_target", "rounds", "run_dir")
DEFAULT_RELATIVE_TARGET = 0.9  # target accuracy = 90 % of the best final accuracy of the study


@dataclass
class StudyResult:
    rows: list[dict[str, Any]]
    target: float | None
    files: list[Path] = field(default_factory=list)


def parse_topology(spec: str) -> tuple[str, dict[str, Any]]:
    """'exponential:directed=false:base=3' -> (label, {'topology.name': ..., ...})."""
    from p2pfl.config import ConfigError, parse_overrides

    name, *options = spec.strip().split(":")
    if not name:
        raise ConfigError("--topologies", f"empty topology name in {spec!r}")
    overrides = {"topology.name": name}
    for option in options:
        overrides.update(parse_overrides([f"topology.{option}"]))
    return spec.strip(), overrides


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", text).strip("-").lower() or "run"


def rounds_to_target(history: list[dict[str, Any]], target: float,
                     key: str = "round") -> Any:
    """First round whose average-model test accuracy reaches `target` (`key` = "sim_time_s":
    its simulated time, in runs with [network] enabled), else None."""
    return next((r.get(key) for r in history
                 if r.get("test_acc") is not None and r["test_acc"] >= target), None)


def _measure(cfg: Any) -> dict[str, Any]:
    """Topology metrics of the schedule the engine will build for cfg (ConfigError if unusable)."""
    from algorithms import ALGORITHMS
    from p2pfl.engine import check_topology, schedule_for

    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)
    schedule = schedule_for(cfg, algorithm)
    check_topology(algorithm, schedule, cfg.rounds)
    mixing = None if algorithm.mixing == "server" else algorithm.mixing
    return summary(schedule, mixing=mixing)


def run_study(cfg: Any, topologies: Sequence[str], out_dir: str | Path, *,
              target: float | None = None, progress: bool = False,
              echo: Callable[[str], None] = print) -> StudyResult:
    """Run cfg once per topology spec ('name' or 'name:key=value:...') into out_dir/<label>.

    target: test accuracy for 'rounds to target'; default 90 % of the best final accuracy.
    """
    from p2pfl.config import ConfigError, with_overrides
    from p2pfl.engine import DivergenceError, run

    if cfg.compare:
        raise ConfigError("compare", "a study runs one experiment per topology; remove the "
                          "[[compare]] tables from its config")
    if not topologies:
        raise ConfigError("--topologies", "give at least one topology")
    planned = []
    for spec in topologies:  # a name or parameter that is wrong stops the study before a run
        try:
            label, overrides = parse_topology(spec)
            planned.append((spec, label, with_overrides(cfg, overrides)))
        except ValueError as err:  # ConfigError is one
            raise ConfigError("--topologies", f"{spec.strip()!r}: {err}") from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    histories: dict[str, list[dict[str, Any]]] = {}
    for spec, label, cfg_t in planned:
        row: dict[str, Any] = {"label": spec.strip(), "status": "ok"}
        try:
            metrics = _measure(cfg_t)
        except (ConfigError, ValueError) as err:
            row["status"] = f"skipped: {err}"
            echo(f"study: skipping {spec!r}: {err}")
            rows.append(row)
            continue
        row.update({k: metrics.get(k) for k in ("diameter", "spectral_gap", "min_B")})
        row["metrics"] = metrics
        run_dir = out / _slug(label)
        row["run_dir"] = str(run_dir)
        try:
            history = run(cfg_t, run_dir, progress=progress, label=label)
        except DivergenceError as err:
            row["status"] = f"diverged: {err}"
            echo(f"study: {label!r} diverged: {err}")
            rows.append(row)
            continue
        except ConfigError as err:
            row["status"] = f"skipped: {err}"
            echo(f"study: skipping {label!r}: {err}")
            rows.append(row)
            continue
        accs = [r["test_acc"] for r in history if r.get("test_acc") is not None]
        row.update(final_acc=accs[-1], best_acc=max(accs), rounds=len(history))
        histories[label] = history
        rows.append(row)
    done = [r for r in rows if r["status"] == "ok"]
    if target is None and done:
        target = round(DEFAULT_RELATIVE_TARGET * max(r["final_acc"] for r in done), 4)
    for r in done:
        r["rounds_to_target"] = rounds_to_target(histories[r["label"]], target)
        r["seconds_to_target"] = rounds_to_target(histories[r["label"]], target, "sim_time_s")
    result = StudyResult(rows, target)
    result.files += _write(out, cfg, result, histories)
    return result


def _write(out: Path, cfg: Any, result: StudyResult,
           histories: dict[str, list[dict[str, Any]]]) -> list[Path]:
    from p2pfl.plots import plot_histories
    from p2pfl.results import write_json_atomic

    files = [out / "study.csv", out / "study.json"]
    with open(files[0], "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(result.rows)
    write_json_atomic(files[1], {"target_acc": result.target, "algorithm": cfg.algorithm.name,
                                 "rows": [_jsonable(r) for r in result.rows]})
    done = [r for r in result.rows if r["status"] == "ok"]
    if done:
        d = cfg.data
        title = (f"{cfg.algorithm.name} on {d.name}, {d.num_nodes} nodes, {cfg.rounds} rounds")
        files += plot_convergence_vs_topology(done, out / "convergence_vs_topology",
                                              result.target, title)
        files += plot_histories(histories, out / "curves", title)
        if all(any("sim_time_s" in r for r in h) for h in histories.values()):
            files += plot_histories(histories, out / "curves_time", title, x="time")
    return files


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    """math.inf -> 'inf' (JSON has no infinity)."""
    def fix(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        return v
    return {k: fix(v) for k, v in row.items()}


def format_table(result: StudyResult) -> str:
    """The study table as aligned text (what `p2pfl study` prints)."""
    def cell(v: Any, key: str) -> str:
        if v is None:
            return "not reached" if key.endswith("_to_target") else "-"
        if isinstance(v, float):
            return "inf" if not math.isfinite(v) else f"{v:.4f}"
        return str(v)

    timed = any(r.get("seconds_to_target") is not None for r in result.rows)
    keys = ("label", "diameter", "spectral_gap", "min_B", "final_acc", "best_acc",
            "rounds_to_target", *(("seconds_to_target",) if timed else ()))
    target = f"{result.target:.4f}" if result.target else "target"
    heads = ("topology", "diameter", "spectral gap", "min B", "final acc", "best acc",
             f"rounds to {target}", *((f"sim s to {target}",) if timed else ()))
    body = [[cell(r.get(k), k) for k in keys] for r in result.rows if r["status"] == "ok"]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    lines += [f"{r['label']}: {r['status']}" for r in result.rows if r["status"] != "ok"]
    return "\n".join(lines)
