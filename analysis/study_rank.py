"""Which topology metric predicts convergence: rank correlations of each metric a study records
with the rounds its runs took to reach the common target, as a concordance index counts them.

One point per cell (algorithm, topology, seed) whose run finished or diverged, seeds pooled, per
algorithm; a cell that reused another cell's run of the same algorithm (a sweep value equal to a
topology of the study: the same run under two labels) counts once. What is known of a run's
rounds to target T (`Outcome`):

- reached: T = the first round whose model reached the target;
- censored: the run never reached it within its R rounds, so T > R only;
- diverged: ranked after every run that did not diverge (it never gets there), tied with the
  other diverged runs.

A pair of runs counts only where its order in T is known, as in Harrell's concordance index:
both reached (a tie if in the same round); one reached in round a and the other was censored
at R >= a (the censored one is slower); one diverged and the other did not (the diverged one is
slower); both diverged (a tie). Two censored runs, or a run censored at R before the round a
the other reached the target in, are not ordered, and the pair is left out. `pairs` counts the
pairs that count. Kendall's tau is tau-b over them: (concordant - discordant) / sqrt((pairs not
tied in the metric) x (pairs not tied in T)), which is `scipy.stats.kendalltau`'s tau-b when
every pair counts; its p-value is scipy's then, and None when a pair is left out (scipy's test
assumes every pair). Spearman's rho (`scipy.stats.spearmanr`) needs every run ranked: it ranks
the censored runs after every run that reached the target, tied with each other, which is known
only when each censored run ran at least as many rounds as any run took to reach the target;
it is None otherwise.

A metric that is not defined for a cell (the effective neighbours of an aperiodic schedule)
leaves that cell out of its correlation; rounds to exact averaging of a topology that never
averages exactly are infinite, ranked after every finite value (ties among the infinite).

Sign: a positive coefficient means that a larger metric goes with more rounds to the target
(slower); a good predictor of fast convergence has a negative one if larger means better
connected (spectral gap, effective neighbours) and a positive one otherwise (diameter, mixing
time, heterogeneity). The p-values take the cells as independent pairs: the seeds of one
topology share its metric, so read them as a rough guide.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import numpy as np

from analysis.study_measure import metric_label
from topologies import ParameterError

RANKED = ("spectral_gap_per_round", "diameter", "mixing_time", "effective_neighbors",
          "heterogeneity", "exact_averaging_rounds", "edges")
SIGN = "positive: a larger metric goes with more rounds to the target"
CENSORING = ("a pair of runs counts only where its order is known: a run that diverged ranks "
             "after every run that did not, one that never reached the target after one that "
             "reached it within its rounds")
MIN_POINTS = 3  # fewer cells give no correlation
REACHED, CENSORED, DIVERGED = "reached", "censored", "diverged"


class Outcome(NamedTuple):
    """What is known of a run's rounds to target (module docstring).

    Attributes
    ----------
    kind : REACHED, CENSORED or DIVERGED.
    rounds : REACHED: the round it first reached the target; CENSORED: the rounds it ran
        without reaching it (its rounds to target exceed them); DIVERGED: unused.
    """

    kind: str
    rounds: float = math.nan


def outcome(row: dict[str, Any]) -> Outcome:
    """The `Outcome` of a study row: reached (`rounds_to_target`), censored at its `rounds`, or
    diverged (`status` "diverged: ...").

    Parameters
    ----------
    row : a row of a finished or diverged cell, with rounds_to_target.

    Returns
    -------
    Outcome.
    """
    if row["status"].startswith("diverged"):
        return Outcome(DIVERGED)
    if row.get("rounds_to_target") is None:
        return Outcome(CENSORED, float(row["rounds"]))
    return Outcome(REACHED, float(row["rounds_to_target"]))


def _ranked(values: list[float]) -> list[float]:
    """`values` with every inf replaced by a number above every finite one: the same ranks."""
    top = max((v for v in values if math.isfinite(v)), default=0.0) + 1.0
    return [v if math.isfinite(v) else top for v in values]


def known_order(outcomes: list[Outcome]) -> np.ndarray:
    """Which run of each pair reaches the target later, where that is known (module docstring).

    Parameters
    ----------
    outcomes : the runs' outcomes, [n].

    Returns
    -------
    float array [n, n]: entry (i, j) is +1 if run i is known to be slower than run j, -1 if
    faster, 0 if they are known to tie, nan if their order is not known (diagonal: 0).

    Raises
    ------
    ParameterError
        naming outcomes if a kind is unknown, or the rounds of a run that reached the target or
        was censored are not a finite number >= 0.
    """
    for o in outcomes:
        if o.kind not in (REACHED, CENSORED, DIVERGED):
            raise ParameterError("outcomes", f"kind must be {REACHED!r}, {CENSORED!r} or "
                                 f"{DIVERGED!r}, got {o.kind!r}")
        if o.kind != DIVERGED and not (math.isfinite(o.rounds) and o.rounds >= 0):
            raise ParameterError("outcomes", f"rounds of a {o.kind} run must be a finite number "
                                 f">= 0, got {o.rounds}")
    kind = np.array([o.kind for o in outcomes])
    rounds = np.array([o.rounds for o in outcomes], dtype=float)
    reached, censored, diverged = (kind == k for k in (REACHED, CENSORED, DIVERGED))
    order = np.full((len(outcomes),) * 2, np.nan)
    r, h = rounds[reached], rounds[censored]
    order[np.ix_(reached, reached)] = np.sign(r[:, None] - r[None, :])
    before = r[:, None] <= h[None, :]  # reached in a <= R: faster than the run censored at R
    order[np.ix_(reached, censored)] = np.where(before, -1.0, np.nan)
    order[np.ix_(censored, reached)] = np.where(before.T, 1.0, np.nan)
    order[diverged, :] = 1.0
    order[:, diverged] = -1.0
    order[np.ix_(diverged, diverged)] = 0.0
    np.fill_diagonal(order, 0.0)
    return order


def _rank_values(outcomes: list[Outcome]) -> list[float] | None:
    """Values whose ranks are the runs' order, the censored runs tied after every run that
    reached the target and the diverged ones tied last; None where that order is not known (a
    run censored before some run reached the target)."""
    reached = [o.rounds for o in outcomes if o.kind == REACHED]
    censored = [o.rounds for o in outcomes if o.kind == CENSORED]
    top = max(reached, default=0.0)
    if censored and min(censored) < top:
        return None
    place = {CENSORED: top + 1.0, DIVERGED: top + 2.0}
    return [o.rounds if o.kind == REACHED else place[o.kind] for o in outcomes]


def correlation(x: list[float], outcomes: list[Outcome]) -> dict[str, float | int | None]:
    """Kendall's tau over the pairs of known order and Spearman's rho of a metric with the
    runs' rounds to target, with their p-values (module docstring).

    inf in `x` ranks after every finite value (ties among the infinite).

    Parameters
    ----------
    x : the metric of each run, [n].
    outcomes : what is known of each run's rounds to target, [n].

    Returns
    -------
    dict with kendall_tau, kendall_p, spearman_rho, spearman_p and pairs (the pairs whose order
    is known, ties included, of n (n - 1) / 2). A coefficient is None with fewer than MIN_POINTS
    runs or without a counted pair that is untied in x and one untied in rounds; kendall_p is
    None where a pair is left out, spearman_rho and spearman_p where a run is censored before
    another reached the target.

    Raises
    ------
    ParameterError
        naming outcomes if its length is not that of x, x if it holds NaN (and as
        `known_order`).
    """
    from scipy.stats import kendalltau, spearmanr

    if len(outcomes) != len(x):
        raise ParameterError("outcomes", f"must have one entry per value of x ({len(x)}), got "
                             f"{len(outcomes)}")
    if any(math.isnan(v) for v in x):
        raise ParameterError("x", "must not hold NaN (leave out the runs whose metric is not "
                             "defined)")
    out: dict[str, float | int | None] = dict.fromkeys(("kendall_tau", "kendall_p",
                                                        "spearman_rho", "spearman_p"))
    xr = np.array(_ranked(list(x)), dtype=float)
    upper = np.triu_indices(len(xr), 1)
    in_t = known_order(outcomes)[upper]
    counted = ~np.isnan(in_t)
    in_x = np.sign(xr[:, None] - xr[None, :])[upper][counted]
    in_t = in_t[counted]
    out["pairs"] = int(counted.sum())
    untied = int(np.count_nonzero(in_x)) * int(np.count_nonzero(in_t))
    if len(xr) < MIN_POINTS or untied == 0:
        return out
    out["kendall_tau"] = float(np.sum(in_x * in_t) / math.sqrt(untied))
    ranks = _rank_values(outcomes)
    if ranks is None:
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, tau_p = kendalltau(xr, ranks)
        rho, rho_p = spearmanr(xr, ranks)
    if counted.all() and not math.isnan(tau_p):
        out["kendall_p"] = float(tau_p)
    for key, value in (("spearman_rho", rho), ("spearman_p", rho_p)):
        out[key] = None if math.isnan(value) else float(value)
    return out


def _cells(rows: list[dict[str, Any]], algorithm: str) -> list[dict[str, Any]]:
    """The finished or diverged cells of `algorithm`, each run once (module docstring)."""
    cells, runs = [], set()
    for row in rows:
        run = row.get("run_dir") or id(row)  # a row without a run directory is its own cell
        ended = row["status"] == "ok" or row["status"].startswith("diverged")
        if row.get("algorithm", "") == algorithm and ended and run not in runs:
            runs.add(run)
            cells.append(row)
    return cells


def rank_correlations(rows: list[dict[str, Any]],
                      metrics: tuple[str, ...] = RANKED) -> list[dict[str, Any]]:
    """One dict per algorithm and metric: the rank correlation of the metric with rounds to target.

    Parameters
    ----------
    rows : the study's rows; those that finished with rounds_to_target, and rounds where that
        is None.
    metrics : the metrics ranked.

    Returns
    -------
    list of dict: algorithm, metric, n (cells ranked), censored (of them, runs that never
    reached the target), diverged (of them, runs that diverged, ranked last), pairs (pairs of
    cells whose order is known, of n (n - 1) / 2), kendall_tau, kendall_p, spearman_rho,
    spearman_p (module docstring).
    """
    out = []
    for algorithm in dict.fromkeys(r.get("algorithm", "") for r in rows):
        cells = _cells(rows, algorithm)
        for metric in metrics:
            ranked = [r for r in cells
                      if r.get(metric) is not None and not math.isnan(float(r[metric]))]
            outcomes = [outcome(r) for r in ranked]
            out.append({"algorithm": algorithm, "metric": metric, "n": len(ranked),
                        "censored": sum(o.kind == CENSORED for o in outcomes),
                        "diverged": sum(o.kind == DIVERGED for o in outcomes),
                        **correlation([float(r[metric]) for r in ranked], outcomes)})
    return out
def strongest(correlations: list[dict[str, Any]], algorithm: str) -> dict[str, Any] | None:
    """The metric of `algorithm` with the largest |Kendall tau| (the first of equals).

    Parameters
    ----------
    correlations : `rank_correlations`' dicts.
    algorithm : the algorithm's label.

    Returns
    -------
    dict, or None without a defined tau.
    """
    mine = [c for c in correlations if c["algorithm"] == algorithm
            and c["kendall_tau"] is not None]
    return max(mine, key=lambda c: abs(c["kendall_tau"]), default=None)


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def _pairs(c: dict[str, Any]) -> str:
    """'counted/all' pairs of a `rank_correlations` dict."""
    return f"{c['pairs']}/{c['n'] * (c['n'] - 1) // 2}"


def correlation_text(correlations: list[dict[str, Any]], target: str, gamma: float) -> str:
    """The rank correlations as aligned text (what `p2pfl study` prints).

    Per algorithm when there are several, with the pairs counted, the strongest metric, the sign
    convention and the censoring rule.

    Parameters
    ----------
    correlations : `rank_correlations`' dicts.
    target : the target as text.
    gamma : the decay of the effective number of neighbours.

    Returns
    -------
    str ("" without correlations).
    """
    if not correlations:
        return ""
    algorithms = list(dict.fromkeys(c["algorithm"] for c in correlations))
    several = len(algorithms) > 1
    heads = ("algorithm",) * several + ("metric", "cells", "censored", "diverged", "pairs",
                                        "Kendall tau", "p", "Spearman rho")
    body = [(c["algorithm"],) * several + (
        metric_label(c["metric"], gamma, head=True), str(c["n"]), str(c["censored"]),
        str(c["diverged"]), _pairs(c), _number(c["kendall_tau"]),
        "-" if c["kendall_p"] is None else f"{c['kendall_p']:.2g}", _number(c["spearman_rho"]))
        for c in correlations]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(heads)]
    lines = [f"rank correlation with rounds to {target} (one point per cell that finished or "
             f"diverged, seeds pooled; {SIGN}; {CENSORING}; pairs: those counted, of all):",
             "  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]
    for algorithm in algorithms:
        best = strongest(correlations, algorithm)
        who = f"{algorithm}: " if several else ""
        if best is None:
            lines.append(f"{who}no metric could be ranked (too few cells, or no spread)")
        else:
            tied = [metric_label(c["metric"], gamma) for c in correlations
                    if c["algorithm"] == algorithm and c is not best
                    and c["kendall_tau"] is not None
                    and abs(abs(c["kendall_tau"]) - abs(best["kendall_tau"])) < 1e-9]
            lines.append(f"{who}strongest rank correlation: "
                         f"{metric_label(best['metric'], gamma)} (Kendall tau "
                         f"{best['kendall_tau']:+.2f}, {best['n']} cells, {best['censored']} "
                         f"censored, {best['diverged']} diverged, {_pairs(best)} pairs"
                         f"{'; as strong: ' + ', '.join(tied) if tied else ''})")
    return "\n".join(lines)
