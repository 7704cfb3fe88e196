"""Comparison tables of finished runs (any algorithm, centralized or not, asynchronous or not).

One row per label (`p2pfl.report.grouping`), best first; per row, over its seeds (mean ±
standard deviation): the final accuracy (or the mean of the last k evaluations) of the model the
header names (the average model, a server's model; with attackers the honest nodes' own models
lead), an algorithm's own accuracies (`test_acc_*` keys, e.g. FedFSA's `test_acc_personal`), the
best evaluation, the rounds (or an asynchronous run's clock marks), bytes and simulated seconds
to a target, the final consensus distance and the communication. A run that diverged is shown
where it diverged and left out of the means. Notes beneath the table say what the cells measure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from p2pfl.config import ConfigError
from p2pfl.report.grouping import group_runs
from p2pfl.report.labels import unique_paths
from p2pfl.report.runs import algorithm_kind
from p2pfl.report.summary import Rows, RunSummary, summarize


def _model(rows: Rows) -> str:
    return algorithm_kind(rows[0].algorithm)[0]


def _unit(rows: Rows) -> str:
    return algorithm_kind(rows[0].algorithm)[1]


def _pct(values: list[float]) -> str:
    if not values:
        return "-"
    mean = 100 * float(np.mean(values))
    return f"{mean:.2f} ± {100 * float(np.std(values)):.2f}" if len(values) > 1 else f"{mean:.2f}"


def _spread(values: list[float], digits: str) -> str:
    """'12.5', or '12.5 ± 1.5' (standard deviation over the runs) where there are several."""
    mean = f"{float(np.mean(values)):{digits}}"
    sd = float(np.std(values))
    spread = f"{sd:.2g}" if digits.endswith("g") else f"{sd:{digits}}"  # 0.0042, not 0
    return f"{mean} ± {spread}" if len(values) > 1 else mean


def _span(values: list[int]) -> str:
    """'8', or '6-10' where the runs differ."""
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}-{high}"


def _alive(rows: Rows) -> Rows:
    """The runs of a row that did not diverge (their accuracies are what the row reports)."""
    return [s for s in rows if s.diverged_at is None and s.last_mean is not None]


def _rounds_cell(rows: Rows, units: bool) -> str:
    """The records of the row's runs, 'marks' named where the table mixes units; diverged and
    unfinished runs said."""
    alive = [s for s in rows if s.diverged_at is None]
    cell = _span([s.rounds for s in alive]) if alive else ""
    if units and alive:
        cell += f" {_unit(rows)}s"
    notes = []
    diverged = sorted(s.diverged_at for s in rows if s.diverged_at is not None)
    if diverged:
        at = _span(diverged)
        notes.append(f"diverged at {_unit(rows)} {at}" if len(diverged) == len(rows) else
                     f"{len(diverged)}/{len(rows)} runs diverged at {_unit(rows)} {at}")
    unfinished = sum(not s.finished and s.diverged_at is None for s in rows)
    if unfinished:
        notes.append(f"{unfinished} unfinished")
    if not cell:
        return "; ".join(notes)
    return cell + (f" ({'; '.join(notes)})" if notes else "")


def _of_runs(found: int, rows: Rows) -> str:
    """' (2/3 runs)' where only some runs of a row count, else ''."""
    return "" if found == len(rows) else f" ({found}/{len(rows)} runs)"


def _accuracy_cell(rows: Rows, value: Callable[[RunSummary], float | None]) -> str:
    """Mean ± sd over the runs that did not diverge; '-' where none has the value."""
    alive = _alive(rows)
    values = [v for v in map(value, alive) if v is not None and not math.isnan(v)]
    return _pct(values) + _of_runs(len(values), rows) if values else "-"


def _target_cell(rows: Rows, target: float, units: bool) -> str:
    reached = [s.rounds_to_target for s in _alive(rows) if s.rounds_to_target is not None]
    if not reached:
        return "not reached"
    return (_spread(reached, ".1f") + (f" {_unit(rows)}s" if units else "")
            + _of_runs(len(reached), rows))


def _seconds_cell(rows: Rows) -> str:
    seconds = [s.seconds_to_target for s in _alive(rows) if s.seconds_to_target is not None]
    return _spread(seconds, ".3g") + _of_runs(len(seconds), rows) if seconds else "not reached"


def _megabytes_cell(rows: Rows) -> str:
    sent = [s.bytes_to_target / 1e6 for s in _alive(rows) if s.bytes_to_target is not None]
    return _spread(sent, ".1f") + _of_runs(len(sent), rows) if sent else "not reached"


def _communication_cell(rows: Rows, value: Callable[[RunSummary], float], digits: str) -> str:
    """The mean over the runs that did not diverge (a diverged run stopped early); '-' if
    none."""
    alive = [value(s) for s in rows if s.diverged_at is None]
    return f"{float(np.mean(alive)):{digits}}" if alive else "-"


def _consensus_cell(rows: Rows) -> str:
    values = [s.consensus for s in _alive(rows) if s.consensus is not None]
    return (f"{float(np.mean(values)):.3g}" + _of_runs(len(values), rows)) if values else "-"


def _averaged_cell(rows: Rows) -> str:
    spans = [s.averaged for s in _alive(rows) if s.averaged is not None]
    if not spans:
        return "-"
    return f"{_span([a for a, _ in spans])} to {_span([b for _, b in spans])}"


@dataclass(frozen=True)
class Layout:
    """What the table's headers must say, from all of its runs."""

    last: int  # k: the evaluations averaged (1: a run's final evaluation)
    models: tuple[str, ...]  # what test_acc measures, over the rows ("average model", ...)
    units: tuple[str, ...]  # what the rows' records count ("round", "mark")
    byzantine: bool  # some run had attackers: the honest nodes' columns lead
    target: float | None

    @property
    def final(self) -> bool:
        """Whether every accuracy is a run's final evaluation (k = 1)."""
        return self.last == 1

    @property
    def when(self) -> str:
        """How an accuracy column is taken: 'final' or 'mean of last k evaluations'."""
        return "final" if self.final else f"mean of last {self.last} evaluations"

    @property
    def unit(self) -> str:
        """The records' unit for a header: 'rounds', 'marks' or 'rounds / marks'."""
        return " / ".join(f"{u}s" for u in self.units)

    @property
    def mixed_units(self) -> bool:
        """Whether the table has rounds and marks (its cells then name theirs)."""
        return len(self.units) > 1

    @property
    def model(self) -> str:
        """test_acc's model for a header (a column says it per row where runs differ)."""
        return self.models[0] if len(self.models) == 1 else "average or server model"


def _layout(groups: dict[str, Rows], last: int, target: float | None) -> Layout:
    summaries = [s for rows in groups.values() for s in rows]
    return Layout(last=last,
                  models=tuple(sorted({_model(rows) for rows in groups.values()})),
                  units=tuple(sorted({_unit(rows) for rows in groups.values()}, reverse=True)),
                  byzantine=any(s.byzantine for s in summaries), target=target)


def _columns(summaries: Rows, layout: Layout) -> list[tuple[str, Callable[[Rows], str]]]:
    """The table's columns after the label: header and cell of a row's runs."""
    at = f"{100 * layout.target:g}%" if layout.target is not None else ""
    columns: list[tuple[str, Callable[[Rows], str]]] = [
        ("seeds", lambda rows: str(len(rows))),
        (layout.unit, partial(_rounds_cell, units=layout.mixed_units))]
    if layout.byzantine:
        columns += [(f"honest nodes, mean % ({layout.when})",
                     partial(_accuracy_cell, value=lambda s: s.honest and s.honest[0])),
                    ("honest nodes, worst %",
                     partial(_accuracy_cell, value=lambda s: s.honest and s.honest[1])),
                    (f"{layout.model} of all nodes %", partial(_accuracy_cell,
                                                               value=lambda s: s.last_mean))]
    else:
        columns.append((f"{layout.model} % ({layout.when})",
                        partial(_accuracy_cell, value=lambda s: s.last_mean)))
    if len(layout.models) > 1:
        columns.append(("model", _model))
    if not layout.final:
        columns.append((f"evaluations averaged ({layout.unit})", _averaged_cell))
    columns += [(f"{key} %", partial(_accuracy_cell, value=lambda s, key=key: s.extra.get(key)))
                for key in sorted({key for s in summaries for key in s.extra})]
    columns.append((f"best {layout.model} %", partial(_accuracy_cell, value=lambda s: s.best)))
    if layout.target is not None:
        measured = "" if layout.model == "test_acc" else f" ({layout.model}" + (
            " of all nodes)" if layout.byzantine else ")")
        columns += [(f"{layout.unit} to {at}{measured}",
                     partial(_target_cell, target=layout.target, units=layout.mixed_units)),
                    (f"MB to {at}", _megabytes_cell)]
    if layout.target is not None and any(s.seconds_to_target is not None for s in summaries):
        columns.append((f"simulated s to {at}", _seconds_cell))
    consensus = "honest consensus distance" if layout.byzantine else "consensus distance"
    if any(s.consensus is not None for s in summaries):
        columns.append((f"{consensus} (final)", _consensus_cell))
    return columns + [
        (f"messages per {layout.unit.replace('s', '').replace(' / ', ' or ')}",
         partial(_communication_cell, value=lambda s: s.messages_per_round, digits=".0f")),
        ("MB sent", partial(_communication_cell, value=lambda s: s.bytes_sent / 1e6,
                            digits=".1f"))]


def _notes(layout: Layout, seeds: bool, diverged: bool) -> list[str]:
    """What the table's cells mean, beneath it."""
    taken = ("each run's final evaluation" if layout.final else
             f"the mean of each run's last {layout.last} evaluations (fewer where a run has "
             "fewer; the rounds they cover in their column)")
    notes = [f"Accuracies: {taken}" + (", mean ± standard deviation over the seeds (population "
                                       "sd: with 2 seeds, half their difference)"
                                       if seeds else "") + "."]
    if layout.byzantine:
        notes.append("Honest nodes: their own models (attackers excluded; a run without "
                     "attackers counts every node); the average model averages all nodes, "
                     "attackers included. Rows are sorted by the honest mean.")
    if "server model" in layout.models:
        notes.append("Server model: the model a centralized or buffered algorithm's server "
                     "holds; average model: the mean of the nodes' models.")
    if "mark" in layout.units:
        notes.append("Marks: an asynchronous run's records, one per nominal round of simulated "
                     "time; rounds: a synchronous run's rounds.")
    if layout.byzantine and layout.target is not None:
        notes.append("The target is measured on the average model of all nodes.")
    if diverged:
        notes.append("A diverged run is left out of its row's accuracies, targets and "
                     "communication (the row says where it diverged); rows with a diverged run "
                     "come after the others.")
    return notes


def comparison_table(runs: list[Path], last: int = 1, target: float | None = None) -> str:
    """A Markdown table, one row per label (`group_runs`), best first, and notes on its cells.

    The leading accuracy is the honest nodes' mean where any run had attackers, else test_acc
    (the average model, or a server's). Rows whose every run diverged come last.

    Parameters
    ----------
    runs : run directories.
    last : k, the evaluated rounds averaged (1: each run's final evaluation).
    target : accuracy in (0, 1] to reach, or None (no target columns).

    Returns
    -------
    str, the table's lines, then a blank line and its notes.
    """
    groups = {label: [summarize(r, last, target) for r in members]
              for label, members in group_runs(unique_paths(runs)).items()}
    layout = _layout(groups, last, target)
    columns = _columns([s for rows in groups.values() for s in rows], layout)
    lines = ["| run | " + " | ".join(header for header, _ in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]

    def rank(label: str) -> tuple[bool, float]:
        """Rows whose runs all ran first, then by the leading accuracy (best first)."""
        rows = groups[label]
        values = [v for v in ((s.honest[0] if layout.byzantine and s.honest else s.last_mean)
                              for s in _alive(rows)) if v is not None and not math.isnan(v)]
        stable = all(s.diverged_at is None for s in rows)
        return not stable, -float(np.mean(values)) if values else math.inf

    for label in sorted(groups, key=rank):
        cells = [cell(groups[label]) for _, cell in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    seeds = any(len(rows) > 1 for rows in groups.values())
    diverged = any(s.diverged_at is not None for rows in groups.values() for s in rows)
    return "\n".join(lines) + "\n\n" + "\n".join(_notes(layout, seeds, diverged)) + "\n"


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
