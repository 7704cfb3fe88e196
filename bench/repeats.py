"""A workload run several times (`p2pfl bench --repeats R`): each row's median and range."""

from __future__ import annotations

import statistics
from typing import Any

SHOWN = (("s/round", "s_per_round", ".3f"), ("vs loop", "speedup", ".2f"),
         ("% matmul", "pct_of_matmul", ".0f"), ("% products", "pct_of_products", ".0f"),
         ("matmul GFLOP/s", "matmul_gflops", ".0f"),
         ("products GFLOP/s", "products_gflops", ".0f"))


def spread(rows: list[dict[str, Any]], key: str, form: str) -> str:
    """'median (min-max)' of `key` over `rows` (those that have it).

    Parameters
    ----------
    rows : result rows.
    key : the number.
    form : its format spec (".3f").

    Returns
    -------
    str, 'n/a' when no row has it.
    """
    values = [r[key] for r in rows if r.get(key) is not None]
    if not values:
        return "n/a"
    return f"{statistics.median(values):{form}} ({min(values):{form}}-{max(values):{form}})"


def repeat_lines(results: list[dict[str, Any]]) -> list[str]:
    """One line per solver and precision of one workload's repeated results.

    Parameters
    ----------
    results : `run_workload` dicts of the repeats.

    Returns
    -------
    list of str: the median and range over the repeats of each SHOWN number.
    """
    lines = []
    keys = dict.fromkeys((r["solver"], r["precision"]) for res in results for r in res["rows"])
    for solver, precision in keys:
        rows = [r for res in results for r in res["rows"]
                if (r["solver"], r["precision"]) == (solver, precision)]
        parts = ", ".join(f"{name} {spread(rows, key, form)}" for name, key, form in SHOWN)
        lines.append(f"  {results[0]['workload']} {solver} {precision}, {len(rows)} repeats, "
                     f"median (range): {parts}")
    return lines
