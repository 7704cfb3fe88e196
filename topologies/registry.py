"""Topologies by name, for the config system: ``build_schedule("torus", 16)``.

Every builder and schedule is reachable; keyword parameters are the fields of `TopologyParams`
(topologies/params.py, also the ``[topology]`` config fields), and a parameter the chosen
topology does not use is ignored (so a whole config table can be passed). Errors are
``ParameterError`` naming the parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp

from topologies import builders as b
from topologies import random_graphs as rg
from topologies._common import ParameterError, check_int, did_you_mean
from topologies.convert import from_adjacency, from_edges
from topologies.params import TopologyParams
from topologies.schedules import (
    Schedule,
    one_peer_exponential,
    random_out,
    random_regular_schedule,
    static,
)
from topologies.windows import union_window


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
    try:
        if not file.is_file():
            raise ParameterError("path", f"file not found: {path}")
        if file.suffix == ".npy":
            return np.load(file)
        if file.suffix == ".npz":
            return sp.load_npz(file)
        return np.loadtxt(file, delimiter="," if file.suffix == ".csv" else None, ndmin=2)
    except OSError as err:
        raise ParameterError("path", f"cannot read {file.name[:80]}: {err.strerror or err}"
                             ) from None


def _adjacency(n: int, o: TopologyParams) -> nx.Graph:
    A = _load_matrix(o.path)
    if A.shape != (n, n):
        raise ParameterError("path", f"holds a {A.shape} matrix, expected [{n}, {n}]")
    return from_adjacency(A, directed=None if o.directed else False)


def _check_node_count(ends: np.ndarray, n: int, name: str) -> None:
    """ParameterError unless the largest node id among the endpoints [m, 2] is n - 1: an edge
    file naming fewer nodes than the run would leave the others isolated."""
    top = int(ends.max()) + 1 if ends.size else 0
    if top < n:
        named = f"nodes 0..{top - 1} ({top} nodes)" if top else "no node"
        raise ParameterError("path", f"{name}: the edge file names {named}, the run has {n} "
                             "nodes")


def _edge_list(n: int, o: TopologyParams) -> nx.Graph:
    E = _load_matrix(o.path)
    if sp.issparse(E):
        E = E.toarray()
    if E.ndim != 2 or E.shape[1] not in (2, 3):
        raise ParameterError("path", "must hold one edge per row, 2 or 3 columns (i j [weight]);"
                             f" got an array of shape {list(E.shape)}")
    ends = np.asarray(E[:, :2], dtype=float)
    whole = np.isfinite(ends) & (ends == np.round(ends))
    if not whole.all():
        row = int(np.argwhere(~whole)[0][0])
        raise ParameterError("path", f"row {row + 1}: node ids must be whole numbers, got "
                             f"{E[row, 0]:g} {E[row, 1]:g}")
    edges = [(int(r[0]), int(r[1]), *r[2:]) for r in E.tolist()]
    try:
        G = from_edges(edges, n, directed=o.directed)
    except ValueError as err:
        raise ParameterError("path", f"{Path(o.path).name}: {err}") from None
    _check_node_count(ends, n, Path(o.path).name)
    return G


_STATIC: dict[str, Callable[[int, TopologyParams, int], nx.Graph]] = {
    "ring": lambda n, o, seed: b.ring(n),
    "directed_ring": lambda n, o, seed: b.directed_ring(n),
    "line": lambda n, o, seed: b.line(n),
    "grid": lambda n, o, seed: b.grid(*_grid_shape(n, o.rows, o.cols, 1)),
    "torus": lambda n, o, seed: b.torus(*_grid_shape(n, o.rows, o.cols, 3)),
    "hypercube": lambda n, o, seed: _hypercube(n),
    "complete": lambda n, o, seed: b.complete(n),
    "star": lambda n, o, seed: b.star(n),
    "exponential": lambda n, o, seed: b.exponential(n, base=o.base, directed=o.directed),
    "erdos_renyi": lambda n, o, seed: rg.erdos_renyi(n, o.p, seed=seed, directed=o.directed),
    "random_regular": lambda n, o, seed: rg.random_regular(n, o.degree, seed=seed),
    "watts_strogatz": lambda n, o, seed: rg.watts_strogatz(n, o.ws_k, o.rewire, seed=seed),
    "barabasi_albert": lambda n, o, seed: rg.barabasi_albert(n, o.ba_m, seed=seed),
    "random_out_graph": lambda n, o, seed: rg.random_out_graph(n, o.out_degree, seed=seed),
    "from_adjacency": lambda n, o, seed: _adjacency(n, o),
    "from_edges": lambda n, o, seed: _edge_list(n, o),
}
_RENAMES = {"random_regular": {"d": "degree"}, "watts_strogatz": {"k": "ws_k", "p": "rewire"},
            "barabasi_albert": {"m": "ba_m"}, "random_out_graph": {"k": "out_degree"}}
_SCHEDULES = ("random_out", "one_peer_exponential", "random_regular_schedule")
TOPOLOGIES: tuple[str, ...] = (*_STATIC, *_SCHEDULES)
# the TopologyParams each topology reads (every one also reads `window`)
READS: dict[str, tuple[str, ...]] = {
    "grid": ("rows", "cols"), "torus": ("rows", "cols"), "exponential": ("base", "directed"),
    "erdos_renyi": ("p", "directed"), "random_regular": ("degree",),
    "watts_strogatz": ("ws_k", "rewire"), "barabasi_albert": ("ba_m",),
    "random_out_graph": ("out_degree",), "from_adjacency": ("path", "directed"),
    "from_edges": ("path", "directed"), "random_out": ("out_degree", "selection", "temperature"),
    "random_regular_schedule": ("degree",),
}
_BUILDERS: dict[str, Callable[..., object]] = {
    **{name: getattr(b, name) for name in ("ring", "directed_ring", "line", "grid", "torus",
                                          "hypercube", "complete", "star", "exponential")},
    **{name: getattr(rg, name) for name in ("erdos_renyi", "random_regular", "watts_strogatz",
                                           "barabasi_albert", "random_out_graph")},
    "from_adjacency": from_adjacency, "from_edges": from_edges, "random_out": random_out,
    "one_peer_exponential": one_peer_exponential,
    "random_regular_schedule": random_regular_schedule,
}


def describe(name: str) -> tuple[str, dict[str, object]]:
    """(one line saying what topology `name` is, {parameter: default} of what it reads)."""
    doc = (_BUILDERS[name].__doc__ or "").strip().splitlines()
    defaults = {f.name: f.default for f in fields(TopologyParams)}
    return (doc[0] if doc else name), {k: defaults[k] for k in READS.get(name, ())}


def build_schedule(name: str, n: int, *, seed: int = 0, **params: object) -> Schedule:
    """The schedule of topology `name` (one of TOPOLOGIES) on n nodes; a static graph becomes a
    schedule of period 1.

    `params` are `TopologyParams` fields (their docs say which topology reads which; the others
    are ignored, so a whole config table can be passed); `seed` (int >= 0) seeds the random
    topologies: round t of a schedule draws from (seed, t).
    """
    if name not in TOPOLOGIES:
        raise ParameterError("name", f"{name!r} is not a topology; "
                             f"{did_you_mean(name, TOPOLOGIES)}choose one of "
                             f"{', '.join(TOPOLOGIES)}")
    known = [f.name for f in fields(TopologyParams)]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ParameterError(unknown[0], "is not a topology parameter "
                             f"({did_you_mean(unknown[0], known)}allowed: {', '.join(known)})")
    o = TopologyParams(**params)
    n = check_int(n, "n", 1)
    window = check_int(o.window, "window", 1)
    if o.selection != "random" and name != "random_out":
        raise ParameterError("selection", f"applies to topology 'random_out' only, not {name!r}")
    seed = check_int(seed, "seed", 0)
    if name == "random_out":
        with _renamed(k="out_degree"):
            schedule: Schedule = random_out(n, o.out_degree, seed, o.selection, o.temperature)
    elif name == "one_peer_exponential":
        schedule = one_peer_exponential(n)
    elif name == "random_regular_schedule":
        with _renamed(d="degree"):
            schedule = random_regular_schedule(n, o.degree, seed)
    else:
        with _renamed(**_RENAMES.get(name, {})):
            schedule = static(_STATIC[name](n, o, seed))
    return union_window(schedule, window) if window > 1 else schedule
