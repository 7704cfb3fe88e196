"""One figure style for every plot of the project (run curves, comparisons, studies, analysis).

- `series_style(i)`: the i-th series' colour, line style and marker; past the 10 colours of the
  cycle the line style changes, so two series never look alike.
- `keyed_styles(keys)`: the same by name: a name (an algorithm, a variant) has one colour in
  every figure (from its hash); its seeds, and names whose hash gives the same colour, differ in
  line style.
- `round_axis(ax)`: integer ticks on an axis that counts rounds.
- `log_axis(ax, "x" | "y")`, `log_ticks(axis, low, high)`: a log scale whose tick labels never
  collide (under three decades 1-2-5 labels, above one label per decade).
- `log_floor(curves)`: the bottom of a log axis that a curve at exact zero does not stretch
  (such a curve is drawn along it).
- `legend_outside(ax)`: the legend to the right of the axes, never over a curve.
- `save(fig, path)`: `path`.png (150 dpi) and `path`.pdf, laid out (tight unless the figure has
  a layout engine), written whole, then the figure closed.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FuncFormatter,
    LogFormatterSciNotation,
    LogLocator,
    MaxNLocator,
    NullFormatter,
)

COLORS = tuple(f"C{i}" for i in range(10))
KEYED_COLORS = (*COLORS, "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
                "#000000")  # keyed_styles: the cycle and six dark ones (tab20b's, black)
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DPI = 150
EXACT = 1e-8  # log_floor: a curve below this fraction of the largest value is a zero


def marker(i: int) -> str:
    """The i-th of 8 marker shapes (tells apart curves that share a colour).

    Parameters
    ----------
    i : index, >= 0.

    Returns
    -------
    str, a matplotlib marker.
    """
    return MARKERS[i % len(MARKERS)]


def series_style(i: int) -> dict[str, Any]:
    """Colour, line style and marker of the i-th series: unique for i < 40.

    Parameters
    ----------
    i : index, >= 0.

    Returns
    -------
    dict with color, linestyle and marker.
    """
    return {"color": COLORS[i % len(COLORS)],
            "linestyle": LINESTYLES[i // len(COLORS) % len(LINESTYLES)],
            "marker": MARKERS[i // len(COLORS) % len(MARKERS)]}


def keyed_styles(keys: Sequence[str]) -> list[dict[str, Any]]:
    """Colour, line style and marker of each series from its name: a name has the same colour
    in every figure.

    A name's colour is KEYED_COLORS at the name's CRC-32 (stable across processes and figures,
    whatever else a figure shows). Series that share a colour (a name's seeds, or two names
    whose CRC-32 fall on one colour) take successive line styles and markers, in drawing order.

    Parameters
    ----------
    keys : each series' name, in drawing order (repeated for the seeds of one name).

    Returns
    -------
    list of dicts with color, linestyle and marker, one per series.
    """
    used: dict[str, int] = {}
    styles = []
    for key in keys:
        colour = KEYED_COLORS[zlib.crc32(key.encode()) % len(KEYED_COLORS)]
        k = used.get(colour, 0)
        used[colour] = k + 1
        styles.append({"color": colour, "linestyle": LINESTYLES[k % len(LINESTYLES)],
                       "marker": MARKERS[k % len(MARKERS)]})
    return styles


def round_axis(ax: Axes, axis: str = "x") -> None:
    """Integer ticks on an axis: a count of rounds has no fractions.

    Also when the view holds a single integer, e.g. every point at round 3.

    Parameters
    ----------
    ax : the axes.
    axis : "x" or "y".
    """
    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def log_axis(ax: Axes, axis: str, low: float | None = None, high: float | None = None) -> None:
    """Log scale on `axis` with labels that do not collide.

    Parameters
    ----------
    ax : the axes.
    axis : "x" or "y".
    low, high : the data's positive range (default: the axis limits).
    """
    getattr(ax, f"set_{axis}scale")("log")
    if low is None or high is None:
        low, high = getattr(ax, f"get_{axis}lim")()
    log_ticks(getattr(ax, f"{axis}axis"), low, high)


def log_ticks(target: Axis, low: float, high: float) -> None:
    """Ticks of a log axis (or colour bar) over [low, high].

    One labelled tick per decade from three decades on; below, plainly labelled ticks at 1, 2, 5
    (and 3, 7 within one decade).

    Parameters
    ----------
    target : the matplotlib Axis.
    low, high : the range.
    """
    decades = math.log10(high / low) if high > low > 0 else 0.0
    subs = (1.0, 2.0, 3.0, 5.0, 7.0) if decades < 1 else (1.0, 2.0, 5.0) if decades < 3 else (1.0,)
    target.set_major_locator(LogLocator(base=10, subs=subs, numticks=8))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}") if decades < 3
                               else LogFormatterSciNotation())
    target.set_minor_formatter(NullFormatter())


def log_floor(curves: Sequence[Sequence[float]], exact: float = EXACT) -> float | None:
    """Bottom of a log axis for `curves`.

    A third of the smallest positive value of the curves that are not at exact zero (a curve
    whose largest value is below `exact` times the largest of all is: numerical noise of a zero,
    e.g. consensus on a complete graph).

    Parameters
    ----------
    curves : the values of each curve.
    exact : relative level below which a curve counts as exact zero.

    Returns
    -------
    float, or None if nothing is positive.
    """
    tops = [max(c) for c in curves if len(c)]
    top = max(tops, default=0.0)
    if top <= 0:
        return None
    real = [c for c in curves if len(c) and max(c) > exact * top]
    return min(min(v for v in c if v > 0) for c in real) / 3


def legend_outside(ax: Axes, handles: list | None = None,
                   labels: list[str] | None = None) -> None:
    """The legend right of `ax`, top-aligned (with many entries, in two columns).

    Parameters
    ----------
    ax : the axes.
    handles, labels : the entries (default: the axes').
    """
    if handles is None or labels is None:
        handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  ncols=2 if len(handles) > 18 else 1, borderaxespad=0.0)


def save(fig: Figure, path: str | Path, make_parents: bool = True) -> list[Path]:
    """Write `path`.png and `path`.pdf (each to a temporary name, then renamed), close `fig`.

    Parameters
    ----------
    fig : the figure (closed even on failure).
    path : the files' path, without suffix.
    make_parents : create missing folders (else a missing folder is a FileNotFoundError).

    Returns
    -------
    list of the two Paths written.
    """
    path = Path(path)
    paths = [path.with_suffix(".png"), path.with_suffix(".pdf")]
    try:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        if fig.get_layout_engine() is None:
            fig.tight_layout()
        for p in paths:
            tmp = p.with_name(f".{p.name}.tmp")
            fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format=p.suffix[1:])
            os.replace(tmp, p)
    finally:
        plt.close(fig)
    return paths
