"""Push-Sum weight collapse: a warning before the loss blows up, and the weights named when it
does.

A Push-Sum node (SGP, OSGP, DFedSGPM, DFedSGPSM, Push-DIGing, asynchronous SGP) holds a numerator
x_i and a weight w_i and trains its de-biased model z_i = x_i / w_i: a step of lr on the
numerator is a step of lr / w_i on z_i. Every weight starts at 1 and they sum to N (with what is
in flight), so a node whose weight falls far below 1 takes steps many times the configured one,
and its loss blows up soon after. A node loses weight when it gives its shares away faster than
it receives others': in a synchronous round when few messages reach it, and asynchronously when
its inbound messages take long against its pushes (each push keeps P_ii of its weight, so its
weight falls geometrically while what it is sent is still in flight).

The algorithms warn (`WeightCollapseWarning`, once per run) the first time a node's weight is
below `COLLAPSE_W` when a local phase reads it, and name the diverged nodes' weights and steps in
the divergence message (`weights_clause`).
"""

from __future__ import annotations

import math
import warnings

import torch

COLLAPSE_W = 1e-2
"""A node's Push-Sum weight below this (a hundredth of its start value, 1) has collapsed: its
step lr / w is then over 100 times lr, far beyond any step size tuned for w near 1. Healthy runs
stay well above it (docs/algorithms.md, "Weight collapse": smallest weight 0.06 over 20 marks of
24 asynchronous SGP nodes with 25 % 10x stragglers and one push in flight, 0.16 in the DFedSGPSM
paper setting), while a collapse is geometric and crosses it early: the same 24 nodes with 25 %
of their links 10x slower too had a smallest weight of 0.0093 at mark 5 (loss 4.4) and a loss of
65,233 at mark 6 (docs/reports.md), so a threshold of 1e-3 would have said nothing before the
loss did. A one-peer random graph (random_out, k = 1) can reach it by chance in long runs (a
node that no one sends to for 7 rounds keeps 2^-7 of its weight), and the warning then says so
of that node, which does step over 100 times lr."""


class WeightCollapseWarning(UserWarning):
    """A node's Push-Sum weight fell below COLLAPSE_W (said once per run)."""


def collapsed(weights: torch.Tensor) -> tuple[int, float] | None:
    """The smallest weight, where it is below COLLAPSE_W.

    Parameters
    ----------
    weights : [m] float64, Push-Sum weights.

    Returns
    -------
    (position in `weights`, weight), or None when every weight is at least COLLAPSE_W.
    """
    if not len(weights):
        return None
    w, at = torch.min(weights, 0)
    return (int(at), float(w)) if float(w) < COLLAPSE_W else None


def warn_collapse(node: int, w: float, lr: float, when: str, cause: str) -> None:
    """Warn (WeightCollapseWarning) that `node`'s Push-Sum weight has collapsed, in one line.

    Parameters
    ----------
    node : the node (population row).
    w : its weight.
    lr : the configured step size its local phase takes (before the division by w).
    when : where in the run, e.g. "in round 12" or "at mark 3 (0.031 simulated s, its phase 4)".
    cause : the likely cause, for this kind of algorithm.
    """
    warnings.warn(f"Push-Sum weight collapse: node {node} has w = {w:.3g} {when} (every weight "
                  f"starts at 1; this warning is at {COLLAPSE_W:g}), so its local step lr / w = "
                  f"{_step(lr, w):.3g} is {_step(1.0, w):.3g} times lr; likely cause: {cause}; "
                  "its loss may blow up next (docs/algorithms.md, \"Weight collapse\")",
                  WeightCollapseWarning, stacklevel=3)


def weights_clause(nodes: list[int], weights: list[float], lrs: list[float],
                   w_min: float) -> str:
    """The diverged nodes' Push-Sum weights and their steps, for the divergence message.

    Parameters
    ----------
    nodes : the diverged nodes (the first five are named).
    weights : their weights w, in the same order.
    lrs : the configured step sizes of their local phases, in the same order.
    w_min : the smallest weight of any node.

    Returns
    -------
    str, e.g. "node 3 w = 0.125, lr / w = 40 (lr 5; smallest w of any node 0.125)".
    """
    shown = ", ".join(f"node {i} w = {w:.3g}, lr / w = {_step(lr, w):.3g}"
                      for i, w, lr in zip(nodes[:5], weights, lrs))
    low, high = min(lrs[:5]), max(lrs[:5])
    lr = f"{low:.3g}" if low == high else f"{low:.3g} to {high:.3g}"
    return f"{shown} (lr {lr}; smallest w of any node {w_min:.3g})"


def _step(lr: float, w: float) -> float:
    """lr / w (inf for a weight of 0)."""
    return lr / w if w > 0 else math.inf
