"""The parameters of the named topologies, each declared once with its default, limits and doc.

`TopologyParams` is what `build_schedule(name, n, **params)` takes; the `[topology]` config table
(p2pfl.config) extends it, so a new parameter is one field here (and its use in `registry.py`).
`param` is the general declaration of a dataclass field with limits, also used by algorithms'
options (p2pfl.options); `check_values` checks a dataclass against its fields' limits.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from topologies._common import ParameterError


def param(default: Any, *, low: float | None = None, high: float | None = None,
          low_open: bool = False, high_open: bool = False, choices: tuple[str, ...] = (),
          doc: str = "") -> Any:
    """A dataclass field with its limits: [low, high] (an end is excluded when `*_open`; None is
    unbounded) for numbers, `choices` for strings."""
    return field(default=default, metadata={"low": low, "high": high, "low_open": low_open,
                                            "high_open": high_open, "choices": choices,
                                            "doc": doc})


def check_number(value: float, low: float | None, high: float | None, low_open: bool = False,
                 high_open: bool = False) -> str:
    """Why `value` is outside [low, high] (ends excluded when open); "" when it is inside."""
    if not math.isfinite(value):
        return f"must be finite, got {value!r}"
    too_low = low is not None and (value < low or (value == low and low_open))
    too_high = high is not None and (value > high or (value == high and high_open))
    if not (too_low or too_high):
        return ""
    lo = "-inf" if low is None else low
    hi = "inf" if high is None else high
    interval = f"{'(' if low_open else '['}{lo}, {hi}{')' if high_open else ']'}"
    return f"{value!r} is out of range {interval}"


def check_values(values: Any) -> None:
    """Raise ParameterError (naming the field) for the first field of a dataclass outside the
    limits `param` declared for it."""
    for f in dataclasses.fields(values):
        meta, value = f.metadata, getattr(values, f.name)
        if meta.get("choices") and value not in meta["choices"]:
            raise ParameterError(f.name, f"unknown value {value!r} (allowed: "
                                 f"{', '.join(map(str, meta['choices']))})")
        if isinstance(value, int | float) and not isinstance(value, bool) and "low" in meta:
            why = check_number(value, meta["low"], meta["high"], meta["low_open"],
                               meta["high_open"])
            if why:
                raise ParameterError(f.name, why)


MAX_WINDOW = 1000  # most graphs unioned into one round's topology (each round builds them all)


@dataclass
class TopologyParams:
    """Parameters of the named topologies; each topology reads the ones its doc names."""

    out_degree: int = param(10, low=1, doc="k of random_out (fresh out-neighbours each round) "
                            "and random_out_graph")
    directed: bool = param(True, doc="exponential: i -> i + base^m (False: i <-> i +- base^m); "
                           "erdos_renyi: directed G(n, p); from_edges: edges i -> j; "
                           "from_adjacency: False forces an undirected graph")
    base: int = param(2, low=2, doc="offsets base^m of exponential")
    rows: int = param(0, low=0, doc="grid / torus shape, rows * cols = n; 0 = choose (rows = "
                      "the largest divisor of n not above sqrt(n))")
    cols: int = param(0, low=0, doc="see rows")
    p: float = param(0.1, low=0, high=1, doc="edge probability of erdos_renyi")
    degree: int = param(4, low=0, doc="d of random_regular and random_regular_schedule")
    ws_k: int = param(4, low=2, doc="ring neighbours k (even) of watts_strogatz")
    rewire: float = param(0.1, low=0, high=1, doc="rewiring probability of watts_strogatz "
                          "(redrawn until connected)")
    ba_m: int = param(2, low=1, doc="edges per new node of barabasi_albert")
    window: int = param(1, low=1, high=MAX_WINDOW, doc="B > 1: each round uses the union of "
                        "B consecutive graphs (union_window; a round builds B graphs)")
    selection: str = param("random", doc="neighbour selection of random_out: random | "
                           "loss_based | loss_softmax; another topology takes only random")
    temperature: float = param(1.0, low=0, low_open=True, doc="loss_softmax temperature")
    path: str = param("", doc="file of from_adjacency (.npy, .npz sparse, .csv or whitespace "
                      "text; A[i, j] != 0 is the edge i -> j) or from_edges (text, one 'i j' "
                      "or 'i j weight' per line; its node ids are 0..n-1, the largest is n - 1)")
