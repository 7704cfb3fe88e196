"""The topology study: one experiment over topologies, sweeps and seeds, related to diameter and
spectral gap.

    result = run_study(cfg, ["ring", "complete"], "runs/study", seeds=[0, 1, 2],
                       sweeps=[Sweep("random_out", "k", [1, 2, 4], "random_out")])

Each (topology, seed) runs `p2pfl.run` into OUT/<label>/seed<k>/ with only `topology.*` (and, in
a sweep over the number of nodes, `data.num_nodes`) and the seed changed; each is measured with
`summary` on the schedule and mixing the algorithm actually uses (a time-varying schedule by its
window-union diameter and per-round rate). A rerun keeps the finished runs (refusing one run with
another config) and resumes the interrupted ones. Writes, into OUT (analysis.study_results,
analysis.study_plots): study.csv (one row per topology and seed), study_mean.csv (one per
topology: mean and sd over seeds), study.json, and the figures.

Every topology is checked before the first run: an unknown name or parameter stops the study. A
topology the algorithm cannot use (wrong mixing, not connected) is skipped with a one-line
message, a diverging run is recorded as diverged; neither stops the study.
"""

from __future__ import annotations

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


def _measure(cfg: Any, obj: object | None) -> dict[str, Any]:
    """Topology metrics of the schedule the engine will build for cfg, or of the object
    (ConfigError if the algorithm cannot use it)."""
    import topologies as T
    from algorithms import ALGORITHMS
    from p2pfl.config import ConfigError
    from p2pfl.engine import check_topology, schedule_for

    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)
    if obj is None:
        schedule = schedule_for(cfg, algorithm)
    else:
        try:
            schedule = T.as_schedule(obj)
        except (TypeError, ValueError) as err:
            raise ConfigError("topology", str(err)) from None
        if schedule.n != cfg.data.num_nodes:
            raise ConfigError("topology", f"the topology has {schedule.n} nodes, "
                              f"data.num_nodes is {cfg.data.num_nodes}")
    check_topology(algorithm, schedule, cfg.rounds)
    mixing = None if algorithm.mixing == "server" else algorithm.mixing
    horizon = None if schedule.period is not None else min(cfg.rounds, 100)
    return summary(schedule, mixing=mixing, horizon=horizon)


def _plan(cfg: Any, entries: list[Entry], seeds: Sequence[int]) -> list[tuple[Entry, int, Any]]:
    """(entry, seed, config) of every run; a wrong name or value stops the study here."""
    from p2pfl.config import ConfigError, with_overrides

    if cfg.compare:
        raise ConfigError("compare", "a study runs one experiment per topology; remove the "
                          "[[compare]] tables from its config")
    planned = []
    for entry in entries:
        for seed in seeds:
            try:
                planned.append((entry, seed, with_overrides(cfg, {**entry.overrides,
                                                                  "seed": seed})))
            except ConfigError as err:
                raise ConfigError(f"study {entry.label!r}: {err.field}", err.message) from None
    return planned


def _run_one(entry: Entry, seed: int, cfg: Any, out: Path, progress: bool,
             echo: Callable[[str], None]) -> tuple[dict[str, Any], History | None]:
    """The row of one (topology, seed) and its history (None if skipped)."""
    from p2pfl.compare import reusable
    from p2pfl.config import ConfigError, folder_name
    from p2pfl.engine import DivergenceError, run
    from p2pfl.results import read_metrics

    row: dict[str, Any] = {"label": entry.label, "sweep": entry.sweep, "vary": entry.vary,
                           "value": entry.value, "seed": seed, "status": "ok"}
    try:
        metrics = _measure(cfg, entry.obj)
    except (ConfigError, ValueError) as err:
        row["status"] = f"skipped: {err}"
        echo(f"study: skipping {entry.label!r} (seed {seed}): {err}")
        return row, None
    row.update({k: metrics.get(k) for k in ("kind", "diameter", "spectral_gap", "min_B")})
    run_dir = out / folder_name(entry.label) / f"seed{seed}"
    row["run_dir"] = str(run_dir)
    try:
        if reusable(run_dir, cfg, entry.obj):
            history = read_metrics(run_dir / "metrics.jsonl")
        else:
            history = run(cfg, run_dir, progress=progress, label=f"{entry.label} (seed {seed})",
                          resume=(run_dir / "config.json").exists(), topology=entry.obj)
    except DivergenceError as err:
        row["status"] = f"diverged: {err}"
        echo(f"study: {entry.label!r} (seed {seed}) diverged: {err}")
        return row, read_metrics(run_dir / "metrics.jsonl")
    accs = [r["test_acc"] for r in history if r.get("test_acc") is not None]
    row.update(final_acc=accs[-1], best_acc=max(accs), rounds=len(history))
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

    entries = study_entries(topologies, sweeps)
    seeds = check_seeds(list(seeds), "seeds") if seeds is not None else [cfg.seed]
    planned = _plan(cfg, entries, seeds)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, histories = [], {}
    for entry, seed, cfg_run in planned:
        row, history = _run_one(entry, seed, cfg_run, out, progress, echo)
        rows.append(row)
        if history is not None:
            histories[(entry.label, seed)] = history
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
