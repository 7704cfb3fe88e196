"""Run a chosen subset of a config's [[compare]] variants over several seeds, then tabulate.

Layout: OUT/<variant label>/seed<k>/ per run (the layout `p2pfl.report.table` groups by), and
OUT/table.md, which shows every variant of the config run into OUT so far (a call with `--only`
adds its variants to those of earlier calls), diverged runs included.
The same command continues what is there: a finished run with at least the
configured rounds is kept, a killed or interrupted one resumes from its checkpoint, and a finished
one with fewer rounds is extended (`--set rounds=300` after a first pass at 100; the extended run
keeps the evaluation of its old last round even where that round is off the `eval.every` grid).
A run that diverges does not stop the others; the comparison then ends with a DivergenceError
naming it, and table.md shows where it diverged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from p2pfl.config import (
    Config,
    ConfigError,
    folder_name,
    variant_label,
    variant_overrides,
    with_overrides,
)
from p2pfl.engine import DivergenceError, run
from p2pfl.engine.builder import check_variants
from p2pfl.engine.checkpoint import check_resumable, read_run_config
from p2pfl.objects.inputs import with_absolute_paths
from p2pfl.objects.topology import resolve_topology
from p2pfl.report.results import METRICS, atomic_file, read_metrics
from p2pfl.report.summary import is_run
from p2pfl.report.table import comparison_table


def _names(variant: dict[str, Any]) -> set[str]:
    label = variant_label(variant)
    return {label.lower(), folder_name(label), str(variant.get("algorithm.name", "")).lower()}


def select_variants(cfg: Config, only: list[str] | None) -> list[dict[str, Any]]:
    """The [[compare]] variants whose label (or its slug) or algorithm name is in `only`.

    Parameters
    ----------
    cfg : a config with [[compare]] variants.
    only : names to select (case-insensitive); None or empty: all.

    Returns
    -------
    list of the variants' tables.

    Raises
    ------
    ConfigError
        naming compare when there are no variants, --only for a name no variant has.
    """
    if not cfg.compare:
        raise ConfigError("compare", "the config lists no [[compare]] variants")
    if not only:
        return list(cfg.compare)
    wanted = {w.strip().lower() for w in only if w.strip()}
    unknown = sorted(w for w in wanted if not any(w in _names(v) for v in cfg.compare))
    if unknown:
        known = ", ".join(folder_name(variant_label(v)) for v in cfg.compare)
        raise ConfigError("--only", f"no variant named {unknown[0]!r} (variants: {known})")
    return [v for v in cfg.compare if _names(v) & wanted]


def run_subset(cfg: Config, out: Path, only: list[str] | None = None,
               seeds: list[int] | None = None, last: int = 1, target: float | None = None,
               progress: bool = False) -> str:
    """Run the chosen variants for every seed into `out`.

    Every run is validated before the first one starts.

    Parameters
    ----------
    cfg : a config with [[compare]] variants.
    out : the output folder.
    only : variants to run (as `select_variants`); None: all.
    seeds : seeds (default: the config's).
    last : k, the evaluated rounds averaged in the table.
    target : accuracy in (0, 1] to reach, or None.
    progress : whether to draw progress bars.

    Returns
    -------
    str, the table (also written to `out`).

    Raises
    ------
    ConfigError
        naming the variant and field that is refused.
    DivergenceError
        when runs diverged (after the others ran).
    """
    variants = select_variants(cfg, only)
    seeds = seeds or [cfg.seed]
    plans = []
    for variant in variants:  # validate every run before the first one starts
        for seed in seeds:
            run_cfg = with_overrides(cfg, {**variant_overrides(variant), "seed": seed,
                                            "compare": None})
            plans.append((variant_label(variant), seed, run_cfg))
    check_variants([(f"compare[{cfg.compare.index(v)}] ({label}, seed {seed})", run_cfg)
                    for v in variants for label, seed, run_cfg in plans
                    if label == variant_label(v)])
    run_dirs, diverged = [], []
    for label, seed, run_cfg in plans:
        run_dir = out / folder_name(label) / f"seed{seed}"
        if not reusable(run_dir, run_cfg):
            try:
                run(run_cfg, run_dir, progress, f"{label} (seed {seed})",
                    resume=(run_dir / "config.json").exists())
            except DivergenceError as err:
                diverged.append(f"{label} (seed {seed}): {err}")
        run_dirs.append(run_dir)
    table = comparison_table(run_dirs + every_run(cfg, out), last, target)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_file(out / "table.md") as f:
        f.write(table)
    if diverged:
        raise DivergenceError(f"{len(diverged)} of {len(plans)} runs diverged (table.md shows "
                              f"where); first: {diverged[0]}")
    return table


def every_run(cfg: Config, out: Path) -> list[Path]:
    """Every run in `out` of the config's variants, any seed, so that table.md shows every run
    so far (an earlier `--only`, other `--seeds`).

    Parameters
    ----------
    cfg : the config with [[compare]] variants.
    out : the output folder.

    Returns
    -------
    list of run directories (OUT/<variant>/seed<k>).
    """
    names = [folder_name(variant_label(v)) for v in cfg.compare]
    return [run_dir for name in names for run_dir in sorted((out / name).glob("seed*"))
            if is_run(run_dir)]


def evaluated(run_dir: Path) -> bool:
    """Whether `run_dir` logged a test accuracy (a run that diverged before its first evaluation
    has none; bench.reproduce draws only the runs that have).

    Parameters
    ----------
    run_dir : a run directory.

    Returns
    -------
    bool.
    """
    metrics = run_dir / METRICS
    return metrics.exists() and any("test_acc" in r for r in read_metrics(metrics))


def reusable(run_dir: Path, cfg: Config, topology: object | None = None) -> bool:
    """Whether `run_dir` holds a finished run of `cfg` with at least its rounds (then it is kept).

    A finished run with fewer rounds is not reusable (it is extended).

    Parameters
    ----------
    run_dir : a run directory.
    cfg : the run's config.
    topology : the topology object given, or None.

    Returns
    -------
    bool.

    Raises
    ------
    ConfigError
        naming the fields, for a finished run with another config.
    """
    done = finished_rounds(run_dir)
    if done == 0:
        return False
    check_same_run(run_dir, cfg, topology)
    return done >= cfg.rounds


def check_same_run(run_dir: Path, cfg: Config, topology: object | None = None) -> None:
    """Refuse a `run_dir` that holds a run, finished or not, of another config or topology object.

    One without config.json holds none.

    Parameters
    ----------
    run_dir : a run directory.
    cfg : the run's config.
    topology : the topology object given, or None.

    Raises
    ------
    ConfigError
        naming the fields that differ.
    """
    if not (run_dir / "config.json").exists():
        return
    recorded, _, _ = resolve_topology(with_absolute_paths(cfg), run_dir, True, topology)
    check_resumable(read_run_config(run_dir).to_dict(), recorded, 0, run_dir)


def finished_rounds(run_dir: Path) -> int:
    """Rounds of the finished run in `run_dir`.

    Parameters
    ----------
    run_dir : a run directory.

    Returns
    -------
    int, from its summary.json (0 if it has not finished).
    """
    summary = run_dir / "summary.json"
    return int(json.loads(summary.read_text())["rounds"]) if summary.exists() else 0
