"""DFedAvg (Sun, Li, Wang 2021; spec 2.2): K local SGD steps, then x_i <- sum_j W_ij y_j^K.

The Gossip round is exactly this algorithm; momentum > 0 gives DFedAvgM's local heavy ball.
"""

from __future__ import annotations

from algorithms.decentralized import Gossip


class DFedAvg(Gossip):
    name = "dfedavg"
