"""What Byzantine nodes send ([byzantine] attack, docs/robustness.md).

The attackers are omniscient, as the papers' threat model has it: in every gossip step they know
every honest node's model (the message it is about to send), the graph, the mixing weights and
the rule each receiver aggregates with, and they collude. An attacker sends one message per
honest neighbour (the slot (i, s) of the receiver's padded neighbourhood), computed from what that
receiver will see; between themselves the attackers exchange their own models, which follow the
protocol. With x_b the attacker's own model and, for a receiver i, H_i its honest closed
neighbourhood (i and its honest neighbours), mu_i and sd_i their coordinate-wise mean and
standard deviation (n - 1 in the denominator):

- none: x_b, the attacker's own model: the nodes are placed and left out of the honest metrics
  as with an attack, but behave honestly (the baseline of the same honest nodes).
- sign_flip: -scale x_b, to every neighbour (the reference code's bit flipping, scale 1).
- gaussian: x_b + std xi, xi ~ N(0, I) drawn afresh for every message.
- alie (Baruch, Baruch, Goldberg, "A Little Is Enough", NeurIPS 2019): mu_i - z sd_i, with
  z = `alie_z(N, f)` for N nodes of which f are Byzantine unless `z` is set (the engine puts the
  z used in the attack's parameters).
- ipm (Xie, Koyejo, Gupta, "Fall of Empires: inner product manipulation", UAI 2020):
  -ipm_epsilon mu_i.
- dissensus (He, Karimireddy, Jaggi 2022): x_i - eps sum_{k in H_i} w_ik (x_k - x_i) /
  sum_{b Byzantine} w_ib, so that i's gossip step moves it (1 - eps) times as far as the
  honest pull; w is the receiver's weights, W for mean and clipping, 1 / (|N_i| + 1) for
  BRIDGE's trimmed mean and median.

The per-receiver statistics of alie and ipm follow the authors' decentralized code, which
computes them over the target's honest closed neighbourhood.
"""

from __future__ import annotations

import math

import torch
from scipy.stats import norm

from algorithms.neighbourhoods import Neighbourhoods
from p2pfl.context import Byzantine
from p2pfl.core.population import Params
from p2pfl.core.seeding import torch_generator

ATTACKS = ("sign_flip", "gaussian", "alie", "ipm", "dissensus", "none")
# each attack's parameters ([byzantine] fields) with their defaults
ATTACK_PARAMS: dict[str, dict[str, float]] = {
    "none": {}, "sign_flip": {"scale": 1.0}, "gaussian": {"std": 1.0}, "alie": {"z": 0.0},
    "ipm": {"ipm_epsilon": 0.1}, "dissensus": {"dissensus_epsilon": 1.5}}


def alie_z(n: int, f: int) -> float:
    """ALIE's default z: Phi^-1((n - f - s) / (n - f)), s = floor(n / 2 + 1) - f.

    The attackers need s honest supporters for a majority; an honest value lies farther from the
    mean than mu - z sd with probability 1 - Phi(z), so s of the n - f honest nodes do while
    Phi(z) <= (n - f - s) / (n - f): the authors' decentralized code (He, Karimireddy, Jaggi,
    epfml/byzantine-robust-decentralized-optimizer). Baruch et al.'s federated paper writes
    Phi^-1((n - s) / n), counting the supporters among all n nodes, which is 0 (the honest mean,
    no attack) for one attacker of 16 where this gives -0.084 (mu + 0.084 sd).

    Parameters
    ----------
    n : nodes.
    f : Byzantine nodes among them.

    Returns
    -------
    float (inf when f leaves no supporter to win over, s <= 0).

    Examples
    --------
    >>> round(alie_z(16, 1), 4), round(alie_z(16, 3), 4)
    (-0.0837, 0.0966)
    """
    s = math.floor(n / 2 + 1) - f
    return float(norm.ppf((n - f - s) / (n - f))) if s > 0 else math.inf


def _honest_stats(own: Params, received: Params, honest: torch.Tensor
                  ) -> tuple[Params, Params]:
    """Coordinate-wise mean and standard deviation of each receiver's honest closed
    neighbourhood: its own row and the slots marked `honest` ([n, D])."""
    count = honest.sum(1, keepdim=True) + 1
    mask = honest.unsqueeze(2)
    means, stds = {}, {}
    for k, x in own.items():
        mu = (x + torch.where(mask, received[k], 0).sum(1)) / count
        squares = (x - mu).square() + torch.where(mask, (received[k] - mu.unsqueeze(1)).square(),
                                                  0).sum(1)
        means[k] = mu
        stds[k] = (squares / (count - 1).clamp_min(1)).sqrt()
    return means, stds


def inject(byzantine: Byzantine, own: Params, received: Params, hood: Neighbourhoods,
           byzantine_slots: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor,
           seed: int, t: int, step: int) -> None:
    """Write the attack's messages into the slots `targets` of `received`, in place.

    Parameters
    ----------
    byzantine : the run's Byzantine nodes and attack.
    own : name -> [n, p], every node's model (the honest ones' messages).
    received : name -> [n, D, p], what each node receives; the target slots are overwritten.
    hood : the neighbourhoods (index [n, D], mask [n, D]).
    byzantine_slots : bool [n, D], slots whose sender is Byzantine.
    targets : bool [n, D], those whose receiver is honest: where the attack's messages go.
    weights : [n, D], the receivers' aggregation weights of their neighbours (dissensus).
    seed, t, step : the run's seed, the round and the gossip step (gaussian's noise stream).
    """
    attack, p = byzantine.attack, byzantine.params
    if attack == "none":  # the own models, already in `received`
        return
    rows, slots = targets.nonzero(as_tuple=True)
    senders = hood.index[rows, slots]
    if attack in ("alie", "ipm"):
        honest = hood.mask & ~byzantine_slots
        means, stds = _honest_stats(own, received, honest)
    elif attack == "dissensus":
        honest_w = weights * (hood.mask & ~byzantine_slots)
        attacker_w = (weights * byzantine_slots).sum(1, keepdim=True)
        epsilon = p["dissensus_epsilon"]
    generator = torch_generator(seed, "byzantine", t, step) if attack == "gaussian" else None
    for k, x in own.items():
        if attack == "sign_flip":
            message = -p["scale"] * x[senders]
        elif attack == "gaussian":
            noise = torch.randn(len(rows), x.shape[1], generator=generator, dtype=x.dtype)
            message = x[senders] + p["std"] * noise.to(x.device)
        elif attack == "alie":
            message = (means[k] - p["z"] * stds[k])[rows]
        elif attack == "ipm":
            message = -p["ipm_epsilon"] * means[k][rows]
        else:
            pull = (honest_w.unsqueeze(2) * (received[k] - x.unsqueeze(1))).sum(1)[rows]
            message = x[rows] - epsilon * pull / attacker_w[rows]
        received[k][rows, slots] = message
