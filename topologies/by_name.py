"""Topologies by name, for configs: ``build_schedule("torus", 16)``.

Every registered topology (topologies/registry.py) is reachable; its options are its builder's
parameters. This module also registers the named forms of builders whose arguments are not
(n, options): grid and torus of n nodes, the hypercube of n = 2^dim nodes, and a graph read from
a file. Errors are ``ParameterError`` naming the option.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp

from topologies import builders as b
from topologies._common import ParameterError, check_int, did_you_mean
from topologies.convert import from_adjacency, from_edges
from topologies.registry import REGISTRY, NamedTopology, register
from topologies.schedules import Schedule, static
from topologies.windows import union_window

MAX_WINDOW = 1000  # most graphs unioned into one round's topology (each round builds them all)
SELECTING = ("random_out",)  # the topologies whose neighbours `selection` picks


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


@register(name="grid")
def grid_of(n: int, rows: int = 0, cols: int = 0) -> nx.Graph:
    """2-D grid (mesh) of n = rows x cols nodes (topologies.grid).

    Parameters
    ----------
    n : number of nodes.
    rows, cols : grid shape, rows * cols = n; 0 = choose (rows = the largest divisor of n not
        above sqrt(n)).

    Returns
    -------
    nx.Graph, the grid; node r * cols + c at row r, column c.
    """
    return b.grid(*_grid_shape(n, rows, cols, 1))


@register(name="torus")
def torus_of(n: int, rows: int = 0, cols: int = 0) -> nx.Graph:
    """2-D torus of n = rows x cols nodes, each side at least 3 (topologies.torus).

    Parameters
    ----------
    n : number of nodes.
    rows, cols : torus shape, rows * cols = n; 0 = choose (rows = the largest divisor of n not
        above sqrt(n), at least 3).

    Returns
    -------
    nx.Graph, 4-regular; node r * cols + c at row r, column c.
    """
    return b.torus(*_grid_shape(n, rows, cols, 3))


@register(name="hypercube")
def hypercube_of(n: int) -> nx.Graph:
    """Hypercube on n = 2^dim nodes (topologies.hypercube).

    Parameters
    ----------
    n : number of nodes, a power of two, at least 2.

    Returns
    -------
    nx.Graph, log2(n)-regular.

    Raises
    ------
    ParameterError
        naming n, unless it is a power of two of at least 2.
    """
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


@register(name="from_adjacency")
def adjacency_file(n: int, path: str = "", directed: bool = True) -> nx.Graph:
    """The graph of an [n, n] adjacency matrix in a file (topologies.from_adjacency).

    Parameters
    ----------
    n : number of nodes.
    path : .npy, .npz (scipy.sparse), .csv or whitespace text; A[i, j] != 0 is the edge i -> j.
    directed : True: a DiGraph unless the matrix is symmetric; False forces an undirected graph.

    Returns
    -------
    nx.Graph or nx.DiGraph on 0..n-1.

    Raises
    ------
    ParameterError
        naming path, when the file's matrix is not [n, n].
    """
    A = _load_matrix(path)
    if A.shape != (n, n):
        raise ParameterError("path", f"holds a {A.shape} matrix, expected [{n}, {n}]")
    return from_adjacency(A, directed=None if directed else False)


def _check_node_count(ends: np.ndarray, n: int, name: str) -> None:
    """ParameterError unless the largest node id among the endpoints [m, 2] is n - 1: an edge
    file naming fewer nodes than the run would leave the others isolated."""
    top = int(ends.max()) + 1 if ends.size else 0
    if top < n:
        named = f"nodes 0..{top - 1} ({top} nodes)" if top else "no node"
        raise ParameterError("path", f"{name}: the edge file names {named}, the run has {n} "
                             "nodes")


@register(name="from_edges")
def edges_file(n: int, path: str = "", directed: bool = True) -> nx.Graph:
    """The graph of an edge list in a text file (topologies.from_edges).

    Parameters
    ----------
    n : number of nodes; the file's node ids are 0..n-1, the largest n - 1.
    path : text file, one 'i j' or 'i j weight' per line.
    directed : edges i -> j (True) or i <-> j (False).

    Returns
    -------
    nx.DiGraph or nx.Graph on 0..n-1, edges with a ``weight`` attribute where the file gives one.

    Raises
    ------
    ParameterError
        naming path, unless the file holds one edge per row in 2 or 3 columns with node ids in
        0..n-1.
    """
    E = _load_matrix(path)
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
        G = from_edges(edges, n, directed=directed)
    except ValueError as err:
        raise ParameterError("path", f"{Path(path).name}: {err}") from None
    _check_node_count(ends, n, Path(path).name)
    return G


def named(name: str) -> NamedTopology:
    """The registered topology `name`.

    Parameters
    ----------
    name : a registered topology's name.

    Returns
    -------
    NamedTopology, its builder, options and summary.

    Raises
    ------
    ParameterError
        naming name (and the close registered names) when none is registered under it.
    """
    if name not in REGISTRY:
        raise ParameterError("name", f"{name!r} is not a topology; {did_you_mean(name, REGISTRY)}"
                             f"choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def build_schedule(name: str, n: int, *, seed: int = 0, window: int = 1,
                   selection: str = "random", class_counts: np.ndarray | None = None,
                   **options: Any) -> Schedule:
    """The schedule of topology `name` on n nodes; a static graph becomes a schedule of period 1.

    Parameters
    ----------
    name : a registered topology (``TOPOLOGIES``).
    n : number of nodes.
    seed : int >= 0, seeds a random topology (round t of a schedule draws from (seed, t)).
    window : B > 1: each round uses the union of B consecutive graphs (``union_window``).
    selection : neighbour selection of the topologies that select (random_out): random |
        loss_based | loss_softmax.
    class_counts : [n, K] samples of each class on each node, for a topology built from the
        run's partition.
    **options : the topology's options (its builder's parameters).

    Returns
    -------
    Schedule.
    """
    entry = named(name)
    for old in sorted(set(options) & set(entry.renamed)):
        new = entry.renamed[old]
        given = f"is ignored: {new} is given" if new in options else f"is now {new}"
        warnings.warn(f"{old} {given} (the old name goes in the next release)", FutureWarning,
                      stacklevel=2)
        value = options.pop(old)
        options.setdefault(new, value)
    n = check_int(n, "n", 1)
    window = check_int(window, "window", 1, MAX_WINDOW)
    seed = check_int(seed, "seed", 0)
    if selection != "random":
        if name not in SELECTING:
            raise ParameterError("selection", f"applies to topology "
                                 f"{', '.join(map(repr, SELECTING))} only, not {name!r}")
        options["selection"] = selection
    if "class_counts" in entry.facts and class_counts is None:
        raise ParameterError("class_counts", f"topology {name!r} is built from the partition: "
                             "give the nodes' class counts")
    built = entry.call({"n": n, "seed": seed, "class_counts": class_counts}, options)
    schedule = static(built) if isinstance(built, nx.Graph) else built
    if schedule.n != n:
        raise ParameterError("n", f"topology {name!r} built {schedule.n} nodes, the run has {n}")
    return union_window(schedule, window) if window > 1 else schedule


def topology_names() -> tuple[str, ...]:
    """The registered topologies, in registration order.

    Returns
    -------
    tuple of str, the names.
    """
    return tuple(REGISTRY)
