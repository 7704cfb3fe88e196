"""The study: algorithms x topologies x sweeps x seeds, and which topology metric predicts
convergence.

    import analysis.study as S
    result = S.run(cfg, ["ring", "exponential", "complete"], "runs/study", seeds=[0, 1, 2],
                   algorithms=["sgp", {"name": "dfedsgpsm", "momentum": 0.9, "rho": 0.05}],
                   sweeps=[Sweep("random_out", "k", [1, 2, 4], "random_out")], progress=True)

Each cell (algorithm, topology, seed) runs `p2pfl.run` into OUT/<algorithm>/<label>/seed<k>/
(OUT/<label>/seed<k>/ when no `algorithms` are given: the config's algorithm) with only
`algorithm.*`, `topology.*` (and, in a sweep over the number of nodes, `data.num_nodes`) and the
seed changed; each is measured on the schedule and mixing the algorithm actually uses, with the
cell's own partition (analysis.study_measure: diameter, spectral gap per round and per period,
mixing time, effective neighbours, heterogeneity, ...), and each metric is rank-correlated with
the rounds to target over the cells (analysis.study_rank). A rerun keeps the
finished cells (one with more rounds counts up to the study's rounds), resumes the interrupted
ones and extends shorter ones. Writes, into OUT (analysis.study_results, analysis.study_figures):
study.csv (one row per cell), study_mean.csv (one per algorithm and topology: mean and sd over
seeds), study.json, and the figures. study.json's "time" (also printed) splits the study's wall
time into its rounds' training and what lies outside them: evaluation, start-up (planning, data,
building, checkpoints) and the tables and figures.

One target serves every cell, so that studies compare: a test accuracy (`target`) or a test loss
(`target_loss`) given once, else 0.9 x the best mean final accuracy (`common_target`);
`StudyResult.target_note` states which. A run that never reaches it is censored
(analysis.study_results, analysis.study_rank).

Every cell is planned before the first one starts: an unknown name, a wrong parameter or object,
or a folder that holds a run of another config or object stops the study. A topology the
algorithm cannot use (wrong mixing, not connected, a centralized algorithm off the star) is
skipped with a one-line message, a diverging run is recorded as diverged; neither stops the
study.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.study_cells import Planned, Progress, cell_name, groups, run_cells
from analysis.study_measure import DEFAULT_X, Partitions, from_factory, measure
from analysis.study_same import echo_same, reused_row
from analysis.study_spec import Algorithm, Entry, Sweep, study_algorithms, study_entries
from analysis.summary import GAMMA

History = list[dict[str, Any]]
Cell = tuple[str, str, int]  # (algorithm label, topology label, seed)
TARGET_FRACTION = 0.9  # default target: this share of the best mean final accuracy


@dataclass
class StudyResult:
    """rows: one per cell; means: one per (algorithm, topology) (analysis.study_results);
    histories: (algorithm, label, seed) -> per-round records of the runs that finished or
    diverged; target: the common target of `target_metric` ("test_acc", reached at >=, or
    "test_loss", reached at <=), and `target_note`: how it was chosen; gamma: of the effective
    neighbours; correlations: the rank correlations of each metric with rounds to target
    (analysis.study_rank); x: the metrics on the x axes of convergence_vs_topology."""

    rows: list[dict[str, Any]]
    means: list[dict[str, Any]]
    target: float | None
    histories: dict[Cell, History] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    target_metric: str = "test_acc"
    target_note: str = ""
    time: dict[str, float] = field(default_factory=dict)
    gamma: float = GAMMA
    correlations: list[dict[str, Any]] = field(default_factory=list)
    x: tuple[str, ...] = DEFAULT_X


def rounds_to_target(history: History, target: float, key: str = "round",
                     metric: str = "test_acc") -> Any:
    """First round whose average model reaches `target`.

    Parameters
    ----------
    history : a run's metric records.
    target : the level to reach.
    key : what to return of that round: "round", or "sim_time_s" for its simulated time (runs
        with [network] enabled).
    metric : "test_acc" (reached at >= target) or "test_loss" (reached at <= target).

    Returns
    -------
    the round's `key` value, or None if never reached.
    """
    reached = ((lambda v: v >= target) if metric == "test_acc" else (lambda v: v <= target))
    return next((r.get(key) for r in history
                 if r.get(metric) is not None and reached(r[metric])), None)


def _cell_config(algorithm: Algorithm | None, entry: Entry, seed: int, cfg: Any) -> Any:
    """The config of the run of `algorithm` (None: the config's) on `entry` with `seed`."""
    from p2pfl.config import with_overrides

    overrides = dict(algorithm.overrides) if algorithm else {}
    return with_overrides(cfg, {**overrides, **entry.overrides, "seed": seed})


def _plan_one(algorithm: Algorithm | None, entry: Entry, seed: int, cfg: Any, out: Path,
              context: Context) -> Planned:
    """The cell of `algorithm` on `entry` with `seed` (its config `cfg`): its topology (a
    factory's built from the cell's partition, once for all algorithms), measured, and checked
    against what its folder holds (a run with another config or object is refused)."""
    from p2pfl.config import folder_name
    from p2pfl.engine.compare import check_same_run

    folder = out / folder_name(algorithm.label) if algorithm else out
    run_dir = folder / folder_name(entry.label) / f"seed{seed}"
    label = algorithm.label if algorithm else cfg.algorithm.name
    counts = context.partitions.of(cfg)
    obj = entry.obj
    if entry.factory is not None:
        key = (entry.label, cfg.data.num_nodes, seed)  # the data of a cell is its seed's
        if key not in context.built:
            context.built[key] = from_factory(entry.factory, cfg, counts)
        obj = context.built[key]
    metrics = measure(cfg, obj, counts, context.gamma)
    if isinstance(metrics, str):
        return Planned(label, entry, seed, cfg, run_dir, None, metrics, obj, counts)
    check_same_run(run_dir, cfg, obj)
    return Planned(label, entry, seed, cfg, run_dir, metrics, "", obj, counts)


@dataclass
class Context:
    """What planning shares between cells: the partitions' class counts, the objects built by
    factories ((label, nodes, seed) -> object) and the gamma of the effective neighbours."""

    gamma: float
    partitions: Partitions = field(default_factory=Partitions)
    built: dict[tuple[str, int, int], object] = field(default_factory=dict)


def _plan(cfg: Any, algorithms: Sequence[Algorithm], entries: list[Entry], seeds: Sequence[int],
          out: Path, gamma: float) -> list[Planned]:
    """Every cell of the study, in order: its config, then (data that cannot be split as
    configured is named by cell) its topology measured and its folder checked; a wrong name,
    value or object, or a folder that holds a run with another config, stops the study here,
    before the first run."""
    from p2pfl.config import ConfigError
    from p2pfl.engine.builder import check_variants

    if cfg.compare:
        raise ConfigError("compare", "a study runs one experiment per cell; remove the "
                          "[[compare]] tables from its config")
    cells = [(algorithm, entry, seed) for algorithm in algorithms or [None] for entry in entries
             for seed in seeds]
    configs = [_named(a, e, _cell_config, a, e, s, cfg) for a, e, s in cells]
    check_variants([(f"study {a.label if a else c.algorithm.name} on {e.label} (seed {s}):", c)
                    for (a, e, s), c in zip(cells, configs)], named_topology=False)
    context = Context(gamma)
    return [_named(a, e, _plan_one, a, e, s, c, out, context)
            for (a, e, s), c in zip(cells, configs)]


def _named(algorithm: Algorithm | None, entry: Entry, step: Callable[..., Any],
           *args: Any) -> Any:
    """step(*args), its ConfigError naming the algorithm and topology."""
    from p2pfl.config import ConfigError

    try:
        return step(*args)
    except ConfigError as err:
        where = f"{algorithm.label!r} on " if algorithm else ""
        raise ConfigError(f"study {where}{entry.label!r}: {err.field}", err.message) from None


def share_of_best(best: float) -> float:
    """TARGET_FRACTION of a best accuracy, rounded down to 0.01 %: the default target of a study
    and of a topology design.

    Parameters
    ----------
    best : an accuracy in [0, 1].

    Returns
    -------
    float.
    """
    return math.floor(TARGET_FRACTION * best * 1e4) / 1e4


def common_target(rows: list[dict[str, Any]], target: float | None = None,
                  target_loss: float | None = None) -> tuple[str, float | None, str]:
    """The study's one target: the accuracy `target` or the loss `target_loss` given, else
    TARGET_FRACTION (0.9) of the best mean final accuracy.

    The default asks "how many rounds until a run is within 10 % of what the best algorithm and
    topology of this study reach": the best (algorithm, topology) is the one whose final
    accuracy, averaged over its finished seeds, is highest (a mean, not the luckiest seed),
    and the value is rounded down to 0.01 %. Unlike the best accuracy of the weakest run (the
    earlier default, reached by construction, often in the last round), it is a level that the
    well connected topologies reach early and the poorly connected ones late or never (those
    runs are censored: analysis.study_results, analysis.study_rank).

    Parameters
    ----------
    rows : the study's rows.
    target : a test accuracy in (0, 1], or None.
    target_loss : a test loss > 0, or None.

    Returns
    -------
    tuple (metric, value or None when no run finished, how it was chosen).
    """
    from analysis.study_results import means

    if target is not None:
        return "test_acc", target, f"{100 * target:.1f} % test accuracy (given)"
    if target_loss is not None:
        return "test_loss", target_loss, f"test loss {target_loss:g} (given)"
    finished = [m for m in means(rows) if m.get("final_acc_mean") is not None]
    if not finished:
        return "test_acc", None, "none (no run finished)"
    best = max(finished, key=lambda m: m["final_acc_mean"])
    value = share_of_best(best["final_acc_mean"])
    who = f"{best['algorithm']} on " if best.get("algorithm") else ""
    return "test_acc", value, (f"{100 * value:.2f} % test accuracy = {TARGET_FRACTION:g} x "
                               f"{100 * best['final_acc_mean']:.2f} %, the best mean final "
                               f"accuracy ({who}{best['label']})")


def run(cfg: Any, topologies: Sequence[Any] | Mapping[str, Any], out_dir: str | Path, *,
        seeds: Sequence[int] | None = None, sweeps: Sequence[Sweep] = (),
        algorithms: Sequence[Any] = (), target: float | None = None,
        target_loss: float | None = None, progress: bool = False, stack: int = 1,
        gamma: float = GAMMA, x: Sequence[str] = DEFAULT_X,
        echo: Callable[[str], None] = print, figures: bool = True) -> StudyResult:
    """Run every cell (algorithm, topology or sweep value, seed) into out_dir (see the module
    docstring) and return the study's rows, means, histories, target and files.

    Parameters
    ----------
    cfg : the experiment's config (without [[compare]]).
    topologies : spec strings ('name' or 'name:key=value:...'), tables of [topology] fields, or
        {label: spec, table, topology object or factory (a callable taking class_counts:
        analysis.study_measure)}.
    out_dir : the study's folder (each cell in OUT/<label>/seed<k>).
    seeds : default [cfg.seed].
    sweeps : values of one field swept, each value a cell.
    algorithms : names or tables of [algorithm] fields (default: the config's algorithm).
    target : a test accuracy, the common target of 'rounds to target'; default: `common_target`.
    target_loss : a test loss, instead of `target`.
    progress : one bar over all cells (rounds/s, ETA).
    stack : cells run at once as one stacked population (p2pfl.engine.stacked: the same numbers;
        faster on a GPU, not on a CPU, whose cores a single run already fills).
    gamma : the decay of the effective number of neighbours, in [0, 1).
    x : the metrics on the x axes of convergence_vs_topology (study_measure.METRICS).
    echo : prints the study's lines (skipped and repeated cells).
    figures : draw the study's figures (the tables and study.json are always written).

    Returns
    -------
    StudyResult.

    Raises
    ------
    ConfigError
        naming the argument or field that is refused, both targets given, or no cell that can
        run.
    """
    from analysis.study_measure import check_gamma, check_x
    from analysis.study_rank import rank_correlations
    from analysis.study_results import means, write_study
    from analysis.study_spec import check_seeds, check_stack, check_target, check_target_loss
    from p2pfl.config import ConfigError

    began = time.perf_counter()
    if target is not None and target_loss is not None:
        raise ConfigError("target_loss", "give one target: an accuracy or a loss")
    target, target_loss = check_target(target, "target"), check_target_loss(target_loss,
                                                                              "target_loss")
    entries = study_entries(topologies, sweeps)
    chosen = study_algorithms(algorithms) if algorithms else []
    seeds = check_seeds(list(seeds), "seeds") if seeds is not None else [cfg.seed]
    stack, gamma, x = check_stack(stack, "stack"), check_gamma(gamma, "gamma"), check_x(x, "x")
    out = Path(out_dir)
    planned = _plan(cfg, chosen, entries, seeds, out, gamma)
    for cell in planned:
        if cell.metrics is None:
            echo(f"study: skipping {cell_name(cell)}: {cell.skipped}")
    if all(cell.metrics is None for cell in planned):
        first = planned[0]
        raise ConfigError("study", f"no cell can run, all are skipped (first: {cell_name(first)}: "
                          f"{first.skipped})")
    same = echo_same(planned, echo)  # cells that repeat another: not run, its result reused
    out.mkdir(parents=True, exist_ok=True)
    ran = [i for i in range(len(planned)) if i not in same]
    ended: list[tuple[dict[str, Any], History | None]] = []  # (row, history) of `ran`, in order
    bar = Progress([planned[i] for i in ran], progress)
    try:
        for cells in groups([planned[i] for i in ran], stack):
            ended += run_cells(cells, bar, echo)
    finally:
        bar.close()
    done = dict(zip(ran, ended))
    rows, histories = [], {}
    for i, cell in enumerate(planned):
        row, history = done[same[i][0] if i in same else i]
        if i in same:
            row = reused_row(cell, row, cell_name(planned[same[i][0]]))
        rows.append(row)
        if history is not None:
            histories[(cell.algorithm, cell.entry.label, cell.seed)] = history
    metric, value, note = common_target(rows, target, target_loss)
    if value is not None:
        for row in rows:
            if row["status"] == "ok":
                history = histories[(row["algorithm"], row["label"], row["seed"])]
                row["rounds_to_target"] = rounds_to_target(history, value, metric=metric)
                row["seconds_to_target"] = rounds_to_target(history, value, "sim_time_s", metric)
    result = StudyResult(rows, means(rows), value, histories, target_metric=metric,
                         target_note=note, gamma=gamma, x=x,
                         correlations=rank_correlations(rows) if value is not None else [])
    result.files += write_study(out, cfg, result, began, bar, figures)
    return result


run_study = run  # the name of earlier releases
