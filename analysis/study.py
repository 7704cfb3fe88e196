"""The topology study: one experiment over topologies, sweeps and seeds, related to diameter and
spectral gap.

    result = run_study(cfg, ["ring", "complete"], "runs/study", seeds=[0, 1, 2],
                       sweeps=[Sweep("random_out", "k", [1, 2, 4], "random_out")])

Each (topology, seed) runs `p2pfl.run` into OUT/<label>/seed<k>/ with only `topology.*` (and, in
a sweep over the number of nodes, `data.num_nodes`) and the seed changed; each is measured with
`summary` on the schedule and mixing the algorithm actually uses (a time-varying schedule by its
window-union diameter and per-round rate). A rerun keeps the finished runs (one with more rounds
counts up to the study's rounds), resumes the interrupted ones and extends shorter ones. Writes,
into OUT (analysis.study_results, analysis.study_plots): study.csv (one row per topology and
seed), study_mean.csv (one per topology: mean and sd over seeds), study.json, and the figures.

Every run is planned before the first one starts: an unknown name, a wrong parameter or object,
or a folder that holds a run of another config or object stops the study. A topology the
algorithm cannot use (wrong mixing, not connected) is skipped with a one-line message, a
diverging run is recorded as diverged; neither stops the study.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.study_spec import Entry, Sweep, study_entries
from analysis.summary import summary

History = list[dict[str, Any]]
DEFAULT_RELATIVE_TARGET = 0.9  # target accuracy = 90 % of the best mean final accuracy


@dataclass
class StudyResult:
    """rows: one per (topology, seed); means: one per topology (analysis.study_results);
    histories: (label, seed) -> per-round records of the runs that finished or diverged."""

    rows: list[dict[str, Any]]
    means: list[dict[str, Any]]
    target: float | None
    histories: dict[tuple[str, int], History] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def rounds_to_target(history: History, target: float, key: str = "round") -> Any:
    """First round whose average-model test accuracy reaches `target` (`key` = "sim_time_s":
    its simulated time, in runs with [network] enabled), else None."""
    return next((r.get(key) for r in history
                 if r.get("test_acc") is not None and r["test_acc"] >= target), None)


@dataclass
class Planned:
    """One (topology, seed) of the study: its config and folder, and its topology metrics (None,
    with `skipped` saying why, if the algorithm cannot use the topology)."""

    entry: Entry
    seed: int
    cfg: Any
    run_dir: Path
    metrics: dict[str, Any] | None
    skipped: str = ""


def _schedule(cfg: Any, algorithm: Any, obj: object | None) -> Any:
    """The schedule the run of cfg builds (on `obj`, if given, checked as `p2pfl.run` checks
    it); a wrong parameter or object is a ConfigError."""
    from p2pfl.engine import schedule_for
    from p2pfl.objects.topology import resolve_topology

    if obj is None:
        return schedule_for(cfg, algorithm)
    return resolve_topology(cfg, Path(), False, obj)[1]


def _measure(cfg: Any, obj: object | None) -> dict[str, Any] | str:
    """Topology metrics of the schedule and mixing the run of cfg uses, or why the algorithm
    cannot use it (not connected, wrong mixing)."""
    from algorithms import ALGORITHMS
    from p2pfl.config import ConfigError
    from p2pfl.engine import check_topology

    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)
    schedule = _schedule(cfg, algorithm, obj)
    mixing = None if algorithm.mixing == "server" else algorithm.mixing
    horizon = None if schedule.period is not None else min(cfg.rounds, 100)
    try:
        check_topology(algorithm, schedule, cfg.rounds)
        return summary(schedule, mixing=mixing, horizon=horizon)
    except (ConfigError, ValueError) as err:
        return str(err)


def _plan_one(entry: Entry, seed: int, cfg: Any, out: Path) -> Planned:
    """The run of `entry` with `seed`: its config, measured, and checked against what its folder
    holds (a run with another config or object is refused)."""
    from p2pfl.config import folder_name, with_overrides
    from p2pfl.engine.compare import check_same_run

    cfg = with_overrides(cfg, {**entry.overrides, "seed": seed})
    run_dir = out / folder_name(entry.label) / f"seed{seed}"
    metrics = _measure(cfg, entry.obj)
    if isinstance(metrics, str):
        return Planned(entry, seed, cfg, run_dir, None, metrics)
    check_same_run(run_dir, cfg, entry.obj)
    return Planned(entry, seed, cfg, run_dir, metrics)


def _plan(cfg: Any, entries: list[Entry], seeds: Sequence[int], out: Path) -> list[Planned]:
    """Every run of the study, in order; a wrong name, value or object, data that cannot be
    split as configured, or a folder that holds a run with another config, stops the study here,
    before the first run."""
    from p2pfl.config import ConfigError
    from p2pfl.engine.builder import check_variants

    if cfg.compare:
        raise ConfigError("compare", "a study runs one experiment per topology; remove the "
                          "[[compare]] tables from its config")
    planned = []
    for entry in entries:
        for seed in seeds:
            try:
                planned.append(_plan_one(entry, seed, cfg, out))
            except ConfigError as err:
                raise ConfigError(f"study {entry.label!r}: {err.field}", err.message) from None
    check_variants([(f"study {p.entry.label!r} (seed {p.seed}):", p.cfg) for p in planned
                    if p.metrics is not None], named_topology=False)
    return planned


def _history(run_dir: Path, rounds: int) -> History:
    """The metrics of the run in `run_dir` up to round `rounds` (a run kept from a study with more
    rounds counts as this study's), [] if it wrote none."""
    from p2pfl.report.results import METRICS, read_metrics

    path = run_dir / METRICS
    return [r for r in read_metrics(path) if r["round"] <= rounds] if path.exists() else []


def _run_one(run: Planned, progress: bool, echo: Callable[[str], None]
             ) -> tuple[dict[str, Any], History | None]:
    """The row of one (topology, seed) and its history (None if skipped)."""
    from p2pfl.engine import DivergenceError
    from p2pfl.engine import run as run_experiment
    from p2pfl.engine.compare import reusable

    entry, seed, cfg, run_dir = run.entry, run.seed, run.cfg, run.run_dir
    row: dict[str, Any] = {"label": entry.label, "sweep": entry.sweep, "vary": entry.vary,
                           "value": entry.value, "seed": seed, "status": "ok"}
    if run.metrics is None:
        row["status"] = f"skipped: {run.skipped}"
        return row, None
    row.update({k: run.metrics.get(k) for k in ("kind", "diameter", "spectral_gap", "min_B")})
    row["run_dir"] = str(run_dir)
    try:
        if not reusable(run_dir, cfg, entry.obj):
            run_experiment(cfg, run_dir, progress=progress, label=f"{entry.label} (seed {seed})",
                           resume=(run_dir / "config.json").exists(), topology=entry.obj)
    except DivergenceError as err:
        row["status"] = f"diverged: {err}"
        echo(f"study: {entry.label!r} (seed {seed}) diverged: {err}")
        return row, _history(run_dir, cfg.rounds)
    history = _history(run_dir, cfg.rounds)
    accs = [a for r in history if (a := r.get("test_acc")) is not None and math.isfinite(a)]
    row.update(final_acc=accs[-1] if accs else None, best_acc=max(accs, default=None),
               rounds=len(history))
    return row, history


def run_study(cfg: Any, topologies: Sequence[Any] | Mapping[str, Any], out_dir: str | Path, *,
              seeds: Sequence[int] | None = None, sweeps: Sequence[Sweep] = (),
              target: float | None = None, progress: bool = False,
              echo: Callable[[str], None] = print) -> StudyResult:
    """Run cfg for every topology, sweep value and seed into out_dir (see the module docstring).

    topologies: spec strings ('name' or 'name:key=value:...'), tables of [topology] fields, or
    {label: spec, table or topology object}. seeds: default [cfg.seed]. target: test accuracy
    for 'rounds to target'; default 90 % of the best mean final accuracy.
    """
    from analysis.study_results import means, write_study
    from analysis.study_spec import check_seeds
    from p2pfl.config import ConfigError

    entries = study_entries(topologies, sweeps)
    seeds = check_seeds(list(seeds), "seeds") if seeds is not None else [cfg.seed]
    out = Path(out_dir)
    planned = _plan(cfg, entries, seeds, out)
    for run in planned:
        if run.metrics is None:
            echo(f"study: skipping {run.entry.label!r} (seed {run.seed}): {run.skipped}")
    if all(run.metrics is None for run in planned):
        first = planned[0]
        raise ConfigError("study", f"no topology can run, all are skipped (first: "
                          f"{first.entry.label!r}: {first.skipped})")
    out.mkdir(parents=True, exist_ok=True)
    rows, histories = [], {}
    for run in planned:
        row, history = _run_one(run, progress, echo)
        rows.append(row)
        if history is not None:
            histories[(run.entry.label, run.seed)] = history
    mean_rows = means(rows)
    finals = [m["final_acc_mean"] for m in mean_rows if m["final_acc_mean"] is not None]
    if target is None and finals:
        best = max(finals)
        target = round(DEFAULT_RELATIVE_TARGET * best, 4)
    if target is not None:
        for row in rows:
            if row["status"] == "ok":
                history = histories[(row["label"], row["seed"])]
                row["rounds_to_target"] = rounds_to_target(history, target)
                row["seconds_to_target"] = rounds_to_target(history, target, "sim_time_s")
        mean_rows = means(rows)
    result = StudyResult(rows, mean_rows, target, histories)
    result.files += write_study(out, cfg, result)
    return result
