"""Consensus simulation: Push-Sum (column-stochastic) and gossip (doubly-stochastic) averaging.

Node values are the rows of ``x0`` ([n, ...]); one round is ``x <- W(t) x`` (column
convention: W[j, i] is the share of i's mass sent to j). W(t) is the natural matrix of the graph
of round t, or whatever the ``matrices(t)`` hook returns: that is where link drops or any other
per-round change plug in (e.g. a rule where the sender keeps the undelivered share). Hook
matrices are used as given, so an uncompensated loss (a column summing to less than 1) can be
simulated too.

Built-in faults: with ``link_drop`` / ``node_drop`` > 0 the faults of round t are drawn with
``sample_faults(G(t), link_drop, node_drop, seed=[seed, t])`` and W(t) is the faulty matrix of
``topologies.column_stochastic(G, faults)`` (Push-Sum: the sender keeps the undelivered share,
so columns still sum to 1; gossip: Metropolis-Hastings on the surviving links).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from analysis.connectivity import ScheduleLike, rounds_of
from analysis.matrices import Matrix
from topologies.faults import sample_faults
from topologies.mixing import column_stochastic, doubly_stochastic

MatrixHook = Callable[[int], Matrix]


def _matrix_source(schedule: ScheduleLike | Matrix | None, matrices: MatrixHook | None,
                   build: Callable[..., np.ndarray], link_drop: float = 0.0,
                   node_drop: float = 0.0, seed: int = 0) -> MatrixHook:
    faulty = link_drop > 0 or node_drop > 0
    if matrices is not None:
        if faulty:
            raise ValueError("link_drop / node_drop need a schedule, not a matrices(t) hook")
        return matrices
    if schedule is None:
        raise ValueError("give a schedule (or graph, trace, matrix) or a matrices(t) hook")
    if isinstance(schedule, np.ndarray) or sp.issparse(schedule):
        if faulty:
            raise ValueError("link_drop / node_drop need graphs, not a fixed matrix")
        return lambda t: schedule
    sched, _ = rounds_of(schedule)
    if not faulty:
        return lambda t: build(sched.at(t))

    def faulty_matrix(t: int) -> np.ndarray:
        G = sched.at(t)
        rng = np.random.default_rng([seed, t])
        return build(G, faults=sample_faults(G, link_drop, node_drop, seed=rng))

    return faulty_matrix


def _check_x0(x0: np.ndarray) -> np.ndarray:
    x0 = np.asarray(x0, dtype=float)
    if x0.ndim < 1 or x0.shape[0] < 1:
        raise ValueError(f"x0 must have shape [n, ...], got {x0.shape}")
    return x0


def _mix(W: Matrix, x: np.ndarray) -> np.ndarray:
    if W.shape != (x.shape[0], x.shape[0]):
        raise ValueError(f"W(t) has shape {W.shape}, expected {(x.shape[0], x.shape[0])}")
    return np.asarray(W @ x)


def pushsum_consensus(schedule: ScheduleLike | Matrix | None, x0: np.ndarray, rounds: int, *,
                      matrices: MatrixHook | None = None, return_weights: bool = False,
                      link_drop: float = 0.0, node_drop: float = 0.0,
                      seed: int = 0) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Push-Sum averaging (Kempe et al. 2003): ``x <- W x``, ``w <- W w``, ``z = x / w``.

    Parameters
    ----------
    schedule : Schedule, graph, trace (list of graphs/matrices) or a fixed matrix; W(t) is the
        uniform push rule of the graph of round t. Ignored when `matrices` is given.
    x0 : [n, ...] initial values; w(0) = 1.
    rounds : number of rounds.
    matrices : optional hook t -> W(t) ([n, n], dense or sparse) replacing the schedule's.
    return_weights : also return the weights w, [rounds + 1, n].
    link_drop, node_drop : per-round probabilities of a lost message / an offline node; the
        faults of round t come from (seed, t) and the sender keeps every undelivered share, so
        sum(w) = n every round and z still reaches mean(x0) while the delivered links stay
        jointly strongly connected.
    seed : seed of the fault draws.

    Returns
    -------
    z : [rounds + 1, n, ...], the de-biased estimates; z[0] = x0. With a column-stochastic
    W(t) whose graphs are B-strongly connected, every z_i(t) -> mean(x0).
    """
    x = _check_x0(x0)
    n = x.shape[0]
    source = _matrix_source(schedule, matrices, column_stochastic, link_drop, node_drop, seed)
    flat = x.reshape(n, -1)
    w = np.ones(n)
    zs, ws = [x.copy()], [w.copy()]
    for t in range(rounds):
        W = source(t)
        flat, w = _mix(W, flat), _mix(W, w)
        zs.append((flat / w[:, None]).reshape(x.shape))
        ws.append(w.copy())
    z = np.stack(zs)
    return (z, np.stack(ws)) if return_weights else z


def gossip_consensus(schedule: ScheduleLike | Matrix | None, x0: np.ndarray, rounds: int, *,
                     matrices: MatrixHook | None = None, link_drop: float = 0.0,
                     node_drop: float = 0.0, seed: int = 0) -> np.ndarray:
    """Gossip averaging ``x <- W x`` with a doubly-stochastic W(t).

    W(t) is Metropolis-Hastings of the graph of round t unless `matrices` gives it. With
    `link_drop` / `node_drop` > 0 (drawn from (seed, t)) W(t) is Metropolis-Hastings on the links
    that survive round t. The average is preserved every round.

    Parameters
    ----------
    schedule : a schedule, graph, trace or matrix; None when `matrices` gives W(t).
    x0 : [n, ...] initial values.
    rounds : rounds T.
    matrices : t -> W(t), instead of the schedule's.
    link_drop, node_drop : probabilities of a lost link, an offline node per round.
    seed : the seed of the drops.

    Returns
    -------
    [T + 1, n, ...] trajectory; x[0] = x0.
    """
    x = _check_x0(x0)
    n = x.shape[0]
    source = _matrix_source(schedule, matrices, doubly_stochastic, link_drop, node_drop, seed)
    flat = x.reshape(n, -1)
    xs = [x.copy()]
    for t in range(rounds):
        flat = _mix(source(t), flat)
        xs.append(flat.reshape(x.shape))
    return np.stack(xs)


def consensus_distance(trajectory: np.ndarray) -> np.ndarray:
    """mean_i ||x_i(t) - xbar(t)||^2 for every round of a trajectory.

    Parameters
    ----------
    trajectory : [T, n, ...].

    Returns
    -------
    [T] float64 array.
    """
    traj = np.asarray(trajectory, dtype=float)
    flat = traj.reshape(traj.shape[0], traj.shape[1], -1)
    return np.square(flat - flat.mean(axis=1, keepdims=True)).sum(axis=2).mean(axis=1)


def consensus_error(trajectory: np.ndarray, target: np.ndarray | None = None) -> np.ndarray:
    """max_i |x_i(t) - target| (largest entry) for every round.

    Parameters
    ----------
    trajectory : [T, n, ...].
    target : [...] the value to reach; default the average of the first row, mean_i x_i(0): the
        value Push-Sum and gossip must reach.

    Returns
    -------
    [T] float64 array.
    """
    traj = np.asarray(trajectory, dtype=float)
    goal = traj[0].mean(axis=0) if target is None else np.asarray(target, dtype=float)
    return np.abs(traj - goal).reshape(traj.shape[0], -1).max(axis=1)


def contraction_rate(errors: np.ndarray, start: int, stop: int) -> float:
    """Observed per-round rate ``(errors[stop] / errors[start]) ** (1 / (stop - start))``.

    For a static W it tends to slem(W) (the tests' worked 4-node example: 0.5728 vs 0.5715
    over rounds 20-50).

    Parameters
    ----------
    errors : [T] per-round errors (e.g. `consensus_error`).
    start, stop : rounds, 0 <= start < stop < T.

    Returns
    -------
    float.

    Raises
    ------
    ValueError
        unless 0 <= start < stop < T, or when errors[start] is 0 (consensus already reached).
    """
    if not 0 <= start < stop < len(errors):
        raise ValueError(f"need 0 <= start < stop < {len(errors)}, got {start}, {stop}")
    if errors[start] <= 0:
        raise ValueError(f"errors[{start}] is 0: consensus already reached")
    return float((errors[stop] / errors[start]) ** (1.0 / (stop - start)))


def rounds_to_consensus(errors: np.ndarray, eps: float) -> int | None:
    """First round t with errors[t] <= eps.

    Parameters
    ----------
    errors : [T] per-round errors.
    eps : the tolerance.

    Returns
    -------
    int, or None if the trajectory never gets there.
    """
    hits = np.flatnonzero(np.asarray(errors) <= eps)
    return int(hits[0]) if hits.size else None
