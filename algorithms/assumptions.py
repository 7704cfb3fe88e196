"""Which honest nodes a robust rule's assumption fails for, round by round (docs/robustness.md).

Every aggregator of algorithms/robust.py bounds what Byzantine neighbours can do only under an
assumption on each honest node i's neighbourhood in the round's mixing matrix W: d_i its
neighbours (the nodes it receives from, itself left out), b_i the Byzantine ones among them,
delta_i = sum_{j Byzantine} W_ij their weight.

- mean (plain gossip): b_i = 0; it has no defence.
- clipped_gossip: ClippedGossip's theorem (He, Karimireddy, Jaggi 2022) asks the largest
  Byzantine weight delta_max to be small against the spectral gap gamma of the honest graph
  (delta_max = O(gamma^2)), a condition on the whole graph; checked here is the part that no
  graph can make up for: delta_i < 1/2, the honest nodes (i included) hold most of i's weight.
- self_centered_clipping: delta_i < 1/2 as well; with the radius of the second-farthest
  neighbour (clip_radius = 0) also b_i <= 1, since beyond one Byzantine neighbour the radius is an
  attacker's distance.
- trimmed_mean (BRIDGE-T with b = trim): b_i <= trim, and d_i >= 2 trim + 1 so that a neighbour's
  value survives the trim (with fewer the node keeps its own model). A node without neighbours in
  a round (offline) hears no one under any rule and is not counted.
- median (BRIDGE-M): an honest majority of the values i takes the median of, its own included:
  2 b_i < d_i + 1.

`check` evaluates this for one round; `AssumptionLedger` keeps, over a run, which honest nodes
it failed for, in how many rounds, and warns once.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from topologies.mixing import Matrix


class AssumptionWarning(UserWarning):
    """A robust rule runs where its assumption fails for some honest node (once a run)."""


def requirement(rule: str, trim: int, clip_radius: float) -> str:
    """The assumption of `rule` on every honest node i, in words.

    Parameters
    ----------
    rule : the aggregator.
    trim : trimmed_mean's b.
    clip_radius : self_centered_clipping's radius (0: the second-farthest neighbour's).

    Returns
    -------
    str, one line.
    """
    majority = "Byzantine weight delta_i = sum_{j Byzantine} W_ij < 1/2"
    return {
        "mean": "no Byzantine neighbour (plain gossip has no defence)",
        "clipped_gossip": f"{majority} (the per-node part of the theorem's delta_max = "
                          "O(gamma^2))",
        "self_centered_clipping": majority + ("" if clip_radius > 0 else
                                              " and at most 1 Byzantine neighbour (the radius "
                                              "is the second-farthest neighbour's distance)"),
        "trimmed_mean": f"at most trim = {trim} Byzantine neighbours and at least 2 trim + 1 = "
                        f"{2 * trim + 1} neighbours (else no neighbour survives the trim)",
        "median": "an honest majority of the node's value and its neighbours' "
                  "(2 b_i < d_i + 1)",
    }[rule]


@dataclass(frozen=True)
class Check:
    """One round's neighbourhood counts and the honest nodes the rule's assumption fails for."""

    neighbours: np.ndarray  # int [n], d_i
    byzantine_neighbours: np.ndarray  # int [n], b_i
    byzantine_weight: np.ndarray  # float [n], delta_i
    broken: np.ndarray  # bool [n], True at an honest node whose assumption fails


def check(W: Matrix, byzantine: np.ndarray, rule: str, trim: int,
          clip_radius: float) -> Check:
    """Evaluate the assumption of `rule` at every honest node for one round.

    Parameters
    ----------
    W : [n, n] the round's mixing matrix, dense or scipy.sparse; W[i, j] > 0 when i receives
        from j.
    byzantine : bool [n], the Byzantine nodes.
    rule : the aggregator.
    trim : trimmed_mean's b.
    clip_radius : self_centered_clipping's radius (0: the second-farthest neighbour's).

    Returns
    -------
    Check.
    """
    M = sp.coo_array(W)
    n = M.shape[0]
    off = (M.row != M.col) & (M.data != 0)
    rows, cols, weights = M.row[off], M.col[off], M.data[off]
    d = np.bincount(rows, minlength=n)
    b = np.bincount(rows, weights=byzantine[cols], minlength=n).astype(np.int64)
    delta = np.bincount(rows, weights=weights * byzantine[cols], minlength=n)
    if rule == "mean":
        holds = b == 0
    elif rule == "trimmed_mean":
        holds = (b <= trim) & ((d == 0) | (d >= 2 * trim + 1))
    elif rule == "median":
        holds = 2 * b < d + 1
    else:
        holds = delta < 0.5
        if rule == "self_centered_clipping" and clip_radius == 0:
            holds &= b <= 1
    return Check(d, b, delta, ~holds & ~byzantine)


class AssumptionLedger:
    """Over a run: for every honest node, the rounds in which its rule's assumption failed.

    Parameters
    ----------
    n : nodes.
    byzantine : the Byzantine node ids.
    rule, trim, clip_radius : the aggregator and its options.
    """

    def __init__(self, n: int, byzantine: tuple[int, ...], rule: str, trim: int,
                 clip_radius: float) -> None:
        self.byzantine = np.zeros(n, dtype=bool)
        self.byzantine[list(byzantine)] = True
        self.rule, self.trim, self.clip_radius = rule, trim, clip_radius
        self.rounds = 0  # rounds checked
        self.broken_rounds = np.zeros(n, dtype=np.int64)
        self.first_round = np.full(n, -1, dtype=np.int64)  # 1-based, -1: never
        self.most_byzantine = np.zeros(n, dtype=np.int64)  # the largest b_i seen
        self.fewest_neighbours = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        self.largest_weight = np.zeros(n)  # the largest delta_i seen
        self.last_count = 0  # honest nodes broken in the last round checked
        self.warned = False

    def add(self, t: int, W: Matrix) -> Check:
        """Check round t's W; warn (AssumptionWarning) the first time a node's assumption fails.

        Parameters
        ----------
        t : round, from 0.
        W : [n, n] the round's mixing matrix.

        Returns
        -------
        Check.
        """
        found = check(W, self.byzantine, self.rule, self.trim, self.clip_radius)
        self.rounds += 1
        honest = ~self.byzantine
        self.most_byzantine[honest] = np.maximum(self.most_byzantine,
                                                 found.byzantine_neighbours)[honest]
        self.fewest_neighbours[honest] = np.minimum(self.fewest_neighbours,
                                                    found.neighbours)[honest]
        self.largest_weight[honest] = np.maximum(self.largest_weight,
                                                 found.byzantine_weight)[honest]
        self.broken_rounds += found.broken
        self.first_round[found.broken & (self.first_round < 0)] = t + 1
        self.last_count = int(found.broken.sum())
        if self.last_count and not self.warned:
            self.warned = True
            nodes = np.flatnonzero(found.broken)
            shown = "; ".join(f"node {i}: {found.byzantine_neighbours[i]} of "
                              f"{found.neighbours[i]} neighbours Byzantine, weight "
                              f"{found.byzantine_weight[i]:.3g}" for i in nodes[:5])
            more = f"; and {len(nodes) - 5} more" if len(nodes) > 5 else ""
            listed = ("; byzantine.json lists every such node when the run finishes"
                      if self.byzantine.any() else "")
            warnings.warn(f"aggregator {self.rule!r} assumes, at every honest node, "
                          f"{requirement(self.rule, self.trim, self.clip_radius)}; in round "
                          f"{t + 1} that fails at {len(nodes)} ({shown}{more}){listed}",
                          AssumptionWarning, stacklevel=2)
        return found

    def record(self, checked: str) -> dict[str, Any]:
        """The `assumption` entry of byzantine.json.

        Parameters
        ----------
        checked : what was checked, in words (e.g. "30 rounds run").

        Returns
        -------
        dict: the aggregator, its requirement, what was checked, the honest nodes it failed for
        (`broken`: node id, rounds failed, the first such round (1-based), and over the rounds
        checked the most Byzantine neighbours, the fewest neighbours and the largest Byzantine
        weight) and the largest Byzantine weight of any honest node (delta_max).
        """
        honest = ~self.byzantine
        broken = [{"node": int(i), "rounds": int(self.broken_rounds[i]),
                   "first_round": int(self.first_round[i]),
                   "byzantine_neighbours": int(self.most_byzantine[i]),
                   "neighbours": int(self.fewest_neighbours[i]),
                   "byzantine_weight": float(self.largest_weight[i])}
                  for i in np.flatnonzero(self.broken_rounds)]
        return {"aggregator": self.rule,
                "requires": requirement(self.rule, self.trim, self.clip_radius),
                "checked": checked, "broken": broken,
                "delta_max": float(self.largest_weight[honest].max(initial=0.0))}

    def state_dict(self) -> dict[str, Any]:
        """The counts so far, for a checkpoint.

        Returns
        -------
        dict.
        """
        return {"rounds": self.rounds, "warned": self.warned, "last_count": self.last_count,
                **{k: torch.from_numpy(getattr(self, k).copy()) for k in _ARRAYS}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned.

        Parameters
        ----------
        state : a `state_dict`.
        """
        self.rounds, self.warned = int(state["rounds"]), bool(state["warned"])
        self.last_count = int(state["last_count"])
        for k in _ARRAYS:
            setattr(self, k, state[k].numpy().copy())


_ARRAYS = ("broken_rounds", "first_round", "most_byzantine", "fewest_neighbours",
           "largest_weight")
