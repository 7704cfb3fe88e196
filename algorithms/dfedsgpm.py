"""DFedSGPM (ablation of Li et al. 2023): local SGP with heavy-ball local momentum.

m_{i,k} = momentum * m_{i,k-1} + g(z_{i,k}), x_{i,k+1} = x_{i,k} - lr * m_{i,k}, m_{i,-1} = 0,
then Push-Sum mixing of (x, w). DFedSGPSM with rho = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.decentralized import PushSum
from algorithms.options import MomentumForm
from p2pfl.options import AlgorithmOptions


class DFedSGPM(PushSum):
    name = "dfedsgpm"
    source = "DFedSGPM: the ablation of Li et al. 2023, arXiv 2310.05093"

    @dataclass
    class Options(MomentumForm, AlgorithmOptions):
        pass
