"""Option groups that several algorithms share, each field declared once (p2pfl.options.option).

An algorithm's `Options` combines the groups it reads with `AlgorithmOptions`, e.g.
`class Options(Momentum, Sam, AlgorithmOptions)`; anything only it reads is declared there.
"""

from __future__ import annotations

from dataclasses import dataclass

from p2pfl.options import option

MOMENTUM_FORMS = ("heavy_ball", "dampened")  # m = a m + g | m = a m + (1 - a) g
SAMPLINGS = ("fixed", "bernoulli")


# Where the paper defaults that several algorithms take come from (p2pfl.options.paper_default).
DFEDSGPSM_MOMENTUM = ("Li et al. 2023 (DFedSGPSM), arXiv 2310.05093, App. A: momentum 0.9 for "
                      "DFedAvgM and DFedSGPSM on MNIST and CIFAR-10 (0.1 on CIFAR-100)")
DFEDSGPSM_CLIP = ("the code of Li et al. 2023 (DFedSGPSM), configs/dfedsgpsm_paper: every gradient "
                  "clipped to norm 10 'to avoid nan loss' (lr 0.1 with momentum 0.9 diverges "
                  "without it)")
DFL_RHO = ("unconfirmed: the value is lost from the text of Shi et al. 2023 (DFedSAM, arXiv "
           "2302.04083) and Li et al. 2023 (DFedSGPSM, Fig. 2c); 0.05 of the range {0.01, "
           "0.02, 0.05, 0.1} to tune it over, as configs/dfedsgpsm_paper runs it")
FL_SIMULATOR_RHO = ("rho 0.1 of the README of woodenchild95/FL-Simulator, which implements "
                    "FedSpeed, FedSMOO and MoFedSAM; the FedFSA paper's appendix (Xing et al. "
                    "2025, AAAI) runs these baselines so")
FEDLESAM_RHO = ("unconfirmed: the value is lost from the text of Fan et al. 2024 (FedLESAM, arXiv "
                "2405.18890, App. E.1); the authors' guidance rho = 0.1 x the local lr (0.1)")


@dataclass
class Momentum:
    momentum: float = option(0.0, low=0, high=1, high_open=True,
                             doc="heavy-ball coefficient of the local solver (reset every round)")


@dataclass
class MomentumForm(Momentum):
    momentum_form: str = option("heavy_ball", choices=MOMENTUM_FORMS,
                                doc="heavy_ball: m = a m + g; dampened: m = a m + (1 - a) g")


@dataclass
class Sam:
    rho: float = option(0.0, low=0, doc="SAM radius of the local ascent step (0: plain SGD)")


@dataclass
class GossipSteps:
    gossip_steps: int = option(1, low=1, doc="gossip exchanges Q per round (x <- W^Q y)")


@dataclass
class ServerStep:
    server_lr: float = option(1.0, low=0, low_open=True, doc="global (server) learning rate")


@dataclass
class Dual:
    dyn_alpha: float = option(0.1, low=0, low_open=True,
                              doc="FedDyn alpha = lambda of FedSpeed/FedSMOO/FedLESAM-D = 1/beta")


ORDERS = ("atc", "cta", "atc_xy")


@dataclass
class Order:
    """The order of a round's local update and mixing, one name for every algorithm that has
    both forms; "" is the order of the algorithm's paper (its `paper_order`)."""

    order: str = option("", choices=("", *ORDERS),
                        doc="'' = the paper's; atc: adapt then combine, x <- M (x - lr g) "
                        "(trackers: x <- M (x - lr y), y <- M y + dg; DSGT, Push-Pull); cta: "
                        "combine then adapt, x <- M x - lr g (D-PSGD; trackers: DIGing, AB); "
                        "atc_xy: y <- M (y + dg), then x <- M (x - lr y) (GT-DSGD; dsgt only)")


# the option names of the release before: one release more, with a FutureWarning
RENAMED = {"dpsgd_order": "order", "tracking_order": "order"}


AGGREGATORS = ("mean", "clipped_gossip", "trimmed_mean", "median", "self_centered_clipping")


@dataclass
class Robust:
    """How a gossip node combines what its neighbours send (algorithms/robust.py,
    docs/robustness.md); "mean" is plain gossip."""

    aggregator: str = option("mean", choices=AGGREGATORS,
                             doc="mean: x_i <- sum_j W_ij x_j; clipped_gossip: ClippedGossip "
                             "with the paper's adaptive radius; trimmed_mean, median: BRIDGE's "
                             "coordinate-wise screening of the neighbourhood; "
                             "self_centered_clipping: ClippedGossip with clip_radius")
    trim: int = option(1, low=0, doc="trimmed_mean: values cut at each end of every coordinate "
                       "(BRIDGE's b, the Byzantine neighbours it withstands)")
    clip_radius: float = option(0.0, low=0, doc="self_centered_clipping: the radius tau; 0 = the "
                                "distance of the second-farthest neighbour, node by node")
