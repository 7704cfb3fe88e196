"""DFedAvg (Sun, Li, Wang 2021): K local SGD steps, then x_i <- sum_j W_ij y_j^K."""

from __future__ import annotations

from algorithms.decentralized import Gossip


class DFedAvg(Gossip):
    name = "dfedavg"
    source = "DFedAvg: Sun, Li, Wang 2021, arXiv 2104.11375"
