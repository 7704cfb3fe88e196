"""DFedAvgM (Sun, Li, Wang 2021): DFedAvg whose local steps use heavy-ball momentum.

y^{k+1} = y^k - lr * g(y^k) + momentum * (y^k - y^{k-1}), y^{-1} = y^0 = x_i: the solver's
buffer b <- momentum * b + g, y <- y - lr * b, restarted at zero every round.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.baselines import Baseline
from algorithms.decentralized import Gossip
from algorithms.options import DFEDSGPSM_CLIP, DFEDSGPSM_MOMENTUM, Momentum, MomentumForm, Robust
from p2pfl.options import AlgorithmOptions, paper_default


class DFedAvgM(Gossip):
    name = "dfedavgm"
    source = "DFedAvgM: Sun, Li, Wang 2021, arXiv 2104.11375"

    @dataclass
    class Options(MomentumForm, Robust, AlgorithmOptions):
        momentum: float = paper_default(Momentum, "momentum", 0.9, DFEDSGPSM_MOMENTUM)
        clip_norm: float = paper_default(AlgorithmOptions, "clip_norm", 10.0, DFEDSGPSM_CLIP)

    baselines = (Baseline({"momentum": 0.0}, "DFedAvg (no local momentum)"),)
