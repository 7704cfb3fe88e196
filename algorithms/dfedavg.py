"""DFedAvg (Sun, Li, Wang 2021): K local SGD steps, then x_i <- sum_j W_ij y_j^K."""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.decentralized import Gossip
from algorithms.options import Robust
from p2pfl.options import AlgorithmOptions


class DFedAvg(Gossip):
    name = "dfedavg"
    source = "DFedAvg: Sun, Li, Wang 2021, arXiv 2104.11375"

    @dataclass
    class Options(Robust, AlgorithmOptions):
        pass
