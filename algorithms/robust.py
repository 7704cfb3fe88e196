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
  experiments). What that radius guarantees is the theorem's worst case over all attacks: the
  Byzantine neighbours move i by at most delta_i tau_i = sqrt(delta_i sum_{j honest} W_ij
  ||x_j - x_i||^2) a step, and training reaches an O(delta_max zeta^2 / gamma^2) neighbourhood
  of a stationary point (delta_max = max_i delta_i over the honest nodes, zeta^2 the
  heterogeneity, gamma the honest graph's spectral gap) when delta_max is small against
  gamma^2. It is not the best radius against a given attack, nor a bound on what other radii
  do: a message within tau_i of x_i (ALIE's, which stays inside the honest spread) passes
  unclipped, and a smaller radius can hold a given attack better (self-centered clipping
  against dissensus).
  `self_centered_clipping` takes a radius without that knowledge: the option `clip_radius`, or
  with 0 the distance of the node's second-farthest neighbour (the rule of the authors' training
  code, epfml/byzantine-robust-decentralized-optimizer).
- BRIDGE (Fang, Yang, Bajwa, "BRIDGE: Byzantine-resilient decentralized gradient descent",
  IEEE TSIPN 2022), coordinate by coordinate with equal weights: `trimmed_mean` (BRIDGE-T) drops
  the b largest and the b smallest of the neighbours' values and averages the rest with the
  node's own, 1 / (|N_i| - 2b + 1) times their sum; `median` (BRIDGE-M) is the median of the
  node's own value and its neighbours' (the mean of the two middle values for an even count).
  The authors' code trims the neighbourhood with the node's own value in it; the paper keeps
  the own value out of the trimming, as here. A node with 2b or fewer neighbours has none left
  after the trim and keeps its own value.

Each rule's assumption on an honest node's neighbourhood (how many Byzantine neighbours it
withstands) is in algorithms/assumptions.py, which checks it every round.
"""

from __future__ import annotations

from typing import Any

import torch

from algorithms.attacks import inject
from algorithms.neighbourhoods import Neighbourhoods, neighbourhoods
from p2pfl.context import RunContext
from p2pfl.core.population import Params
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

    The Byzantine neighbours move x_i by at most delta_i radius_i (delta_i their weight); the
    rule assumes delta_i < 1/2 (algorithms/assumptions.py).

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

    An oracle: it knows which neighbours are honest. It is the radius of the paper's theorem,
    whose guarantee is for the worst attack when delta_max is small against the honest graph's
    spectral gap (module docstring); it is not the radius that holds a given attack best.

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

    The radius is an honest neighbour's distance while at most one neighbour is Byzantine (the
    farthest); with two or more far away it is an attacker's.

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
    largest and the `trim` smallest, averaged: sum / (|N_i| - 2 trim + 1).

    It withstands up to `trim` Byzantine neighbours; a node with 2 trim or fewer neighbours keeps
    its own value (none survives the trim), which algorithms/assumptions.py records.

    Parameters
    ----------
    own : name -> [n, p].
    received : name -> [n, D, p].
    hood : the neighbourhoods.
    trim : b.

    Returns
    -------
    Params, name -> [n, p].
    """
    degree = hood.degree.unsqueeze(1)
    position = torch.arange(hood.mask.shape[1], device=degree.device).unsqueeze(0)
    keep = ((position >= trim) & (position < degree - trim)).unsqueeze(2)
    count = ((degree - 2 * trim).clamp_min(0) + 1).to(hood.weight.dtype)
    out = {}
    for k, x in own.items():
        ranked = torch.where(hood.mask.unsqueeze(2), received[k], torch.inf).sort(dim=1).values
        out[k] = (x + torch.where(keep, ranked, 0).sum(1)) / count
    return out


def median(own: Params, received: Params, hood: Neighbourhoods) -> Params:
    """BRIDGE-M: per coordinate, the median of the node's own value and its neighbours'.

    It stays within the honest values while they are a strict majority: 2 b_i < |N_i| + 1 with
    b_i Byzantine neighbours.

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
    """
    n = ctx.num_nodes
    hood = neighbourhoods(W, ctx.device, ctx.dtype)
    rule = options.aggregator
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
