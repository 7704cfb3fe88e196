"""The numbers of one run for a comparison table: its final (or last k evaluations') accuracy,
the honest nodes' where it had attackers, the best, the first reach of a target (round, bytes,
simulated seconds), its final consensus distance, the communication, and whether it finished or
diverged (and where).

A run directory holds `metrics.jsonl` (and, written by p2pfl, `config.json`; `diverged.json`
where it diverged). Its label is the directory name, or the parent's name for directories named
`seed<k>` (the layout `p2pfl compare` writes), so that the seeds of one variant form one row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from p2pfl.config import ConfigError
from p2pfl.report.results import DIVERGED, HONEST_OF, METRICS, read_divergence, read_metrics
from p2pfl.report.runs import read_config, variant_dir

LOCAL = ("test_acc_local_mean", "test_acc_local_min")  # every node's own model: mean, worst
HONEST = tuple(HONEST_OF[key] for key in LOCAL)  # the honest nodes' own models
BUILT_IN = (*LOCAL, *HONEST)  # test_acc_* that are no extra column


@dataclass(frozen=True)
class RunSummary:
    """The numbers of one run; accuracies are fractions in [0, 1], None where the run has no
    evaluated round (it diverged, or is still starting)."""

    label: str
    rounds: int  # records in metrics.jsonl: rounds, or an asynchronous run's clock marks
    evals_averaged: int  # k = min(last, evaluated rounds)
    last_mean: float | None  # test_acc: the final evaluation, or the mean of the last k
    best: float | None
    rounds_to_target: int | None  # first round with test_acc >= target; None if never
    seconds_to_target: float | None  # its simulated time (runs with [network]); None if never
    bytes_to_target: float | None  # bytes sent up to and including that round; None if never
    messages_per_round: float
    bytes_sent: float
    finished: bool  # the run wrote summary.json
    extra: dict[str, float] = field(default_factory=dict)  # other test_acc_*: as last_mean
    averaged: tuple[int, int] | None = None  # first and last round of the k evaluations
    diverged_at: int | None = None  # the round that diverged (diverged.json); None if none did
    honest: tuple[float, float] | None = None  # honest nodes' models: (mean, worst), as last_mean
    byzantine: bool = False  # the run logged honest metrics ([byzantine] nodes)
    consensus: float | None = None  # final consensus distance (honest nodes' with attackers)
    algorithm: str | None = None  # config.json's algorithm name


Rows = list[RunSummary]  # the runs of one row of the table


def find_runs(paths: list[str | Path]) -> list[Path]:
    """Every run directory (`is_run`) at or below `paths`, in sorted order.

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
        if is_run(path):
            found.append(path)
        elif path.is_dir():
            found.extend(sorted({p.parent for name in (METRICS, DIVERGED)
                                 for p in path.rglob(name)}))
        else:
            raise ConfigError("runs", f"{path} is not a directory")
    if not found:
        where = ", ".join(map(str, paths))
        raise ConfigError("runs", f"no run directory (metrics.jsonl) under {where}")
    return found


def is_run(path: Path) -> bool:
    """Whether `path` holds a run: its metrics, or the record of a run that diverged before its
    first round ended.

    Parameters
    ----------
    path : a directory.

    Returns
    -------
    bool.
    """
    return (path / METRICS).exists() or (path / DIVERGED).exists()


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
    """The mean of `key` over the last `last` records that hold it (NaN where none does)."""
    values = [r[key] for r in history if key in r][-last:]
    return float(np.mean(values)) if values else math.nan


def _honest(evaluated: list[dict[str, Any]], last: int) -> tuple[tuple[float, float], bool]:
    """(mean, worst) accuracy of the honest nodes' own models, and whether the run had
    attackers: its honest metrics, or, in a run without any, every node's own models (then all
    nodes are honest)."""
    for keys, byzantine in ((HONEST, True), (LOCAL, False)):
        if any(keys[0] in r for r in evaluated):
            mean, worst = (_last_mean(evaluated, key, last) for key in keys)
            return (mean, worst), byzantine
    return (math.nan, math.nan), False


def summarize(run_dir: Path, last: int = 1, target: float | None = None) -> RunSummary:
    """The numbers of one run.

    Parameters
    ----------
    run_dir : the run directory.
    last : k, the evaluated rounds averaged (1: the final evaluation).
    target : accuracy in (0, 1] whose first reach is reported, or None.

    Returns
    -------
    RunSummary, accuracies as fractions in [0, 1] (None for a run without an evaluated round).

    Raises
    ------
    ConfigError
        as `read_metrics`.
    """
    history = read_metrics(run_dir / METRICS) if (run_dir / METRICS).exists() else []
    evaluated = [r for r in history if "test_acc" in r]
    divergence = read_divergence(run_dir)
    config = read_config(run_dir) or {}
    algorithm = (config.get("algorithm") or {}).get("name")
    common = {"label": run_label(run_dir), "rounds": len(history),
              "messages_per_round": float(np.mean([r["messages"] for r in history]))
              if history else 0.0,
              "bytes_sent": float(sum(r["bytes_sent"] for r in history)),
              "finished": (run_dir / "summary.json").exists(),
              "diverged_at": divergence["round"] if divergence else None,
              "algorithm": algorithm if isinstance(algorithm, str) else None}
    if not evaluated:
        return RunSummary(evals_averaged=0, last_mean=None, best=None, rounds_to_target=None,
                          seconds_to_target=None, bytes_to_target=None, **common)
    accs = [r["test_acc"] for r in evaluated]
    first = next((r for r in evaluated if target is not None and r["test_acc"] >= target), {})
    sent = (float(sum(r["bytes_sent"] for r in history if r["round"] <= first["round"]))
            if first else None)
    k = min(last, len(accs))
    honest, byzantine = _honest(evaluated, last)
    consensus_key = "consensus_dist_honest" if byzantine else "consensus_dist"
    consensus = [r[consensus_key] for r in evaluated if consensus_key in r]
    return RunSummary(evals_averaged=k, last_mean=_last_mean(evaluated, "test_acc", last),
                      best=max(accs), rounds_to_target=first.get("round"),
                      seconds_to_target=first.get("sim_time_s"), bytes_to_target=sent,
                      extra={key: _last_mean(history, key, last)
                             for key in extra_metrics(history)},
                      averaged=(evaluated[-k]["round"], evaluated[-1]["round"]),
                      honest=honest, byzantine=byzantine,
                      consensus=consensus[-1] if consensus else None, **common)
