"""Robust gossip: each node combines what its neighbours send by a rule that bounds what a few
Byzantine neighbours can do, vectorized over nodes (`algorithm.aggregator`, docs/robustness.md).

A round's neighbourhoods are padded index tensors (`Neighbourhoods`): row i lists the nodes i
receives from ([n, D], D the largest in-degree of the round's W, padded with i itself), their
mixing weights W[i, j] and a mask of the real entries. The messages are gathered per parameter
block as [n, D, p] (with the attack's messages in the Byzantine senders' slots,
algorithms/attacks.py), and every rule is a few tensor operations over them, no loop over nodes:

- mean: x_i <- W_ii x_i + sum_j W_ij x_j (plain gossip, written out).
- ClippedGossip (He, Karimireddy, Jaggi, "Byzantine-robust decentralized learning via
  self-centered clipping", 2022, arXiv 2202.01545): x_i <- x_i + sum_j W_ij CLIP(x_j - x_i,
  tau_i), CLIP(z, tau) = min(1, tau / ||z||) z over the whole model. `clipped_gossip` takes the
  paper's adaptive radius tau_i = sqrt(sum_{j honest} W_ij ||x_j - x_i||^2 / delta_i),
  delta_i = sum_{j Byzantine} W_ij (infinite when delta_i = 0: plain gossip): the radius of its
  theorem, which knows which neighbours are honest (an oracle, as in the paper's consensus
  experiments). `self_centered_clipping` takes a radius without that knowledge: the option
  `clip_radius`, or with 0 the distance of the node's second-farthest neighbour (the rule of the
  authors' training code, epfml/byzantine-robust-decentralized-optimizer).
- BRIDGE (Fang, Yang, Bajwa, "BRIDGE: Byzantine-resilient decentralized gradient descent",
  IEEE TSIPN 2022), coordinate by coordinate with equal weights: `trimmed_mean` (BRIDGE-T) drops
  the b largest and the b smallest of the neighbours' values and averages the rest with the
  node's own, 1 / (|N_i| - 2b + 1) times their sum; `median` (BRIDGE-M) is the median of the
  node's own value and its neighbours' (the mean of the two middle values for an even count).
  The authors' code trims the neighbourhood with the node's own value in it; the paper keeps
  the own value out of the trimming, as here.
"""

from __future__ import annotations

from typing import Any

import torch

from algorithms.attacks import inject
from algorithms.neighbourhoods import Neighbourhoods, neighbourhoods
from p2pfl.context import RunContext
from p2pfl.core.population import Params
from p2pfl.errors import ConfigError
from topologies.mixing import Matrix

BRIDGE = ("trimmed_mean", "median")  # equal weights over the neighbourhood, not W's


def _distances(own: Params, received: Params) -> torch.Tensor:
    """[n, D] ||x_j - x_i|| over the whole model, from flat blocks [n, p] and [n, D, p]."""
    squares = sum((received[k] - own[k].unsqueeze(1)).square().sum(2) for k in own)
    return squares.sqrt()


def mean(own: Params, received: Params, hood: Neighbourhoods) -> Params:
    """x_i <- W_ii x_i + sum_s W_is v_is for every block.

    Parameters
    ----------
    own : name -> [n, p], the nodes' models.
    received : name -> [n, D, p], what each node received.
    hood : the neighbourhoods.

    Returns
    -------
    Params, name -> [n, p].
    """
    w = hood.weight.unsqueeze(2)
    return {k: hood.self_weight.unsqueeze(1) * own[k] + (w * received[k]).sum(1) for k in own}


def clipped(own: Params, received: Params, hood: Neighbourhoods, radius: torch.Tensor) -> Params:
    """Self-centered clipping: x_i <- x_i + sum_s W_is CLIP(v_is - x_i, radius_i).

    Parameters
    ----------
    own : name -> [n, p].
    received : name -> [n, D, p].
    hood : the neighbourhoods.
    radius : [n], tau_i (inf: no clipping, plain gossip).

    Returns
    -------
    Params, name -> [n, p].
    """
    distance = _distances(own, received)
    scale = torch.where(distance > radius.unsqueeze(1), radius.unsqueeze(1) / distance,
                        torch.ones_like(distance))
    w = (hood.weight * scale).unsqueeze(2)
    return {k: own[k] + (w * (received[k] - own[k].unsqueeze(1))).sum(1) for k in own}


def adaptive_radius(own: Params, received: Params, hood: Neighbourhoods,
                    byzantine_slots: torch.Tensor) -> torch.Tensor:
    """ClippedGossip's radius tau_i = sqrt(sum_{j honest} W_ij ||x_j - x_i||^2 / delta_i).

    Parameters
    ----------
    own : name -> [n, p].
    received : name -> [n, D, p].
    hood : the neighbourhoods.
    byzantine_slots : bool [n, D], the slots whose sender is Byzantine.

    Returns
    -------
    [n] tensor; inf where no neighbour is Byzantine (delta_i = 0).
    """
    squares = _distances(own, received).square()
    honest = hood.mask & ~byzantine_slots
    delta = (hood.weight * byzantine_slots).sum(1)
    spread = (hood.weight * squares * honest).sum(1)
    return torch.where(delta > 0, (spread / delta.clamp_min(1e-300)).sqrt(),
                       torch.full_like(delta, torch.inf))


def second_farthest(own: Params, received: Params, hood: Neighbourhoods) -> torch.Tensor:
    """The distance of each node's second-farthest neighbour (its farthest if it has one).

    Parameters
    ----------
    own : name -> [n, p].
    received : name -> [n, D, p].
    hood : the neighbourhoods.

    Returns
    -------
    [n] tensor; inf for a node without neighbours.
    """
    distance = torch.where(hood.mask, _distances(own, received), -torch.inf)
    top = distance.sort(dim=1, descending=True).values
    pick = (hood.degree >= 2).long().unsqueeze(1)
    radius = top.gather(1, pick).squeeze(1) if top.shape[1] else top.new_empty(len(top))
    return torch.where(hood.degree > 0, radius, torch.full_like(radius, torch.inf))


def trimmed_mean(own: Params, received: Params, hood: Neighbourhoods, trim: int) -> Params:
    """BRIDGE-T: per coordinate, the node's own value and its neighbours' without the `trim`
    largest and the `trim` smallest, averaged.

    Parameters
    ----------
    own : name -> [n, p].
    received : name -> [n, D, p].
    hood : the neighbourhoods; every degree at least 2 * trim.
    trim : b.

    Returns
    -------
    Params, name -> [n, p].
    """
    degree = hood.degree.unsqueeze(1)
    position = torch.arange(hood.mask.shape[1], device=degree.device).unsqueeze(0)
    keep = ((position >= trim) & (position < degree - trim)).unsqueeze(2)
    count = (degree - 2 * trim + 1).to(hood.weight.dtype)
    out = {}
    for k, x in own.items():
        ranked = torch.where(hood.mask.unsqueeze(2), received[k], torch.inf).sort(dim=1).values
        out[k] = (x + torch.where(keep, ranked, 0).sum(1)) / count
    return out


def median(own: Params, received: Params, hood: Neighbourhoods) -> Params:
    """BRIDGE-M: per coordinate, the median of the node's own value and its neighbours'.

    Parameters
    ----------
    own : name -> [n, p].
    received : name -> [n, D, p].
    hood : the neighbourhoods.

    Returns
    -------
    Params, name -> [n, p]; with an even count, the mean of the two middle values.
    """
    count = hood.degree + 1
    low, high = ((count - 1) // 2).view(-1, 1, 1), (count // 2).view(-1, 1, 1)
    out = {}
    for k, x in own.items():
        values = torch.cat([x.unsqueeze(1),
                            torch.where(hood.mask.unsqueeze(2), received[k], torch.inf)], dim=1)
        ranked = values.sort(dim=1).values
        size = (-1, 1, x.shape[1])
        out[k] = (ranked.gather(1, low.expand(size)) + ranked.gather(1, high.expand(size))
                  ).squeeze(1) / 2
    return out


def robust_gossip(ctx: RunContext, t: int, W: Matrix, params: Params, options: Any,
                  steps: int) -> None:
    """`steps` gossip steps of the options' aggregator on `params`, in place, with the run's
    Byzantine nodes sending their attack's messages to their honest neighbours.

    Parameters
    ----------
    ctx : the run (one process: its Byzantine nodes and seed).
    t : round, from 0.
    W : [n, n] the round's mixing matrix (its support: who receives from whom).
    params : name -> [n, *shape], changed in place.
    options : the algorithm's options (aggregator, trim, clip_radius).
    steps : gossip steps.

    Raises
    ------
    ConfigError
        naming algorithm.trim when a node has fewer than 2 * trim neighbours.
    """
    n = ctx.num_nodes
    hood = neighbourhoods(W, ctx.device, ctx.dtype)
    rule = options.aggregator
    if rule == "trimmed_mean" and bool((hood.degree < 2 * options.trim).any()):
        i = int(torch.argmin(hood.degree))
        raise ConfigError("algorithm.trim", f"is {options.trim} but node {i} receives from "
                          f"{int(hood.degree[i])} neighbours in round {t + 1}; trimming "
                          f"{options.trim} at each end needs at least {2 * options.trim}")
    byzantine = (ctx.byzantine.mask(n, ctx.device) if ctx.byzantine is not None
                 else torch.zeros(n, dtype=torch.bool, device=ctx.device))
    byzantine_slots = byzantine[hood.index] & hood.mask
    targets = byzantine_slots & ~byzantine.unsqueeze(1)  # an attacker's honest neighbours
    weights = (hood.weight if rule not in BRIDGE
               else hood.mask / (hood.degree.unsqueeze(1) + 1).to(hood.weight.dtype))
    own = {k: v.view(n, -1) for k, v in params.items()}
    for step in range(steps):
        received = {k: x[hood.index] for k, x in own.items()}
        if bool(targets.any()):
            inject(ctx.byzantine, own, received, hood, byzantine_slots,
                   targets, weights, ctx.seed, t, step)
        if rule == "mean":
            new = mean(own, received, hood)
        elif rule == "trimmed_mean":
            new = trimmed_mean(own, received, hood, options.trim)
        elif rule == "median":
            new = median(own, received, hood)
        else:
            if rule == "clipped_gossip":
                radius = adaptive_radius(own, received, hood, byzantine_slots)
            elif options.clip_radius > 0:
                radius = torch.full((n,), options.clip_radius, device=ctx.device,
                                    dtype=ctx.dtype)
            else:
                radius = second_farthest(own, received, hood)
            new = clipped(own, received, hood, radius)
        for k, x in own.items():
            x.copy_(new[k])
