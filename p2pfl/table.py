"""Comparison tables of finished runs (any algorithm, centralized or not).

A run directory holds `metrics.jsonl`. Runs are grouped by label: the directory name, or the
parent's name for directories named `seed<k>` (the layout `p2pfl compare` writes), so the seeds
of one variant form one row. Per row: the mean over seeds of the mean `test_acc` of the last
`last` evaluated rounds (with its standard deviation over seeds), the best round, the rounds to
reach `target` and the communication.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from p2pfl.config import ConfigError
from p2pfl.results import read_metrics

_SEED_DIR = re.compile(r"seed\d+")


@dataclass(frozen=True)
class RunSummary:
    """The numbers of one run; accuracies are fractions in [0, 1]."""

    label: str
    rounds: int
    last_mean: float  # mean test_acc over the last `last` evaluated rounds
    best: float
    rounds_to_target: int | None  # first round with test_acc >= target; None if never
    seconds_to_target: float | None  # its simulated time (runs with [network]); None if never
    messages_per_round: float
    bytes_sent: float
    finished: bool  # the run wrote summary.json


def find_runs(paths: list[str | Path]) -> list[Path]:
    """Every run directory (holding metrics.jsonl) at or below `paths`, in sorted order."""
    found: list[Path] = []
    for path in map(Path, paths):
        if (path / "metrics.jsonl").exists():
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(p.parent for p in path.rglob("metrics.jsonl")))
        else:
            raise ConfigError("runs", f"{path} is not a directory")
    if not found:
        where = ", ".join(map(str, paths))
        raise ConfigError("runs", f"no run directory (metrics.jsonl) under {where}")
    return found


def run_label(run_dir: Path) -> str:
    return run_dir.parent.name if _SEED_DIR.fullmatch(run_dir.name) else run_dir.name


def summarize(run_dir: Path, last: int = 10, target: float | None = None) -> RunSummary:
    history = read_metrics(run_dir / "metrics.jsonl")
    evaluated = [r for r in history if "test_acc" in r]
    if not evaluated:
        raise ConfigError("runs", f"{run_dir} has no evaluated round (test_acc)")
    accs = [r["test_acc"] for r in evaluated]
    first = next((r for r in evaluated if target is not None and r["test_acc"] >= target), {})
    return RunSummary(run_label(run_dir), len(history), float(np.mean(accs[-last:])), max(accs),
                      first.get("round"), first.get("sim_time_s"),
                      float(np.mean([r["messages"] for r in history])),
                      float(sum(r["bytes_sent"] for r in history)),
                      (run_dir / "summary.json").exists())


def _pct(values: list[float]) -> str:
    mean = 100 * float(np.mean(values))
    return f"{mean:.2f} ± {100 * float(np.std(values)):.2f}" if len(values) > 1 else f"{mean:.2f}"


def comparison_table(runs: list[Path], last: int = 10, target: float | None = None) -> str:
    """A Markdown table, one row per label, best `last`-round mean first."""
    groups: dict[str, list[RunSummary]] = {}
    for run_dir in runs:
        s = summarize(run_dir, last, target)
        groups.setdefault(s.label, []).append(s)
    target_col = f"rounds to {100 * target:g}%" if target is not None else "rounds to target"
    timed = target is not None and any(s.seconds_to_target is not None
                                       for rows in groups.values() for s in rows)
    time_col = f" simulated s to {100 * target:g}% |" if timed else ""
    lines = [f"| run | seeds | rounds | test_acc % (mean of last {last}) | best % | {target_col} "
             f"|{time_col} messages/round | MB sent |",
             "|---|---|---|---|---|---|" + ("---|" if timed else "") + "---|---|"]
    order = sorted(groups, key=lambda k: -np.mean([s.last_mean for s in groups[k]]))
    for label in order:
        rows = groups[label]
        reached = [s.rounds_to_target for s in rows if s.rounds_to_target is not None]
        if target is None:
            to_target = "-"
        elif not reached:
            to_target = "not reached"
        else:
            to_target = f"{np.mean(reached):.1f}" + ("" if len(reached) == len(rows)
                                                     else f" ({len(reached)}/{len(rows)} runs)")
        seconds = [s.seconds_to_target for s in rows if s.seconds_to_target is not None]
        to_time = (f" {np.mean(seconds):.3g} |" if seconds else " not reached |") if timed else ""
        rounds = sorted({s.rounds for s in rows})
        unfinished = sum(not s.finished for s in rows)
        rounds_col = "-".join(map(str, rounds[::len(rounds) - 1 or 1])) + (
            f" ({unfinished} unfinished)" if unfinished else "")
        lines.append(f"| {label} | {len(rows)} | {rounds_col} | "
                     f"{_pct([s.last_mean for s in rows])} | {_pct([s.best for s in rows])} | "
                     f"{to_target} |{to_time} "
                     f"{np.mean([s.messages_per_round for s in rows]):.0f} | "
                     f"{np.mean([s.bytes_sent for s in rows]) / 1e6:.1f} |")
    return "\n".join(lines) + "\n"


def parse_target(text: str | None) -> float | None:
    """'0.8' or '80' (percent) -> 0.8."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ConfigError("--target", f"must be a number, got {text!r}") from None
    value = value / 100 if value > 1 else value
    if not 0 < value <= 1 or math.isnan(value):
        raise ConfigError("--target", f"must be an accuracy in (0, 1] or (0, 100], got {text!r}")
    return value
