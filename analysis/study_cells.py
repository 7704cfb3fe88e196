"""Running a study's cells: each cell's row and history, one after another or stacked
(p2pfl.engine.stacked), and the study's progress bar."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.study_measure import CELL_METRICS
from analysis.study_spec import Entry

History = list[dict[str, Any]]


@dataclass
class Planned:
    """One cell of the study: its config and folder, its topology metrics (None, with
    `skipped` saying why, if the algorithm cannot use the topology), the topology object it
    runs on (None: the config's named topology; a factory's object is built for the cell) and
    its partition's class counts [n, K]."""

    algorithm: str
    entry: Entry
    seed: int
    cfg: Any
    run_dir: Path
    metrics: dict[str, Any] | None
    skipped: str = ""
    obj: object | None = None
    counts: Any = None


def cell_name(run: Planned) -> str:
    """'<algorithm> on <topology> (seed k)'.

    Parameters
    ----------
    run : a planned cell.

    Returns
    -------
    str.
    """
    return f"{run.algorithm} on {run.entry.label} (seed {run.seed})"


def _history(run_dir: Path, rounds: int) -> History:
    """The metrics of the run in `run_dir` up to round `rounds` (a run kept from a study with more
    rounds counts as this study's), [] if it wrote none."""
    from p2pfl.report.results import METRICS, read_metrics

    path = run_dir / METRICS
    return [r for r in read_metrics(path) if r["round"] <= rounds] if path.exists() else []


class Progress:
    """The study's progress bar (tqdm): rounds of all cells, cells done, rounds/s and ETA; off
    (a no-op) unless `show`. It also times the rounds run now: `round_spans` holds each round's
    training (local phase and mixing) as (start, end) in `time.perf_counter` seconds, and
    `evaluation_s` sums the rounds' evaluation seconds."""

    def __init__(self, planned: list[Planned], show: bool) -> None:
        from tqdm import tqdm

        runnable = [p for p in planned if p.metrics is not None]
        self.cells = len(runnable)
        self.done = 0
        self.bar = tqdm(total=sum(p.cfg.rounds for p in runnable), disable=not show,
                        unit="round", desc="study", dynamic_ncols=True)
        self.round_spans: list[tuple[float, float]] = []
        self.evaluation_s = 0.0

    def start(self, run: Planned, rounds_done: int) -> None:
        """Cell `run` starts (or is kept) with `rounds_done` of its rounds already run."""
        self.bar.set_postfix_str(f"cell {self.done + 1}/{self.cells}: {cell_name(run)}")
        self.bar.update(rounds_done)

    def round(self, record: dict[str, Any]) -> None:
        """A round of the current cell ran (its record: `wall_s` of training, then `eval_s`)."""
        evaluation = record.get("eval_s", 0.0)
        end = time.perf_counter() - evaluation
        self.round_spans.append((end - record["wall_s"], end))
        self.evaluation_s += evaluation
        self.bar.update(1)

    def rounds_s(self) -> float:
        """Seconds in which some round was training: the union of `round_spans` (stacked cells'
        rounds overlap, each counting the time it waits for the others)."""
        total, reach = 0.0, -math.inf
        for start, end in sorted(self.round_spans):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total

    def finish(self, run: Planned, rounds_left: int) -> None:
        """Cell `run` ended (a diverged or stopped one leaves `rounds_left` rounds unrun)."""
        self.done += 1
        self.bar.update(rounds_left)

    def close(self) -> None:
        self.bar.close()


def _start(run: Planned, bar: Progress) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The row of one cell, and the `p2pfl.run` arguments that run it (None: the cell is
    skipped, or already finished)."""
    from p2pfl.engine.compare import reusable

    entry, cfg, run_dir = run.entry, run.cfg, run.run_dir
    row: dict[str, Any] = {"algorithm": run.algorithm, "label": entry.label, "sweep": entry.sweep,
                           "vary": entry.vary, "value": entry.value, "seed": run.seed,
                           "status": "ok"}
    if run.metrics is None:
        row["status"] = f"skipped: {run.skipped}"
        return row, None
    row.update({k: run.metrics.get(k) for k in CELL_METRICS})
    row["run_dir"] = str(run_dir)
    if reusable(run_dir, cfg, run.obj):
        bar.start(run, cfg.rounds)
        return row, None
    bar.start(run, len(_history(run_dir, cfg.rounds)))
    return row, {"cfg": cfg, "out_dir": run_dir, "progress": bar.round, "label": cell_name(run),
                 "resume": (run_dir / "config.json").exists(), "topology": run.obj,
                 "figures": False}


def _end(run: Planned, row: dict[str, Any], bar: Progress, echo: Callable[[str], None],
         error: BaseException | None = None) -> tuple[dict[str, Any], History | None]:
    """The row and history of a cell whose run ended (`error`: the exception that ended it)."""
    from p2pfl.engine import DivergenceError

    if row["status"].startswith("skipped"):
        return row, None
    if isinstance(error, DivergenceError):
        row["status"] = f"diverged: {error}"
        echo(f"study: {cell_name(run)} diverged: {error}")
    history = _history(run.run_dir, run.cfg.rounds)
    bar.finish(run, run.cfg.rounds - len(history))
    if row["status"] != "ok":
        return row, history
    accs = [a for r in history if (a := r.get("test_acc")) is not None and math.isfinite(a)]
    losses = [v for r in history if (v := r.get("test_loss")) is not None and math.isfinite(v)]
    row.update(final_acc=accs[-1] if accs else None, best_acc=max(accs, default=None),
               best_loss=min(losses, default=None), rounds=len(history))
    return row, history


def groups(planned: list[Planned], size: int) -> list[list[Planned]]:
    """The cells in order, in groups of `size` cells that run (a skipped cell joins a group).

    Parameters
    ----------
    planned : the cells.
    size : cells run at once.

    Returns
    -------
    list of lists of cells.
    """
    groups: list[list[Planned]] = [[]]
    for cell in planned:
        if sum(c.metrics is not None for c in groups[-1]) == size and cell.metrics is not None:
            groups.append([])
        groups[-1].append(cell)
    return groups


def run_cells(cells: list[Planned], bar: Progress, echo: Callable[[str], None]
               ) -> list[tuple[dict[str, Any], History | None]]:
    """Rows and histories of `cells`, their runs stacked (p2pfl.engine.stacked) when there are
    several to run.

    A run's error other than a divergence is raised after all have ended.

    Parameters
    ----------
    cells : the cells of one group.
    bar : the study's progress bar.
    echo : prints the study's lines.

    Returns
    -------
    list of (row, history or None), one per cell.
    """
    from p2pfl.engine import DivergenceError, run_stacked
    from p2pfl.engine import run as run_experiment

    started = [_start(cell, bar) for cell in cells]
    jobs = [job for _, job in started if job is not None]
    if len(jobs) > 1:
        outcomes = iter(run_stacked(jobs))
        errors = [None if job is None else next(outcomes) for _, job in started]
        errors = [e if isinstance(e, BaseException) else None for e in errors]
    else:
        errors = [None] * len(cells)
        for i, (_, job) in enumerate(started):
            if job is not None:
                try:
                    run_experiment(**job)
                except DivergenceError as err:
                    errors[i] = err
    ended = [_end(cell, row, bar, echo, error if isinstance(error, DivergenceError) else None)
             for cell, (row, _), error in zip(cells, started, errors)]
    for error in errors:
        if error is not None and not isinstance(error, DivergenceError):
            raise error
    return ended
