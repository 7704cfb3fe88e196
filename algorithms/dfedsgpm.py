"""DFedSGPM (ablation of Li et al. 2023): local SGP with heavy-ball local momentum.

m_{i,k} = momentum * m_{i,k-1} + g(z_{i,k}), x_{i,k+1} = x_{i,k} - lr * m_{i,k}, m_{i,-1} = 0,
then Push-Sum mixing of (x, w). DFedSGPSM with rho = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.baselines import Baseline
from algorithms.decentralized import PushSum
from algorithms.options import DFEDSGPSM_CLIP, DFEDSGPSM_MOMENTUM, Momentum, MomentumForm
from p2pfl.options import AlgorithmOptions, paper_default


class DFedSGPM(PushSum):
    name = "dfedsgpm"
    source = "DFedSGPM: the ablation of Li et al. 2023, arXiv 2310.05093"

    @dataclass
    class Options(MomentumForm, AlgorithmOptions):
        momentum: float = paper_default(Momentum, "momentum", 0.9, DFEDSGPSM_MOMENTUM)
        clip_norm: float = paper_default(AlgorithmOptions, "clip_norm", 10.0, DFEDSGPSM_CLIP)

    baselines = (Baseline({"momentum": 0.0}, "OSGP, local SGP (no local momentum)"),)
