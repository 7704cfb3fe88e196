"""Comparison tables of finished runs (any algorithm, centralized or not).

A run directory holds `metrics.jsonl` (and, written by p2pfl, `config.json`). Runs are grouped
by label: the directory name, or the parent's name for directories named `seed<k>` (the layout
`p2pfl compare` writes), so the seeds of one variant form one row. Runs that share a label but
were run with configs that differ in more than the seed (and the fields a resume may change,
`RESUMABLE`) are not pooled: each config gets its own row, labelled by the fewest trailing path
parts that tell the folders apart ("a/ring", "b/ring").

Per row: the mean over seeds of the mean `test_acc` of the last k evaluated rounds, k =
min(`last`, evaluated rounds) (with its standard deviation over seeds), likewise for an
algorithm's own accuracies (`test_acc_*` keys, e.g. FedFSA's `test_acc_personal`), the best
round, the rounds to reach `target` and the communication.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from p2pfl.config import ConfigError
from p2pfl.config.diff import RESUMABLE, config_diff
from p2pfl.report.labels import separating_depth, suffix, unique_paths
from p2pfl.report.results import read_metrics

_SEED_DIR = re.compile(r"seed\d+")
POOLED = ("seed", *RESUMABLE)  # fields in which the runs of one row may differ
BUILT_IN = ("test_acc_local_mean", "test_acc_local_min")  # test_acc_* that are no extra column


@dataclass(frozen=True)
class RunSummary:
    """The numbers of one run; accuracies are fractions in [0, 1]."""

    label: str
    rounds: int
    evals_averaged: int  # k = min(last, evaluated rounds)
    last_mean: float  # mean test_acc over the last k evaluated rounds
    best: float
    rounds_to_target: int | None  # first round with test_acc >= target; None if never
    seconds_to_target: float | None  # its simulated time (runs with [network]); None if never
    bytes_to_target: float | None  # bytes sent up to and including that round; None if never
    messages_per_round: float
    bytes_sent: float
    finished: bool  # the run wrote summary.json
    extra: dict[str, float] = field(default_factory=dict)  # other test_acc_*: mean of last k


Rows = list[RunSummary]  # the runs of one row of the table


def find_runs(paths: list[str | Path]) -> list[Path]:
    """Every run directory (holding metrics.jsonl) at or below `paths`, in sorted order.

    Parameters
    ----------
    paths : run directories or folders holding them.

    Returns
    -------
    list of Path.

    Raises
    ------
    ConfigError
        naming runs for a path that is not a directory, or when no run is found.
    """
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


def variant_dir(run_dir: Path) -> Path:
    """The folder that names a run: its parent for a `seed<k>` directory, else itself.

    Parameters
    ----------
    run_dir : a run directory.

    Returns
    -------
    Path.
    """
    return run_dir.parent if _SEED_DIR.fullmatch(run_dir.name) else run_dir


def run_label(run_dir: Path) -> str:
    """The label of a run: the name of its `variant_dir`.

    Parameters
    ----------
    run_dir : a run directory.

    Returns
    -------
    str.
    """
    return variant_dir(Path(run_dir)).name


def extra_metrics(history: list[dict[str, Any]]) -> list[str]:
    """The accuracy keys beyond the built-in ones (`test_acc_*`, e.g. `test_acc_personal`).

    Parameters
    ----------
    history : the run's metrics records.

    Returns
    -------
    list of str, sorted.
    """
    return sorted({k for r in history for k in r
                   if k.startswith("test_acc_") and k not in BUILT_IN})


def _last_mean(history: list[dict[str, Any]], key: str, last: int) -> float:
    """The mean of `key` over the last `last` records that hold it."""
    return float(np.mean([r[key] for r in history if key in r][-last:]))


def summarize(run_dir: Path, last: int = 10, target: float | None = None) -> RunSummary:
    """The numbers of one run.

    Parameters
    ----------
    run_dir : the run directory.
    last : k, the evaluated rounds averaged for `last_mean`.
    target : accuracy in (0, 1] whose first reach is reported, or None.

    Returns
    -------
    RunSummary, accuracies as fractions in [0, 1].

    Raises
    ------
    ConfigError
        naming runs when the run has no evaluated round (and as `read_metrics`).
    """
    history = read_metrics(run_dir / "metrics.jsonl")
    evaluated = [r for r in history if "test_acc" in r]
    if not evaluated:
        raise ConfigError("runs", f"{run_dir} has no evaluated round (test_acc)")
    accs = [r["test_acc"] for r in evaluated]
    first = next((r for r in evaluated if target is not None and r["test_acc"] >= target), {})
    sent = (float(sum(r["bytes_sent"] for r in history if r["round"] <= first["round"]))
            if first else None)
    return RunSummary(run_label(run_dir), len(history), min(last, len(accs)),
                      _last_mean(evaluated, "test_acc", last), max(accs),
                      first.get("round"), first.get("sim_time_s"), sent,
                      float(np.mean([r["messages"] for r in history])),
                      float(sum(r["bytes_sent"] for r in history)),
                      (run_dir / "summary.json").exists(),
                      {k: _last_mean(history, k, last) for k in extra_metrics(history)})


def read_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's config.json as a dict.

    Parameters
    ----------
    run_dir : the run directory.

    Returns
    -------
    dict, or None for a directory without one.

    Raises
    ------
    ConfigError
        naming runs when the file is not a JSON object.
    """
    path = run_dir / "config.json"
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError("runs", f"{path} is not valid JSON: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError("runs", f"{path} holds a JSON {type(raw).__name__}, not a config")
    return raw


def experiment(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """A config without the fields in which runs of one experiment may differ (POOLED).

    Parameters
    ----------
    config : a config dict, or None.

    Returns
    -------
    dict (a copy), or None.
    """
    if config is None:
        return None
    out = copy.deepcopy(config)
    for name in POOLED:
        *parents, leaf = name.split(".")
        node = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return out


def split_by_config(runs: list[Path]) -> list[list[Path]]:
    """The runs in groups of equal experiment (config up to POOLED), in order of appearance.

    Parameters
    ----------
    runs : run directories.

    Returns
    -------
    list of groups (lists of Path).
    """
    groups: list[tuple[dict[str, Any] | None, list[Path]]] = []
    for run_dir in runs:
        key = experiment(read_config(run_dir))
        match = next((members for k, members in groups if k == key), None)
        if match is None:
            groups.append((key, [run_dir]))
        else:
            match.append(run_dir)
    return [members for _, members in groups]


def _differences(a: Path, b: Path) -> str:
    """The fields two runs' configs differ in (beyond POOLED), as one phrase."""
    old, new = experiment(read_config(a)), experiment(read_config(b))
    if old is None or new is None:
        return f"{(a if old is None else b).name} has no config.json"
    return ", ".join(config_diff(old, new))


def _shared_folder(groups: list[list[Path]]) -> tuple[Path, Path]:
    """Two runs of different groups whose folder (variant_dir) is the same."""
    home: dict[Path, tuple[int, Path]] = {}
    for i, group in enumerate(groups):
        for run_dir in group:
            home.setdefault(variant_dir(run_dir), (i, run_dir))
    return next((home[variant_dir(r)][1], r) for i, group in enumerate(groups) for r in group
                if home[variant_dir(r)][0] != i)


def _mixed_folder(groups: list[list[Path]]) -> ConfigError:
    """The error for a folder whose seed directories hold runs of different configs."""
    a, b = _shared_folder(groups)
    return ConfigError("runs", f"{a.parent} holds runs of different configs ({a.name} and "
                       f"{b.name} differ in {_differences(a, b)}); the seed folders of one "
                       "variant may differ only in the seed: move the others to their own folder")


def group_runs(runs: list[Path]) -> dict[str, list[Path]]:
    """The rows of the table.

    Runs that share a label pool when they differ only in POOLED fields; otherwise each config is
    one row, labelled by the fewest trailing path parts that tell the folders apart.

    Parameters
    ----------
    runs : run directories.

    Returns
    -------
    dict {label: run directories}.
    """
    by_label: dict[str, list[Path]] = {}
    for run_dir in runs:
        by_label.setdefault(run_label(run_dir), []).append(run_dir)
    rows: dict[str, list[Path]] = {}
    for label, members in by_label.items():
        groups = split_by_config(members) if len(members) > 1 else [members]
        if len(groups) == 1:
            rows[label] = members
            continue
        folders = [[variant_dir(r) for r in group] for group in groups]
        depth = separating_depth(folders)
        if depth is None:
            raise _mixed_folder(groups)
        for group, where in zip(groups, folders):
            rows[" + ".join(sorted({suffix(f, depth) for f in where}))] = group
    return rows


def _pct(values: list[float]) -> str:
    mean = 100 * float(np.mean(values))
    return f"{mean:.2f} ± {100 * float(np.std(values)):.2f}" if len(values) > 1 else f"{mean:.2f}"


def _span(values: list[int]) -> str:
    """'8', or '6-10' where the runs differ."""
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}-{high}"


def _rounds_cell(rows: Rows) -> str:
    unfinished = sum(not s.finished for s in rows)
    return _span([s.rounds for s in rows]) + (f" ({unfinished} unfinished)" if unfinished else "")


def _of_runs(found: int, rows: Rows) -> str:
    """' (2/3 runs)' where only some runs of a row count, else ''."""
    return "" if found == len(rows) else f" ({found}/{len(rows)} runs)"


def _extra_cell(rows: Rows, key: str) -> str:
    values = [s.extra[key] for s in rows if key in s.extra]
    return _pct(values) + _of_runs(len(values), rows) if values else "-"


def _target_cell(rows: Rows, target: float | None) -> str:
    if target is None:
        return "-"
    reached = [s.rounds_to_target for s in rows if s.rounds_to_target is not None]
    return f"{np.mean(reached):.1f}" + _of_runs(len(reached), rows) if reached else "not reached"


def _seconds_cell(rows: Rows) -> str:
    seconds = [s.seconds_to_target for s in rows if s.seconds_to_target is not None]
    return f"{np.mean(seconds):.3g}" + _of_runs(len(seconds), rows) if seconds else "not reached"


def _megabytes_cell(rows: Rows) -> str:
    sent = [s.bytes_to_target for s in rows if s.bytes_to_target is not None]
    return f"{np.mean(sent) / 1e6:.1f}" + _of_runs(len(sent), rows) if sent else "not reached"


def _columns(summaries: Rows, target: float | None) -> list[tuple[str, Callable[[Rows], str]]]:
    """The table's columns after the label: header and cell of a row's runs. The averaged k
    (evaluations) is in the accuracy header, or in a column k where the runs differ in it."""
    ks = {s.evals_averaged for s in summaries}
    k = f"{next(iter(ks))}" if len(ks) == 1 else "k"
    at = f"{100 * target:g}%" if target is not None else "target"
    columns: list[tuple[str, Callable[[Rows], str]]] = [
        ("seeds", lambda rows: str(len(rows))), ("rounds", _rounds_cell),
        (f"test_acc % (mean of last {k} evaluations)",
         lambda rows: _pct([s.last_mean for s in rows]))]
    if len(ks) > 1:
        columns.append(("k", lambda rows: _span([s.evals_averaged for s in rows])))
    columns += [(f"{key} %", partial(_extra_cell, key=key))
                for key in sorted({key for s in summaries for key in s.extra})]
    columns += [("best %", lambda rows: _pct([s.best for s in rows])),
                (f"rounds to {at}", partial(_target_cell, target=target))]
    if target is not None:
        columns.append((f"MB to {at}", _megabytes_cell))
    if target is not None and any(s.seconds_to_target is not None for s in summaries):
        columns.append((f"simulated s to {at}", _seconds_cell))
    return columns + [
        ("messages/round", lambda rows: f"{np.mean([s.messages_per_round for s in rows]):.0f}"),
        ("MB sent", lambda rows: f"{np.mean([s.bytes_sent for s in rows]) / 1e6:.1f}")]


def comparison_table(runs: list[Path], last: int = 10, target: float | None = None) -> str:
    """A Markdown table, one row per label (`group_runs`), best mean of the last k first.

    Parameters
    ----------
    runs : run directories.
    last : k, the evaluated rounds averaged.
    target : accuracy in (0, 1] to reach, or None (no target columns).

    Returns
    -------
    str, the table's lines.
    """
    groups = {label: [summarize(r, last, target) for r in members]
              for label, members in group_runs(unique_paths(runs)).items()}
    columns = _columns([s for rows in groups.values() for s in rows], target)
    lines = ["| run | " + " | ".join(header for header, _ in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for label in sorted(groups, key=lambda k: -np.mean([s.last_mean for s in groups[k]])):
        cells = [cell(groups[label]) for _, cell in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parse_target(text: str | None) -> float | None:
    """A target accuracy from the command line.

    Parameters
    ----------
    text : '0.8' or '80' (percent), or None.

    Returns
    -------
    float in (0, 1] (0.8), or None.

    Raises
    ------
    ConfigError
        naming --target for anything but an accuracy in (0, 1] or (0, 100].
    """
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
