"""A study's numbers: the mean and sd over seeds of each (algorithm, topology), the files, the
printed table.

study.csv: one row per cell (algorithm, topology, seed) with its topology's metrics
(analysis.study_measure) and its results; `same_as` names the cell whose run a cell reused,
being the same computation (analysis.study_same), and `run_dir` is then that run's.
study_mean.csv: one row per algorithm and topology with the mean and sample sd (over its seeds
that finished) of each metric and result, and how many seeds reached the target. sd is empty
with one seed.

Rounds to target are censored: a run that never reached the target is known only to need more
than its rounds R. The mean and sd over the seeds are given only when every finished seed
reached it; otherwise `rounds_to_target_mean` is a lower bound, each censored seed counted at
R + 1 (`rounds_to_target_lower_bound` is true, the sd empty, the table prints ">= mean", and
"> R" when no seed reached it), and `rounds_to_target_median` is the median with the censored
seeds at +inf (inf when half of them or more never reached it). The mean simulated seconds to
target are given only when every seed reached it.
"""

from __future__ import annotations

import csv
import io
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from analysis.study_measure import CELL_METRICS, GAPS, metric_label
from analysis.study_rank import CENSORING, SIGN, correlation_text

RESULTS = ("final_acc", "best_acc", "best_loss", "rounds_to_target", "seconds_to_target",
           "rounds")
COLUMNS = ("algorithm", "label", "sweep", "vary", "value", "seed", "status", *CELL_METRICS,
           *RESULTS, "run_dir", "same_as")
AVERAGED = ("diameter", "spectral_gap_per_round", "spectral_gap_per_period", "mixing_time",
            "exact_averaging_rounds", "effective_neighbors", "heterogeneity", "edges",
            "final_acc", "best_acc", "rounds_to_target", "seconds_to_target")
MEAN_COLUMNS = ("algorithm", "label", "sweep", "vary", "value", "kind", "seeds", "finished",
                "reached", *(f"{key}_{stat}" for key in AVERAGED for stat in ("mean", "sd")),
                "rounds_to_target_lower_bound", "rounds_to_target_median", "same_runs_as")
SHOWN = ("diameter", "spectral_gap_per_round", "effective_neighbors", "heterogeneity")


def _stats(values: list[float]) -> tuple[float | None, float | None]:
    """(mean, sample sd) of the values; (None, None) if there are none, sd None for one."""
    if not values:
        return None, None
    mean = float(np.mean(values))
    return mean, (float(np.std(values, ddof=1)) if len(values) > 1 else None)


def _censored(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """rounds_to_target and seconds_to_target over the finished seeds `ok`, censored (module
    docstring)."""
    out: dict[str, Any] = dict.fromkeys(("rounds_to_target_mean", "rounds_to_target_sd",
                                         "rounds_to_target_median", "seconds_to_target_mean",
                                         "seconds_to_target_sd"))
    out["rounds_to_target_lower_bound"] = False
    values = [r.get("rounds_to_target") for r in ok]
    if not any("rounds_to_target" in r for r in ok):  # no target
        return out
    if all(v is not None for v in values):
        out["rounds_to_target_mean"], out["rounds_to_target_sd"] = _stats(values)
        seconds = [r.get("seconds_to_target") for r in ok]
        if all(v is not None for v in seconds):
            out["seconds_to_target_mean"], out["seconds_to_target_sd"] = _stats(seconds)
    elif all(r.get("rounds") for r in ok):
        out["rounds_to_target_mean"] = float(np.mean(
            [r["rounds"] + 1 if v is None else v for r, v in zip(ok, values)]))
        out["rounds_to_target_lower_bound"] = True
    out["rounds_to_target_median"] = float(np.median(
        [math.inf if v is None else v for v in values])) if values else None
    return out


def means(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (algorithm, label) (in first-seen order): the mean and sd over the seeds that
    finished.

    Rounds and seconds to target are censored (module docstring); `reached` counts the seeds that
    reached the target. An infinite value (diameter, rounds to exact averaging) makes the mean
    infinite. `same_runs_as`: the earlier topology of the same algorithm whose runs these are
    (every finished cell reused one of its runs: a sweep value equal to it).

    Parameters
    ----------
    rows : the study's rows.

    Returns
    -------
    list of dict.
    """
    keys = list(dict.fromkeys((r.get("algorithm", ""), r["label"]) for r in rows))
    runs_of: dict[tuple[str, str], set[str]] = {}
    out = []
    for algorithm, label in keys:
        runs = [r for r in rows if (r.get("algorithm", ""), r["label"]) == (algorithm, label)]
        ok = [r for r in runs if r["status"] == "ok"]
        first = runs[0]
        row: dict[str, Any] = {"algorithm": algorithm, "label": label,
                               "sweep": first.get("sweep", ""),
                               "vary": first.get("vary", ""), "value": first.get("value"),
                               "kind": next((r.get("kind") for r in ok), first.get("kind")),
                               "seeds": len(runs), "finished": len(ok),
                               "reached": sum(r.get("rounds_to_target") is not None for r in ok)}
        for key in AVERAGED[:-2]:
            values = [float(r[key]) for r in ok if r.get(key) is not None]
            if values and not all(math.isfinite(v) for v in values):
                row[f"{key}_mean"], row[f"{key}_sd"] = math.inf, None
            else:
                row[f"{key}_mean"], row[f"{key}_sd"] = _stats(values)
        row.update(_censored(ok))
        row["status"] = "ok" if ok else runs[0]["status"]
        mine = {r["run_dir"] for r in ok if r.get("run_dir")}
        row["same_runs_as"] = next((other for (a, other), theirs in runs_of.items()
                                    if a == algorithm and mine and theirs == mine), None)
        runs_of[(algorithm, label)] = mine
        out.append(row)
    return out


def _csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def study_time(wall_s: float, rounds_s: float, evaluation_s: float,
               writing_s: float) -> dict[str, float]:
    """Where a study's wall time went.

    Its rounds' training, evaluation, the tables and figures, and start-up (the rest: planning,
    data, building runs, checkpoints); and the percentage outside the rounds.

    Parameters
    ----------
    wall_s : the study's wall time (s).
    rounds_s : its rounds' time (s).
    evaluation_s : its evaluations' time (s).
    writing_s : the tables' and figures' time (s).

    Returns
    -------
    dict of seconds (wall_s, rounds_s, evaluation_s, startup_s, writing_s) and outside_pct.
    """
    startup = max(wall_s - rounds_s - evaluation_s - writing_s, 0.0)
    outside = wall_s - rounds_s
    return {"wall_s": wall_s, "rounds_s": rounds_s, "evaluation_s": evaluation_s,
            "startup_s": startup, "writing_s": writing_s,
            "outside_pct": 100 * outside / wall_s if wall_s > 0 else 0.0}


def time_text(spent: dict[str, float]) -> str:
    """One line: the wall time, the rounds' share and what lay outside them.

    Parameters
    ----------
    spent : `study_time`'s dict.

    Returns
    -------
    str.
    """
    outside = spent["wall_s"] - spent["rounds_s"]
    return (f"time: {spent['wall_s']:.1f} s, rounds {spent['rounds_s']:.1f} s; outside the "
            f"rounds {outside:.1f} s ({spent['outside_pct']:.1f} %): evaluation "
            f"{spent['evaluation_s']:.1f} s, start-up {spent['startup_s']:.1f} s, tables and "
            f"figures {spent['writing_s']:.1f} s")


def write_study(out: Path, cfg: Any, result: Any, began: float, bar: Any,
                figures: bool = True) -> list[Path]:
    """Write study.csv, study_mean.csv, the figures (analysis.study_plots) unless not
    `figures`, then study.json.

    study.json holds the study's time since `began` as `bar` measured its rounds; sets
    result.time.

    Parameters
    ----------
    out : the study's folder.
    cfg : the study's config.
    result : the StudyResult.
    began : the study's start (time.perf_counter).
    bar : the study's progress bar (study_cells.Progress).
    figures : draw the figures.

    Returns
    -------
    list of the Paths written.
    """
    from analysis.study_figures import plot_study
    from p2pfl.report.results import atomic_file, write_json_atomic

    writing = time.perf_counter()
    files = [out / "study.csv", out / "study_mean.csv", out / "study.json"]
    for path, rows, columns in ((files[0], result.rows, COLUMNS),
                                (files[1], result.means, MEAN_COLUMNS)):
        with atomic_file(path) as f:
            f.write(_csv(rows, columns))
    algorithms = algorithms_of(result.rows)
    d = cfg.data
    nodes = ("" if any(r.get("vary") == "num_nodes" for r in result.rows)
             else f", {d.num_nodes} nodes")
    who = f"{algorithms[0]} on " if len(algorithms) == 1 else ""
    title = f"{who}{d.name}{nodes}, {cfg.rounds} rounds"  # the figures add the seeds
    drawn = plot_study(result, out, title) if figures else []
    done = time.perf_counter()
    result.time = study_time(done - began, bar.rounds_s(), bar.evaluation_s, done - writing)
    write_json_atomic(files[2], {
        "target": result.target, "target_metric": result.target_metric,
        "target_note": result.target_note, "algorithms": algorithms, "gamma": result.gamma,
        "x": list(result.x), "rows": _inf_as_text(result.rows),
        "means": _inf_as_text(result.means),
        "rank_correlation": {"with": "rounds_to_target", "points": "one per cell that "
                             "finished or diverged, seeds pooled, per algorithm", "sign": SIGN,
                             "censoring": CENSORING, "coefficients": result.correlations},
        "time": result.time})
    return files + drawn


def _inf_as_text(obj: Any) -> Any:
    """`obj` with every infinite float as the string "inf" (strict JSON writes it as null,
    which would read as "no value": a diameter or rounds to exact averaging that are
    infinite, a median of censored rounds)."""
    if isinstance(obj, dict):
        return {k: _inf_as_text(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_inf_as_text(v) for v in obj]
    return "inf" if isinstance(obj, float) and math.isinf(obj) and obj > 0 else obj


def algorithms_of(rows: list[dict[str, Any]]) -> list[str]:
    """The study's algorithm labels, in first-seen order.

    Parameters
    ----------
    rows : rows or mean rows.

    Returns
    -------
    list of str.
    """
    return list(dict.fromkeys(r.get("algorithm", "") for r in rows))


def target_text(result: Any, short: bool = False) -> str:
    """The study's common target as text.

    Parameters
    ----------
    result : the StudyResult.
    short : '80.0 %' rather than '80.0 % test accuracy'.

    Returns
    -------
    str, '80.0 % test accuracy' or 'test loss 0.5', or 'target' without one.
    """
    if result.target is None:
        return "target"
    if getattr(result, "target_metric", "test_acc") == "test_loss":
        return f"test loss {result.target:g}"
    return f"{100 * result.target:.1f} %" + ("" if short else " test accuracy")


def _cell(value: Any, sd: Any = None, scale: float = 1.0, digits: int | None = None) -> str:
    """'mean ± sd' (sd left out when None or 0), `value` x `scale`, with `digits` decimals (None:
    4 significant digits)."""
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return "inf"

    def fmt(v: float) -> str:
        return f"{scale * v:.{digits}f}" if digits is not None else f"{scale * v:.4g}"

    noise = sd is None or abs(sd) <= 1e-9 * max(abs(value), 1e-300)  # equal up to rounding
    return fmt(value) + ("" if noise else f" ± {fmt(sd)}")


def rounds_cell(m: dict[str, Any]) -> str:
    """Rounds to target of a mean row, as a table cell.

    Parameters
    ----------
    m : a mean row.

    Returns
    -------
    str: 'mean ± sd', '>= mean' (a lower bound: some seeds never reached it) or '> R' (none did),
    '-' without a target.
    """
    mean = m.get("rounds_to_target_mean")
    if mean is None:
        return "-"
    if not m.get("rounds_to_target_lower_bound"):
        return _cell(mean, m.get("rounds_to_target_sd"), 1, 1)
    return f"> {mean - 1:.0f}" if m["reached"] == 0 else f">= {mean:.1f}"


def gap_cell(m: dict[str, Any], key: str = "spectral_gap_per_round") -> str:
    """A gap of a mean row, as a table cell.

    One of a topology that averages exactly in k rounds (gap 1, as the complete graph's) reads
    '1 (exact: k)'.

    Parameters
    ----------
    m : a mean row.
    key : the gap's metric.

    Returns
    -------
    str.
    """
    exact = m.get("exact_averaging_rounds_mean")
    text = _cell(m.get(f"{key}_mean"), m.get(f"{key}_sd"))
    return f"{text} (exact: {exact:g})" if exact is not None and math.isfinite(exact) else text


def format_table(result: Any) -> str:
    """The per-(algorithm, topology) means as aligned text (what `p2pfl study` prints).

    The algorithm column when there are several, the target stated, then the rank correlations
    (analysis.study_rank).

    Parameters
    ----------
    result : the StudyResult.

    Returns
    -------
    str.
    """
    several = len(algorithms_of(result.means)) > 1
    gamma = getattr(result, "gamma", 0.9)
    heads = ("algorithm",) * several + (
        "topology", "kind", "seeds", *(metric_label(k, gamma, head=True) for k in SHOWN),
        "final acc (%)", f"rounds to {target_text(result, short=True)}", "reached")
    body = []
    for m in result.means:
        if m["status"] != "ok":
            continue
        shown = [gap_cell(m, k) if k in GAPS else _cell(m.get(f"{k}_mean"), m.get(f"{k}_sd"))
                 for k in SHOWN]
        body.append((m["algorithm"],) * several + (
            m["label"], m["kind"] or "-", str(m["finished"]), *shown,
            _cell(m["final_acc_mean"], m["final_acc_sd"], 100, 1), rounds_cell(m),
            f"{m['reached']}/{m['finished']}"))
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]
    who = "{algorithm} on " if several else ""
    lines += [f"{who.format(**r)}{r['label']} (seed {r['seed']}): {r['status']}"
              for r in result.rows if r["status"] != "ok"]
    if any("(exact: " in cell for b in body for cell in b):
        lines.append("gap/round: 1 - the per-round rate; (exact: k): the topology averages "
                     "exactly in k rounds, so its gap is 1 however large k is")
    if any(m.get("rounds_to_target_lower_bound") for m in result.means):
        lines.append("rounds to target: '>= x' is a lower bound (seeds that never reached the "
                     "target counted at their rounds + 1), '> R': no seed reached it in R rounds")
    note = getattr(result, "target_note", "")
    lines.append(f"target: {note or target_text(result)}")
    correlations = getattr(result, "correlations", [])
    if correlations:
        lines += ["", correlation_text(correlations, target_text(result, short=True), gamma)]
    if getattr(result, "time", None):
        lines.append(time_text(result.time))
    return "\n".join(lines)
