"""What the design command predicts of a candidate topology before any training: its degree, its
simulated round time on the config's network, and its rounds to the target relative to a
complete graph's, from its metrics.

- **Round time.** The engine's own clock (`p2pfl.scale.network.Clock`, built as a run builds
  it: the algorithm's message size, each node's local steps from its data, the stragglers, slow
  links, jitter, flow model and underlay of [network]) advanced over `ROUNDS` rounds of the
  candidate's schedule without training; the mean round is the last node's time over the
  rounds, averaged over the seeds (the stragglers and slow links are drawn per seed). Faults
  (link_drop, node_drop) are left out.
- **Rounds.** ``sqrt(n / n_eff) + tau / (1 - 1/K)``: the effective number of neighbours n_eff
  (gamma 0.9) stands for how much gradient noise a node averages (Vogels et al. 2022: the rounds
  of decentralized SGD grow as n_eff falls; a complete graph has n_eff = n and a first term of
  1), and the neighbourhood heterogeneity tau(W) of the partition (Le Bars et al. 2023), over its
  largest value 1 - 1/K (each node one class of K, no mixing), for the bias that label skew
  adds. It is a prior for ordering the candidates, not a fitted law; the short runs of the
  design decide (analysis.design). For a schedule without a period, n_eff is estimated by
  simulating the random walk (`simulated_effective_neighbors`); where it cannot be had (a
  column-stochastic schedule without a period) the median of the other candidates' stands in.
- **Degree.** The most messages a node sends or receives in one round, over one period (or the
  first `ROUNDS` rounds of a schedule without one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

ROUNDS = 64  # rounds of the clock (and of an aperiodic schedule's degree) per prediction
WALK_ROUNDS, WALKS, BURN_IN = 600, 256, 100  # the simulated random walk of n_eff


@dataclass
class Prediction:
    """What is predicted of one candidate: `degree` (messages a node sends or receives in a
    round, at most), `round_s` (mean simulated seconds a round, over the seeds),
    `fastest_round_s` (of its fastest seed), `effective_neighbors` (None: unknown), `neff_note`
    ("exact", "simulated", or "median of the others"), `heterogeneity` tau(W) (None without
    label counts), `connected_rounds` (the fewest first rounds whose union graph is strongly
    connected: a shorter run cannot reach the average), `rounds_factor` (rounds to the target
    over a complete graph's) and `time_factor` = round_s x rounds_factor."""

    degree: int
    round_s: float
    fastest_round_s: float
    effective_neighbors: float | None
    neff_note: str
    heterogeneity: float | None
    connected_rounds: int = 1
    rounds_factor: float = math.nan
    time_factor: float = math.nan


def max_degree(schedule: Any, rounds: int = ROUNDS) -> int:
    """The most messages one node sends or receives in a round.

    Parameters
    ----------
    schedule : a topologies.Schedule.
    rounds : rounds examined when it has no period.

    Returns
    -------
    int.
    """
    most = 0
    for t in range(schedule.period or rounds):
        graph = schedule.at(t)
        if graph.is_directed():
            degrees = [*dict(graph.in_degree()).values(), *dict(graph.out_degree()).values()]
        else:
            degrees = list(dict(graph.degree()).values())
        most = max(most, *degrees, 0)
    return most


def connected_rounds(schedule: Any, limit: int = ROUNDS) -> int:
    """The fewest first rounds whose union graph is strongly connected (the period, at most, of
    a periodic schedule that is connected at all).

    Parameters
    ----------
    schedule : a topologies.Schedule.
    limit : the most rounds examined.

    Returns
    -------
    int, 1..limit (limit where none is connected by then: a run refuses it).
    """
    import topologies as T

    for rounds in range(1, min(limit, schedule.period or limit) + 1):
        if T.is_strongly_connected(T.union_graph(schedule, 0, rounds)):
            return rounds
    return min(limit, schedule.period or limit)


def round_seconds(clock: Any, schedule: Any, rounds: int = ROUNDS) -> float:
    """Mean simulated seconds a round of `schedule` takes on `clock`, without training.

    Parameters
    ----------
    clock : a fresh `p2pfl.scale.network.Clock` of the run (p2pfl.engine.builder.network_clock).
    schedule : the run's schedule.
    rounds : rounds simulated.

    Returns
    -------
    float, seconds.
    """
    import topologies as T

    for t in range(rounds):
        clock.commit(clock.plan_round(t, schedule.at(t), T.Faults.none(schedule.n)))
    return float(clock.start.max()) / rounds


def simulated_effective_neighbors(schedule: Any, gamma: float, seed: int = 0,
                                  mixing: str = "doubly_stochastic") -> float:
    """n_eff(gamma) of a schedule whose rounds are doubly stochastic, by simulating its random
    walk.

    x <- W(t) (sqrt(gamma) x + noise), `WALKS` independent walks of `WALK_ROUNDS` rounds, the
    first `BURN_IN` left out; n_eff = 1 / ((1 - gamma) mean_i Var(x_i)) (analysis.neighbors).

    Parameters
    ----------
    schedule : its rounds.
    gamma : the decay, in [0, 1).
    seed : the noise's seed.
    mixing : "doubly_stochastic" (Metropolis-Hastings weights of its graphs) or
        "column_stochastic" (the push rule), whose matrices must then be doubly stochastic.

    Returns
    -------
    float, between 1 and n up to the sampling error (about 2 % here).
    """
    import topologies as T

    make = T.doubly_stochastic if mixing == "doubly_stochastic" else T.column_stochastic
    rng = np.random.default_rng(seed)
    x = np.zeros((schedule.n, WALKS))
    second_moment = []
    for t in range(WALK_ROUNDS):
        W = make(schedule.at(t), sparse=True)
        x = W @ (math.sqrt(gamma) * x + rng.standard_normal(x.shape))
        if t >= BURN_IN:
            second_moment.append(float(np.mean(x**2)))
    return 1.0 / ((1.0 - gamma) * float(np.mean(second_moment)))


def effective_neighbors(metrics: dict[str, Any], schedule: Any, mixing: str,
                        gamma: float) -> tuple[float | None, str]:
    """n_eff of a candidate: the exact value its metrics hold, else simulated where its rounds
    are doubly stochastic (checked on its first `ROUNDS` rounds for the push rule).

    Parameters
    ----------
    metrics : its `analysis.study_measure.measure` metrics.
    schedule : its schedule.
    mixing : "doubly_stochastic" or "column_stochastic".
    gamma : the decay.

    Returns
    -------
    tuple (n_eff or None, how it was had: "exact", "simulated" or "").
    """
    if metrics.get("effective_neighbors") is not None:
        return float(metrics["effective_neighbors"]), "exact"
    import topologies as T

    if mixing == "doubly_stochastic" or all(
            T.is_doubly_stochastic(T.column_stochastic(schedule.at(t)))
            for t in range(schedule.period or ROUNDS)):
        return simulated_effective_neighbors(schedule, gamma, mixing=mixing), "simulated"
    return None, ""


def rank_predictions(predictions: dict[str, Prediction], n: int, classes: int) -> list[str]:
    """Fill in each prediction's rounds and time factors; the labels from the fastest predicted.

    Parameters
    ----------
    predictions : {label: Prediction}, `effective_neighbors` None where unknown (the median of
        the others stands in).
    n : nodes.
    classes : K, the data's classes.

    Returns
    -------
    list of labels, smallest `time_factor` first (ties in the given order).
    """
    known = [p.effective_neighbors for p in predictions.values()
             if p.effective_neighbors is not None]
    stand_in = float(np.median(known)) if known else float(n)
    for p in predictions.values():
        if p.effective_neighbors is None:
            p.neff_note = "median of the others"
        neff = min(max(p.effective_neighbors or stand_in, 1.0), float(n))
        skew = (p.heterogeneity or 0.0) / (1.0 - 1.0 / classes) if classes > 1 else 0.0
        p.rounds_factor = math.sqrt(n / neff) + skew
        p.time_factor = p.round_s * p.rounds_factor
    return sorted(predictions, key=lambda label: predictions[label].time_factor)
