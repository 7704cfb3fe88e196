"""What a study measures on each cell's topology, and how its table and figures name it.

Every cell is measured on the schedule and mixing its algorithm actually uses (SGP: the push
rule; DFedAvg: Metropolis-Hastings), with `analysis.summary` and the cell's own partition:

- diameter (time-varying: of the union over a min_B window), spectral gap per round
  (``1 - per_round_rate``; never a per-period value), spectral gap per period (periodic
  time-varying schedules only), mixing time (rounds to 1e-3), rounds to exact averaging
  (inf: never; an aperiodic schedule examined over the horizon), the effective number of
  neighbours at the study's gamma (None for an aperiodic schedule), messages per round (of
  round 0) and min_B;
- the neighbourhood heterogeneity tau(W) with the class proportions of the cell's partition:
  the mean of tau(W(t)) over one period (static: W; aperiodic: over the horizon). None where a
  round's Push-Sum weights are undefined (a round, not doubly stochastic, whose graph is not
  strongly connected) and for a centralized algorithm (its star has the server as one more
  node);
- the sha256 fingerprint of the graphs (`p2pfl.objects.topology.describe`: one period, or 16
  rounds of an aperiodic schedule; its first 16 hex digits) and, for a topology given as an
  object or built by a factory, the object's class.

The horizon of an aperiodic schedule is the run's rounds, at most `HORIZON`.

A topology *factory* is a callable that takes `class_counts` (and, if it names them, `n` and
`seed`, as a registered builder does) and returns a topology object: it is called for each
cell with the run's [n, K] class counts, its number of nodes and its topology seed
(``stream_seed(seed, "topology")``, the seed a registered builder gets), so that a topology
built from each seed's partition can be studied.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analysis.neighbors import check_gamma as check_decay
from analysis.summary import GAMMA
from p2pfl.config import ConfigError
from topologies import did_you_mean

HORIZON = 100  # rounds of an aperiodic schedule measured (at most the run's rounds)
ZERO = 1e-20  # a heterogeneity below this is the rounding of an exact 0 (W = J): about 1e-34
CELL_METRICS = ("kind", "period", "diameter", "spectral_gap_per_round",
                "spectral_gap_per_period", "mixing_time", "exact_averaging_rounds",
                "effective_neighbors", "heterogeneity", "edges", "min_B", "object_class",
                "fingerprint")  # what a cell's row takes from its measurement


@dataclass(frozen=True)
class Metric:
    """A topology metric as the study shows it: axis label, table header, and whether a larger
    value means a better connected topology (drawn darker in the colour maps)."""

    axis: str
    head: str
    larger_is_better: bool


METRICS = {
    "diameter": Metric("diameter (hops)", "diameter", False),
    "spectral_gap_per_round": Metric("spectral gap per round (1 - per-round rate)",
                                     "gap/round", True),
    "spectral_gap_per_period": Metric("spectral gap per period (1 - SLEM of a period)",
                                      "gap/period", True),
    "mixing_time": Metric("mixing time (rounds to 1e-3)", "mixing", False),
    "effective_neighbors": Metric("effective neighbours (gamma {gamma:g})", "n_eff({gamma:g})",
                                  True),
    "heterogeneity": Metric("neighbourhood heterogeneity tau(W)", "heterogeneity", False),
    "exact_averaging_rounds": Metric("rounds to exact averaging", "exact avg", False),
    "edges": Metric("messages per round", "messages", True),
}
GAPS = ("spectral_gap_per_round", "spectral_gap_per_period")  # 1 for exact averaging
DEFAULT_X = ("diameter", "spectral_gap_per_round")  # the x axes of convergence_vs_topology


def metric_label(key: str, gamma: float = GAMMA, head: bool = False) -> str:
    """The axis label (or, with `head`, the table header) of metric `key`.

    Parameters
    ----------
    key : a key of METRICS.
    gamma : the decay of the effective number of neighbours, put in the label.
    head : the table header instead of the axis label.

    Returns
    -------
    str.
    """
    m = METRICS[key]
    return (m.head if head else m.axis).format(gamma=gamma)


def check_gamma(gamma: Any, where: str = "study.gamma") -> float:
    """The decay of the effective number of neighbours, checked.

    Parameters
    ----------
    gamma : a number in [0, 1).
    where : the field's name, for the error.

    Returns
    -------
    float.

    Raises
    ------
    ConfigError
        naming `where` unless gamma is a number in [0, 1).
    """
    try:
        check_decay(gamma)
    except ValueError:
        raise ConfigError(where, f"must be a number in [0, 1) (the decay of the effective "
                          f"number of neighbours), got {gamma!r}") from None
    return float(gamma)


def check_x(x: Any, where: str = "x") -> tuple[str, ...]:
    """The metrics on the x axes of convergence_vs_topology, checked.

    Parameters
    ----------
    x : a name of METRICS, or a list of them.
    where : the field's name, for the error.

    Returns
    -------
    tuple of str.

    Raises
    ------
    ConfigError
        naming `where` for no name or a name not in METRICS.
    """
    names = [x] if isinstance(x, str) else list(x) if isinstance(x, list | tuple) else []
    if not names:
        raise ConfigError(where, f"must name one or more metrics ({', '.join(METRICS)}), got "
                          f"{x!r}")
    for name in names:
        if name not in METRICS:
            raise ConfigError(where, f"{did_you_mean(str(name), METRICS)}{name!r} is not a "
                              f"recorded metric (choose from {', '.join(METRICS)})")
    return tuple(names)


def is_factory(obj: object) -> bool:
    """Whether `obj` is a topology factory: a callable (not a graph or schedule) whose signature
    names `class_counts`.

    Parameters
    ----------
    obj : anything.

    Returns
    -------
    bool.
    """
    import networkx as nx

    import topologies as T

    if not callable(obj) or isinstance(obj, nx.Graph | T.Schedule):
        return False
    try:
        return "class_counts" in inspect.signature(obj).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def from_factory(factory: Callable[..., object], cfg: Any, counts: np.ndarray) -> object:
    """The topology object `factory` builds for the run of `cfg` from its class counts.

    The factory is given n and the topology seed too, where it names them.

    Parameters
    ----------
    factory : a callable taking class_counts (and n, seed).
    cfg : the cell's config.
    counts : [n, K] the run's class counts.

    Returns
    -------
    the topology object.

    Raises
    ------
    UserCodeError
        when the factory fails.
    """
    from p2pfl.core.seeding import stream_seed
    from p2pfl.errors import UserCodeError

    facts = {"n": cfg.data.num_nodes, "seed": stream_seed(cfg.seed, "topology"),
             "class_counts": counts}
    names = inspect.signature(factory).parameters
    try:
        return factory(**{k: v for k, v in facts.items() if k in names})
    except Exception as err:  # the factory's own code
        name = getattr(factory, "__qualname__", type(factory).__name__)
        raise UserCodeError(f"topology factory {name}", err) from err


class Partitions:
    """The class counts [n, K] of each run's partition (`p2pfl.engine.class_counts`), computed
    once per data config and seed (the partition depends on nothing else)."""

    def __init__(self) -> None:
        self.counts: dict[str, np.ndarray] = {}

    def of(self, cfg: Any) -> np.ndarray:
        from p2pfl.engine import class_counts

        key = json.dumps([asdict(cfg.data), cfg.seed], sort_keys=True, default=str)
        if key not in self.counts:
            self.counts[key] = class_counts(cfg)
        return self.counts[key]


def cell_schedule(cfg: Any, algorithm: Any, obj: object | None,
                  counts: np.ndarray | None = None) -> tuple[Any, dict[str, Any] | None]:
    """The schedule the run of cfg builds, on `obj` if given, else the named one.

    `obj` is checked as `p2pfl.run` checks it; the named one is built from `counts` where it
    takes the partition.

    Parameters
    ----------
    cfg : the cell's config.
    algorithm : the cell's algorithm.
    obj : a topology object, or None.
    counts : [n, K] the run's class counts, or None.

    Returns
    -------
    tuple (schedule, the record of `obj`: None for a named topology).

    Raises
    ------
    ConfigError
        for a wrong parameter or object.
    """
    from p2pfl.engine import schedule_for
    from p2pfl.objects.topology import resolve_topology

    if obj is None:
        return schedule_for(cfg, algorithm, counts), None
    _, schedule, record = resolve_topology(cfg, Path(), False, obj)
    return schedule, record


def heterogeneity(schedule: Any, mixing: str, counts: np.ndarray, rounds: int) -> float | None:
    """Mean of tau(W(t)) (`neighborhood_heterogeneity`) over rounds 0..rounds-1.

    Parameters
    ----------
    schedule : the cell's schedule.
    mixing : "column_stochastic" or "doubly_stochastic".
    counts : [n, K] the run's class counts (their proportions are used).
    rounds : rounds averaged.

    Returns
    -------
    float, or None where it is undefined (module docstring).
    """
    import topologies as T
    from analysis.neighbors import neighborhood_heterogeneity

    sizes = counts.sum(axis=1, keepdims=True)
    if counts.shape[0] != schedule.n or (sizes == 0).any():
        return None
    make = T.column_stochastic if mixing == "column_stochastic" else T.doubly_stochastic
    try:
        tau = float(np.mean([neighborhood_heterogeneity(make(schedule.at(t), sparse=True),
                                                        counts / sizes)
                             for t in range(rounds)]))
    except ValueError:
        return None
    return tau if tau > ZERO else 0.0


def measure(cfg: Any, obj: object | None = None, counts: np.ndarray | None = None,
            gamma: float = GAMMA) -> dict[str, Any] | str:
    """The metrics of the schedule and mixing the run of cfg uses, on `obj` if given.

    The metrics of the module docstring: `summary`'s keys, `heterogeneity`, `object_class`,
    `fingerprint`.

    Parameters
    ----------
    cfg : the cell's config.
    obj : a topology object or factory, or None.
    counts : the run's class counts (default: computed where the topology needs them; without
        them, no heterogeneity).
    gamma : the decay of the effective number of neighbours.

    Returns
    -------
    dict of the metrics, or str: why the algorithm cannot use the topology (not connected, wrong
    mixing).
    """
    from algorithms import ALGORITHMS
    from analysis.matrices import DENSE_MAX
    from analysis.summary import summary
    from p2pfl.config import ConfigError
    from p2pfl.engine import check_topology, class_counts, needs_class_counts
    from p2pfl.objects.topology import describe

    algorithm = ALGORITHMS[cfg.algorithm.name](cfg.algorithm)
    if algorithm.mixing == "server" and (obj is not None or cfg.topology.name != "star"):
        return f"{algorithm.name} is centralized: it runs on the star (hub = server) only"
    if counts is None and obj is None and needs_class_counts(cfg):
        counts = class_counts(cfg)
    schedule, record = cell_schedule(cfg, algorithm, obj, counts)
    mixing = None if algorithm.mixing == "server" else algorithm.mixing
    horizon = None if schedule.period is not None else min(cfg.rounds, HORIZON)
    try:
        check_topology(algorithm, schedule, cfg.rounds)
        out = summary(schedule, mixing=mixing, horizon=horizon, gamma=gamma)
    except (ConfigError, ValueError) as err:
        return str(err)
    out["edges"] = out["messages"]  # the study's `edges`: messages per round (METRICS)
    if out["exact_averaging_rounds"] is None and schedule.n <= DENSE_MAX:
        out["exact_averaging_rounds"] = math.inf  # examined: never (within the horizon)
    rounds = schedule.period or horizon or 1
    out["heterogeneity"] = (None if counts is None or mixing is None
                            else heterogeneity(schedule, mixing, counts, rounds))
    out["fingerprint"] = (record or describe(schedule))["fingerprint"][:16]
    if obj is not None:
        out["object_class"] = f"{type(obj).__module__}.{type(obj).__qualname__}"
    return out
