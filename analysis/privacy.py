"""Pairwise privacy of private gossip (Muffliato): what node i learns about node j's data."""

from __future__ import annotations

import numpy as np

import topologies as T
from topologies import ParameterError


def pairwise_privacy(mixing: object, sigma: float, rounds: int, delta: float = 1e-5,
                     sensitivity: float = 1.0, steps: int = 1,
                     accounting: str = "linear") -> np.ndarray:
    """The [n, n] (epsilon, delta)-DP loss of node j's data in node i's view after `rounds`
    rounds of private gossip of fixed values.

    Each round every node adds N(0, sigma^2 I) to a value of sensitivity `sensitivity` and the
    nodes gossip `steps` times with the round's W. Node i knows its own values and noise and
    sees every message it receives; its Renyi loss of order alpha about j is
    alpha sensitivity^2 / (2 sigma^2) S[i, j], with S from `topologies.gossip_exposure` in the
    given accounting ("linear": the exact divergence of i's view for fixed values, as in
    averaging; "reach": a bound that also holds when the values depend on what was received,
    as in training), turned into (epsilon, delta)-DP at the best order (`topologies.rdp_to_dp`).
    No entry exceeds the local-DP loss of `rounds` direct observations of j's noisy value. A
    training run with [privacy] (sigma as a noise multiplier of clip, sensitivity 2 clip) writes
    the same matrix for the graphs it ran to privacy.json.

    Parameters
    ----------
    mixing : a doubly-stochastic W [n, n] (numpy or scipy.sparse), a networkx graph (its
        Metropolis-Hastings W), a sequence of either (periodic) or a topologies.Schedule (round
        t gossips with doubly_stochastic(schedule.at(t))).
    sigma : the noise's standard deviation, > 0.
    rounds : rounds of noise-then-gossip, >= 1.
    delta : in (0, 1).
    sensitivity : how far one node's value can move when its data changes.
    steps : gossip steps a round, >= 1.
    accounting : "linear" or "reach" (topologies/privacy.py).

    Returns
    -------
    float64 [n, n] array, epsilon[i, j] for the observer i and the data owner j; inf on the
    diagonal.

    Raises
    ------
    ParameterError
        naming sigma, rounds, delta, sensitivity, steps or accounting out of range, or mixing
        when a round has no doubly-stochastic W.

    Examples
    --------
    >>> import networkx as nx
    >>> eps = pairwise_privacy(nx.path_graph(3), sigma=2.0, rounds=1, delta=np.exp(-2.0))
    >>> float(eps[0, 1]), float(eps[0, 2])
    (1.125, 0.0)
    """
    for name, value in (("sigma", sigma), ("sensitivity", sensitivity)):
        if not (np.isfinite(value) and value > 0):
            raise ParameterError(name, f"must be a positive number, got {value!r}")
    if not 0 < delta < 1:
        raise ParameterError("delta", f"must be in (0, 1), got {delta!r}")
    for name, value in (("rounds", rounds), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ParameterError(name, f"must be an integer >= 1, got {value!r}")
    schedule = T.as_schedule(mixing)
    mixings = []
    for t in range(rounds):
        try:
            mixings.append(T.doubly_stochastic(schedule.at(t), sparse=True))
        except ValueError as err:
            raise ParameterError("mixing", f"gives no doubly-stochastic W in round {t}: "
                                 f"{err}") from None
    exposure = T.gossip_exposure(mixings, steps, accounting=accounting)
    return T.rdp_to_dp(T.gaussian_coefficient(sensitivity, sigma) * exposure, delta)

