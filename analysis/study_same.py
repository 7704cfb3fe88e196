"""Cells of a study that are the same computation, found before any runs: the study runs the
first, reuses its result for the others and records them with `same_as`.

Two cells are the same computation when (algorithms.forms) their algorithms have one round form
with the same options, everything else in their configs is equal (data, model, seed, rounds,
topology, engine, evaluation; the same topology object), and, where one mixes by gossip and the
other by Push-Sum, the Push-Sum matrix P equals the gossip matrix W on every round's graph:
then W is doubly stochastic and the Push-Sum weights stay 1. That check needs every round's
graph known before the run, so it is made only without lost messages or offline nodes, without
a simulated network (a Push-Sum message carries one more number, so its simulated time
differs), on graphs that do not follow the nodes' losses, and, for a time-varying topology
object, on a periodic one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from analysis.study_cells import Planned
from analysis.study_measure import CELL_METRICS, cell_schedule

if TYPE_CHECKING:
    from algorithms.forms import RoundForm

MATRIX_TOL = 1e-12  # |P - W| entry by entry: rounding of 1 - sum(...) on the diagonal, far below
# any difference of weights a graph gives


def _rounds(cfg: Any, schedule: Any, obj: object | None) -> range | None:
    """The rounds whose graphs decide the run: a period, or every round of a named aperiodic
    schedule (None: an aperiodic object, which is not called ahead of its run)."""
    if schedule.period is not None:
        return range(min(schedule.period, cfg.rounds))
    return None if obj is not None else range(cfg.rounds)


def equal_mixing(cfg: Any, obj: object | None, counts: Any = None) -> str | None:
    """Why the gossip and the Push-Sum runs of `cfg` mix with the same matrix on every round.

    Doubly stochastic, so the Push-Sum weights stay 1.

    Parameters
    ----------
    cfg : the cell's config.
    obj : a topology object, or None.
    counts : the run's class counts, or None.

    Returns
    -------
    str, the reason, or None where that does not hold or cannot be known before the run.
    """
    import topologies as T
    from algorithms import ALGORITHMS

    topo = cfg.topology
    if cfg.network.enabled or topo.link_drop > 0 or topo.node_drop > 0:
        return None
    schedule = cell_schedule(cfg, ALGORITHMS[cfg.algorithm.name](cfg.algorithm), obj, counts)[0]
    rounds = _rounds(cfg, schedule, obj)
    if schedule.needs_losses or schedule.directed or rounds is None:
        return None
    for t in rounds:
        graph = schedule.at(t)
        P = T.column_stochastic(graph, sparse=True)
        W = T.doubly_stochastic(graph, sparse=True)
        if abs(P - W).max() > MATRIX_TOL:
            return None
    return "its Push-Sum matrix equals the gossip matrix on every round, so the Push-Sum " \
           "weights stay 1"


def _key(cell: Planned) -> str:
    """Everything of a cell's config but its algorithm, and its topology object."""
    rest = {k: v for k, v in cell.cfg.to_dict().items() if k != "algorithm"}
    return json.dumps(rest, sort_keys=True, default=repr) + f"|{id(cell.obj)}"


def same_cells(planned: list[Planned]) -> dict[int, tuple[int, str]]:
    """The cells that repeat an earlier one; the earlier cell is one that runs.

    Parameters
    ----------
    planned : the study's cells.

    Returns
    -------
    dict {index of a repeating cell: (the earlier cell's index, why they are the same
    computation)}.
    """
    from algorithms import ALGORITHMS
    from algorithms.forms import round_form

    same: dict[int, tuple[int, str]] = {}
    runs: dict[str, list[tuple[int, RoundForm]]] = {}  # config key -> cells that run
    mixing: dict[str, str | None] = {}  # config key -> equal_mixing of it
    for i, cell in enumerate(planned):
        form = (None if cell.metrics is None
                else round_form(ALGORITHMS[cell.cfg.algorithm.name], cell.cfg.algorithm))
        if form is None:  # skipped, or a round no other algorithm shares
            continue
        key = _key(cell)
        for j, earlier in runs.get(key, []):
            if not form.same_options(earlier):
                continue
            if planned[j].cfg.algorithm == cell.cfg.algorithm:
                why = "the same config"
            else:
                why = f"the same round ({form.form}) with the same options"
            if form.push_sum != earlier.push_sum:
                if key not in mixing:
                    mixing[key] = equal_mixing(cell.cfg, cell.obj, cell.counts)
                if mixing[key] is None:
                    continue
                why += f"; {mixing[key]}"
            same[i] = (j, why)
            break
        else:
            runs.setdefault(key, []).append((i, form))
    return same


def same_lines(planned: list[Planned], same: dict[int, tuple[int, str]]) -> list[str]:
    """One line per (algorithm, topology) whose cells repeat another algorithm's: which, over which
    seeds, and why.

    Parameters
    ----------
    planned : the study's cells.
    same : `same_cells`' dict.

    Returns
    -------
    list of str.
    """
    grouped: dict[tuple[str, str, str, str], list[int]] = {}
    for i, (j, why) in same.items():
        cell, first = planned[i], planned[j]
        key = (cell.algorithm, cell.entry.label, first.algorithm if first.entry is cell.entry
               else f"{first.algorithm} on {first.entry.label}", why)
        grouped.setdefault(key, []).append(cell.seed)
    lines = []
    for (algorithm, label, first, why), seeds in grouped.items():
        seeds_text = ", ".join(map(str, seeds))
        lines.append(f"study: {algorithm} on {label} is the same computation as {first} "
                     f"(seed{'s' * (len(seeds) > 1)} {seeds_text}): {why}; run once, "
                     "recorded with same_as")
    return lines


def reused_row(cell: Planned, first: dict[str, Any], first_name: str) -> dict[str, Any]:
    """The row of `cell`, which repeats the cell whose row is `first`.

    Its results, with the cell's own algorithm, topology and measurements, and `same_as` naming
    that cell.

    Parameters
    ----------
    cell : the repeating cell.
    first : the row of the cell it repeats.
    first_name : that cell's name.

    Returns
    -------
    dict.
    """
    row = dict(first)
    row.update({"algorithm": cell.algorithm, "label": cell.entry.label,
                "sweep": cell.entry.sweep, "vary": cell.entry.vary, "value": cell.entry.value,
                "seed": cell.seed, "same_as": first_name})
    row.update({k: (cell.metrics or {}).get(k) for k in CELL_METRICS})
    return row


def echo_same(planned: list[Planned], echo: Callable[[str], None]) -> dict[int, tuple[int, str]]:
    """`same_cells` of `planned`, each group said in one line through `echo`.

    Parameters
    ----------
    planned : the study's cells.
    echo : prints a line.

    Returns
    -------
    dict, as `same_cells`.
    """
    same = same_cells(planned)
    for line in same_lines(planned, same):
        echo(line)
    return same
