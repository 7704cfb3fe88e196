"""Topologies by name, for the config system: ``build_schedule("torus", 16)``.

Every builder and schedule is reachable; keyword parameters carry the names of the
``[topology]`` config fields, and a parameter the chosen topology does not use is ignored (so a
whole config table can be passed). Errors are ``ParameterError`` naming the parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp

from topologies import builders as b
from topologies import random_graphs as rg
from topologies._common import ParameterError, check_int
from topologies.convert import from_adjacency, from_edges
from topologies.schedules import (
    Schedule,
    one_peer_exponential,
    random_out,
    random_regular_schedule,
    static,
    union_window,
)


@dataclass(frozen=True)
class _Params:
    out_degree: int
    directed: bool
    base: int
    rows: int
    cols: int
    p: float
    degree: int
    ws_k: int
    rewire: float
    ba_m: int
    path: str
    seed: int


@contextmanager
def _renamed(**names: str):
    """Re-raise a builder's ParameterError under the config field's name (k -> out_degree)."""
    try:
        yield
    except ParameterError as err:
        raise ParameterError(names.get(err.name, err.name), err.message) from None


def _grid_shape(n: int, rows: int, cols: int, low: int) -> tuple[int, int]:
    """(rows, cols) with rows * cols = n; 0 means "choose": the largest divisor <= sqrt(n)."""
    rows, cols = check_int(rows, "rows", 0), check_int(cols, "cols", 0)
    if rows == 0 and cols == 0:
        divisors = [r for r in range(low, math.isqrt(n) + 1) if n % r == 0]
        if not divisors:
            raise ParameterError("rows", f"cannot split n = {n} nodes into rows x cols with "
                                 f"both >= {low}; set rows and cols")
        rows = divisors[-1]
    if rows == 0 or cols == 0:
        given, name = (rows, "rows") if rows else (cols, "cols")
        if n % given:
            raise ParameterError(name, f"= {given} does not divide the number of nodes {n}")
        rows, cols = (given, n // given) if rows else (n // given, given)
    if rows * cols != n:
        raise ParameterError("rows", f"* cols = {rows} * {cols} must equal the number of nodes {n}")
    return rows, cols


def _hypercube(n: int) -> nx.Graph:
    dim = n.bit_length() - 1
    if n < 2 or 2**dim != n:
        raise ParameterError("n", f"must be a power of two for a hypercube, got {n}")
    return b.hypercube(dim)


def _load_matrix(path: str) -> np.ndarray | sp.sparray:
    if not path:
        raise ParameterError("path", "must name the file of the topology")
    file = Path(path)
    if not file.is_file():
        raise ParameterError("path", f"file not found: {path}")
    if file.suffix == ".npy":
        return np.load(file)
    if file.suffix == ".npz":
        return sp.load_npz(file)
    return np.loadtxt(file, delimiter="," if file.suffix == ".csv" else None, ndmin=2)


def _adjacency(n: int, o: _Params) -> nx.Graph:
    A = _load_matrix(o.path)
    if A.shape != (n, n):
        raise ParameterError("path", f"holds a {A.shape} matrix, expected [{n}, {n}]")
    return from_adjacency(A, directed=None if o.directed else False)


def _edge_list(n: int, o: _Params) -> nx.Graph:
    E = _load_matrix(o.path)
    if E.shape[1] not in (2, 3):
        raise ParameterError("path", f"must hold 2 or 3 columns (i j [weight]), got {E.shape[1]}")
    edges = [(int(r[0]), int(r[1]), *r[2:]) for r in E.tolist()]
    try:
        return from_edges(edges, n, directed=o.directed)
    except ValueError as err:
        raise ParameterError("path", f"{Path(o.path).name}: {err}") from None


_STATIC: dict[str, Callable[[int, _Params], nx.Graph]] = {
    "ring": lambda n, o: b.ring(n),
    "directed_ring": lambda n, o: b.directed_ring(n),
    "line": lambda n, o: b.line(n),
    "grid": lambda n, o: b.grid(*_grid_shape(n, o.rows, o.cols, 1)),
    "torus": lambda n, o: b.torus(*_grid_shape(n, o.rows, o.cols, 3)),
    "hypercube": lambda n, o: _hypercube(n),
    "complete": lambda n, o: b.complete(n),
    "star": lambda n, o: b.star(n),
    "exponential": lambda n, o: b.exponential(n, base=o.base, directed=o.directed),
    "erdos_renyi": lambda n, o: rg.erdos_renyi(n, o.p, seed=o.seed, directed=o.directed),
    "random_regular": lambda n, o: rg.random_regular(n, o.degree, seed=o.seed),
    "watts_strogatz": lambda n, o: rg.watts_strogatz(n, o.ws_k, o.rewire, seed=o.seed),
    "barabasi_albert": lambda n, o: rg.barabasi_albert(n, o.ba_m, seed=o.seed),
    "random_out_graph": lambda n, o: rg.random_out_graph(n, o.out_degree, seed=o.seed),
    "from_adjacency": _adjacency,
    "from_edges": _edge_list,
}
_RENAMES = {"random_regular": {"d": "degree"}, "watts_strogatz": {"k": "ws_k", "p": "rewire"},
            "barabasi_albert": {"m": "ba_m"}, "random_out_graph": {"k": "out_degree"}}
_SCHEDULES = ("random_out", "one_peer_exponential", "random_regular_schedule")
TOPOLOGIES: tuple[str, ...] = (*_STATIC, *_SCHEDULES)


def build_schedule(
    name: str,
    n: int,
    *,
    out_degree: int = 10,
    directed: bool = True,
    base: int = 2,
    rows: int = 0,
    cols: int = 0,
    p: float = 0.1,
    degree: int = 4,
    ws_k: int = 4,
    rewire: float = 0.1,
    ba_m: int = 2,
    window: int = 1,
    selection: str = "random",
    temperature: float = 1.0,
    path: str = "",
    seed: int = 0,
) -> Schedule:
    """The schedule of topology `name` (one of TOPOLOGIES) on n nodes.

    Parameters
    ----------
    name : topology name; a static graph becomes a schedule of period 1.
    n : number of nodes.
    out_degree : k of "random_out" (fresh each round) and "random_out_graph".
    directed : "exponential" (i -> i + base^m, or undirected +-), "erdos_renyi" (directed
        G(n, p)), "from_edges" (edges i -> j); "from_adjacency": False forces an undirected graph.
    base : offsets base^m of "exponential".
    rows, cols : "grid" and "torus" shape, rows * cols = n; 0 = choose (rows = the largest
        divisor of n not above sqrt(n)).
    p : edge probability of "erdos_renyi".
    degree : d of "random_regular" and "random_regular_schedule".
    ws_k, rewire : ring neighbours k (even) and rewiring probability of "watts_strogatz"
        (redrawn until connected).
    ba_m : edges per new node of "barabasi_albert".
    window : B > 1 turns the schedule into ``union_window(schedule, B)``.
    selection, temperature : neighbour selection of "random_out" ("random", "loss_based",
        "loss_softmax"); another topology accepts only "random".
    path : file of "from_adjacency" (.npy, .npz sparse, .csv or whitespace text; A[i, j] != 0
        is the edge i -> j) or "from_edges" (text, one "i j" or "i j weight" per line).
    seed : int >= 0 for the random topologies; round t of a schedule draws from (seed, t).

    Returns
    -------
    Schedule.
    """
    if name not in TOPOLOGIES:
        raise ParameterError("name", f"{name!r} is not a topology; choose one of "
                             f"{', '.join(TOPOLOGIES)}")
    n = check_int(n, "n", 1)
    window = check_int(window, "window", 1)
    if selection != "random" and name != "random_out":
        raise ParameterError("selection", f"applies to topology 'random_out' only, not {name!r}")
    seed = check_int(seed, "seed", 0)
    if name == "random_out":
        with _renamed(k="out_degree"):
            schedule: Schedule = random_out(n, out_degree, seed, selection, temperature)
    elif name == "one_peer_exponential":
        schedule = one_peer_exponential(n)
    elif name == "random_regular_schedule":
        with _renamed(d="degree"):
            schedule = random_regular_schedule(n, degree, seed)
    else:
        params = _Params(out_degree, directed, base, rows, cols, p, degree, ws_k, rewire, ba_m,
                         path, seed)
        with _renamed(**_RENAMES.get(name, {})):
            schedule = static(_STATIC[name](n, params))
    return union_window(schedule, window) if window > 1 else schedule
