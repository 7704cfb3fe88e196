"""Which topology metric predicts convergence: rank correlations of each metric a study records
with the rounds its runs took to reach the common target.

One point per finished cell (algorithm, topology, seed), seeds pooled, per algorithm; a cell
that reused another cell's run of the same algorithm (a sweep value equal to a topology of the
study: the same run under two labels) counts once, and runs that diverged are left out (they
are counted, not ranked). Censoring: a run that never reached the target within its rounds is
ranked after every run that did, tied with the other runs that did not (its rounds to target
are only known to be larger than its rounds). Kendall's tau-b and Spearman's rho
(`scipy.stats.kendalltau`, `spearmanr`) both handle these ties. A metric that is not defined
for a cell (the effective neighbours of an aperiodic schedule) leaves that cell out of its
correlation; rounds to exact averaging of a topology that never averages exactly are
infinite, ranked after every finite value, as censored rounds are.

Sign: a positive coefficient means that a larger metric goes with more rounds to the target
(slower); a good predictor of fast convergence has a negative one if larger means better
connected (spectral gap, effective neighbours) and a positive one otherwise (diameter, mixing
time, heterogeneity). The p-values are scipy's, which take the cells as independent pairs:
the seeds of one topology share its metric, so read them as a rough guide.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from analysis.study_measure import metric_label

RANKED = ("spectral_gap_per_round", "diameter", "mixing_time", "effective_neighbors",
          "heterogeneity", "exact_averaging_rounds", "edges")
SIGN = "positive: a larger metric goes with more rounds to the target"
CENSORING = ("a run that never reached the target ranks after every run that did, tied with "
             "the others that did not")
MIN_POINTS = 3  # fewer cells give no correlation


def _ranked(values: list[float]) -> list[float]:
    """`values` with every inf replaced by a number above every finite one: the same ranks."""
    top = max((v for v in values if math.isfinite(v)), default=0.0) + 1.0
    return [v if math.isfinite(v) else top for v in values]


def correlation(x: list[float], y: list[float]) -> dict[str, float | None]:
    """Kendall's tau-b and Spearman's rho of the pairs (x, y), with their p-values.

    inf ranks after every finite value (ties among the infinite).

    Parameters
    ----------
    x, y : the paired values.

    Returns
    -------
    dict with kendall_tau, kendall_p, spearman_rho, spearman_p; None where undefined: fewer than
    MIN_POINTS pairs, or x or y constant.
    """
    from scipy.stats import kendalltau, spearmanr

    out: dict[str, float | None] = dict.fromkeys(("kendall_tau", "kendall_p", "spearman_rho",
                                                  "spearman_p"))
    if len(x) < MIN_POINTS or len(set(x)) < 2 or len(set(y)) < 2:
        return out
    xr, yr = _ranked(x), _ranked(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tau, tau_p = kendalltau(xr, yr)
        rho, rho_p = spearmanr(xr, yr)
    for key, value in zip(out, (tau, tau_p, rho, rho_p)):
        out[key] = None if math.isnan(value) else float(value)
    return out


def _cells(rows: list[dict[str, Any]], algorithm: str) -> list[dict[str, Any]]:
    """The finished cells of `algorithm`, each run once (module docstring)."""
    cells, runs = [], set()
    for row in rows:
        run = row.get("run_dir") or id(row)  # a row without a run directory is its own cell
        if row.get("algorithm", "") == algorithm and row["status"] == "ok" and run not in runs:
            runs.add(run)
            cells.append(row)
    return cells


def rank_correlations(rows: list[dict[str, Any]],
                      metrics: tuple[str, ...] = RANKED) -> list[dict[str, Any]]:
    """One dict per algorithm and metric: the rank correlation of the metric with rounds to target.

    Parameters
    ----------
    rows : the study's rows, with rounds_to_target.
    metrics : the metrics ranked.

    Returns
    -------
    list of dict: algorithm, metric, n (cells ranked), censored (of them, runs that never reached
    the target), diverged (cells left out), kendall_tau, kendall_p, spearman_rho, spearman_p
    (module docstring).
    """
    out = []
    for algorithm in dict.fromkeys(r.get("algorithm", "") for r in rows):
        cells = _cells(rows, algorithm)
        diverged = sum(r.get("algorithm", "") == algorithm and r["status"].startswith("diverged")
                       for r in rows)
        for metric in metrics:
            pairs = [(float(r[metric]), math.inf if r.get("rounds_to_target") is None
                      else float(r["rounds_to_target"])) for r in cells
                     if r.get(metric) is not None and not math.isnan(float(r[metric]))]
            x, y = [p[0] for p in pairs], [p[1] for p in pairs]
            out.append({"algorithm": algorithm, "metric": metric, "n": len(pairs),
                        "censored": sum(math.isinf(v) for v in y), "diverged": diverged,
                        **correlation(x, y)})
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


def correlation_text(correlations: list[dict[str, Any]], target: str, gamma: float) -> str:
    """The rank correlations as aligned text (what `p2pfl study` prints).

    Per algorithm when there are several, with the strongest metric, the sign convention and the
    censoring rule.

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
    heads = ("algorithm",) * several + ("metric", "cells", "censored", "Kendall tau", "p",
                                        "Spearman rho")
    body = [(c["algorithm"],) * several + (
        metric_label(c["metric"], gamma, head=True), str(c["n"]), str(c["censored"]),
        _number(c["kendall_tau"]), "-" if c["kendall_p"] is None else f"{c['kendall_p']:.2g}",
        _number(c["spearman_rho"])) for c in correlations]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(heads)]
    lines = [f"rank correlation with rounds to {target} (one point per finished cell, seeds "
             f"pooled; {SIGN}; {CENSORING}):",
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
                         f"censored{'; as strong: ' + ', '.join(tied) if tied else ''})")
    diverged = {c["algorithm"]: c["diverged"] for c in correlations if c["diverged"]}
    lines += [f"{a + ': ' if several else ''}{k} diverged cell{'s' * (k > 1)} left out"
              for a, k in diverged.items()]
    return "\n".join(lines)
